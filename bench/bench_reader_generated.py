"""The key reader on a generated corpus written without reading it (issue 49 item 6; tests/textgen.py).

Generates N distinct texts (seeded: quantity phrases x operator phrasings x question frames, near misses one
word apart, negations), reads each with `canonical_key` and, where keyed, `value`, and prints the counts:
texts, keyed, keyed texts with a wrong value, keyed undefined or ambiguous texts, keys joining texts whose
values differ, the word properties of item 2 on a sample (--properties), coverage by phrase class (keyed /
texts with a defined value) and the reader's median / p99 ms per text (key + value, one process, cache cold
for each distinct text). With --failures-md PATH, also writes the failure classes with 3 examples each.

Usage: python bench/bench_reader_generated.py [--n 100000] [--seed 4902] [--properties 300] [--json]
       [--failures-md PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import textgen  # noqa: E402
import textgen_check as C  # noqa: E402

POLICY = """What the generator calls undefined or ambiguous (tests/textgen_render.py says it in code):
- undefined: division by zero, 0^0, 0 to a negative power, an even root of a negative, a root or rational power
  without a rational value (sqrt 50, 2^(1/2)), a percent of 0.
- ambiguous (readings with different values, so no key): word operators chained without a cue ("two plus three
  times four"; only +/- chains or x chains in plain infix words read left to right); a prefix word before, or a
  postfix word after, an infix phrase ("twice 3 plus 4", "the sum of 2 and 3 squared", "1 - 17 squared"); a power
  after a negative number ("-5^2", "negative five squared"); a written power after a digit fraction or mixed
  number ("3/4^2", "2 1/2^2", "7 \\frac{3}{5}^{3}"); any operator after a word mixed number ("two and a half
  squared", "twice two and a half"); "8^1/3", "6 / 3/4";
  "2^3^2"; a fraction with more than / less than / increased by / decreased by ("a third less than 6": 17/3 or
  4); "80 plus 15%"; "the difference between a and b" with a < b; "the quotient of a and b" and "how many times
  does b go into a" where whole numbers do not divide.
- one value: same-level symbols left to right ("8 / 2 * 4" = 16); a digit fraction or mixed number is one number to words ("3/4 squared" = 9/16, "6 divided by
  3/4" = 8), so is a counted idiom ("two dozen squared" = 576); a written power is one unit ("2^3 doubled" = 16);
  "3 \\frac{1}{4}" = 13/4; an amount in cents may be answered in dollars (both accepted)."""


def _kind(cls: str) -> str:
    return cls.split(" | ")[0]


def measure(n: int, seed: int, properties: int) -> tuple[dict, dict, dict]:
    t0 = time.perf_counter()
    corpus = textgen.generate(n, seed)
    items = list(corpus.items.values())
    gen_s = time.perf_counter() - t0
    got = C.read([it.text for it in items])
    ms = sorted(got[it.text][2] for it in items)
    fails = C.failures(items, got)
    sample = C.property_sample(items, properties, seed)
    pfails = C.property_failures(sample, got) if properties else {}
    count = {}
    for f in (fails, pfails):
        for cls, rows in f.items():
            count[_kind(cls)] = count.get(_kind(cls), 0) + len(rows)
    statuses = {s: sum(it.status == s for it in items) for s in ("ok", "undefined", "ambiguous")}
    out = {
        "texts": len(items), "seed": seed, "statuses": statuses,
        "keyed": sum(got[it.text][0] is not None for it in items),
        "wrong_values": count.get("wrong value", 0), "keyed_undefined": count.get("keyed undefined", 0),
        "keyed_ambiguous": count.get("keyed ambiguous", 0), "joins": count.get("join", 0),
        "reader_raised": count.get("reader raised", 0),
        "property_sample": len(sample),
        "property_sample_keyed": sum(got[it.text][0] is not None for it in sample),
        "property_failures": {k: v for k, v in count.items()
                              if k not in ("wrong value", "keyed undefined", "keyed ambiguous", "join",
                                           "reader raised")},
        "generator_conflicts": len(corpus.conflicts),
        "ms_per_text": {"median": round(statistics.median(ms), 3), "p99": round(ms[int(0.99 * (len(ms) - 1))], 3),
                        "max": round(ms[-1], 1)},
        "generate_s": round(gen_s, 1),
        "coverage": {k: f"{a}/{b}" for k, (a, b) in C.coverage(items, got).items()},
    }
    return out, fails, pfails


def failures_md(out: dict, fails: dict, pfails: dict, command: str) -> str:
    lines = ["# Generated-corpus failures of the key reader (tests/textgen.py; refreshed on each run)", "",
             f"Command: `{command}`; {out['texts']} texts, {out['keyed']} keyed; wrong values "
             f"{out['wrong_values']}, keyed undefined {out['keyed_undefined']}, keyed ambiguous "
             f"{out['keyed_ambiguous']}, joins {out['joins']}; properties on {out['property_sample_keyed']} keyed "
             f"texts: {out['property_failures']}.", "",
             "Each line: the text, the reader's key and value, and the generator's value (for an ambiguous text, "
             "its readings: no key is the sound answer).", "", POLICY, ""]
    for f in (fails, pfails):
        for cls in sorted(f, key=lambda c: (_kind(c), -len(f[c]))):
            lines.append(f"## {cls} ({len(f[cls])})")
            lines += [f"- `{row}`" for row in f[cls][:3]]
            lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=4902)
    ap.add_argument("--properties", type=int, default=300, help="base texts whose word properties are checked")
    ap.add_argument("--json", action="store_true", help="one JSON line (without it: indented, then a report)")
    ap.add_argument("--failures-md", type=Path, help="also write the failure classes, 3 examples each")
    a = ap.parse_args()
    out, fails, pfails = measure(a.n, a.seed, a.properties)
    if a.failures_md:
        a.failures_md.write_text(failures_md(out, fails, pfails, "python " + " ".join(sys.argv)))
    if a.json:
        print(json.dumps(out))
    else:
        print(json.dumps(out, indent=1))
        print(C.report({**fails, **pfails}))


if __name__ == "__main__":
    main()
