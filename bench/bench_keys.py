"""Canonical-key reader: wall-clock per text on normal and hostile texts, and coverage on public generators.

    python bench/bench_keys.py [--size 300] [--repeats 3] [--json]

"normal" is every problem of the public corpus (reasoning_gym basic_arithmetic in its four formats,
simple_equations, chain_sum, decimal_chain_sum, products) plus the built-in families; "hostile" is towers,
100,000 nested brackets, 20,000-char sums, lone surrogates, NUL, 5,000-digit numbers and texts built to
maximize the reader's work (nested open-scope words, ambiguous lists, long lists and chains, and SEARCHED:
the costliest texts a hill-climbing search by CPU time found; all of them run into MAX_STEPS). Each text is keyed with the cache
bypassed; the per-text time is the best of `--repeats` runs (other load on a shared machine only adds).
Coverage is the share of corpus problems that get a key; collisions are keys shared by problems whose
generator answers differ (must be 0); value_differs_from_gold counts keyed problems whose exact value is
not the generator's answer (basic_arithmetic answers inexact `/` by floor division); the reader's
deterministic work (grammar steps, bounded by MAX_STEPS) is reported too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path

from galahad.flywheel.problems import canonical, families, reader_lexer

CORPUS = [("basic_arithmetic", {}), ("basic_arithmetic", {"format_style": "natural"}),
          ("basic_arithmetic", {"format_style": "natural", "whitespace": "no_space"}),
          ("basic_arithmetic", {"whitespace": "random"}), ("simple_equations", {}), ("chain_sum", {}),
          ("decimal_chain_sum", {}), ("products", {})]
# texts a hill-climbing search (by CPU time) found to cost the reader the most (shared with the tests)
SEARCHED = json.loads((Path(__file__).parent / "data" / "key_reader_worst.json").read_text())["texts"]
HOSTILE = [
    "What is 10**10**10 // 3?", "What is 10**10**8 // 3?", "What is 10**10**6 // 3?", "What is 2^(10^10) + 1?",
    "What is " + "(" * 100_000 + "1" + ")" * 100_000 + "?", "What is " + "+".join(["1"] * 10_000) + "?",
    "1+" * 149 + "1", "What is " + "(" * 14 + "1 + 2" + ")" * 14 + "?", "What is \ud800 + 1?", "What is 1\x00 + 1?",
    "What is " + "9" * 5000 + " + 1?", "What is " + "9" * 30 + " * " + "9" * 30 + "?",
    "What is " + "twice " * 14 + "3?", "What is " + "- " * 140 + "3?",
    "What is " + "the sum of " * 12 + "1" + " and 1" * 12 + "?",
    "the product of the sum of " * 6 + "2 and 3" + " and 4" * 12,
    "What is the sum of " + " and ".join(["one hundred and one"] * 12) + "?",
    "what number is twice half of half of the square of the square of the square of half of half of one half of "
    "what number add one plus twice the square of half of one times one add the sum of 1 , the sum of one hundred "
    "a number the product of and the square of add solve for x: a number ) what number",
    "Solve for x: " + " + ".join(["2x"] * 30) + " = 3", "x" * 20_000, "\ud800" * 20_000,
    "Add " + " and ".join(["2"] * 60), "What is " + " divided by ".join(["3/4"] * 40) + "?",
    "What is " + " plus ".join(["three quarters"] * 40) + "?", "What is " + " plus ".join(["1"] * 60) + "?",
    "Solve for x: " + " plus ".join(["half of x"] * 8) + " = 3",
    *SEARCHED,
]


def _answer(text: str) -> Fraction | None:
    try:
        return Fraction(Decimal(text.strip()))
    except (InvalidOperation, ValueError):
        return None


def corpus(size: int) -> list[tuple[str, str, str]]:
    import reasoning_gym as rg

    rows = []
    for name, cfg in CORPUS:
        rows += [(name, it["question"], it["answer"]) for it in rg.create_dataset(name, size=size, seed=7, **cfg)]
    return rows


def timing(texts: list[str], repeats: int) -> dict:
    best = []
    for text in texts:
        runs = []
        for _ in range(repeats):
            start = time.perf_counter()
            canonical._read.__wrapped__(text) if isinstance(text, str) and len(text) <= canonical.MAX_CHARS \
                else canonical.canonical_key(text)
            runs.append(time.perf_counter() - start)
        best.append(min(runs) * 1000)
    best.sort()
    work = [canonical.reader_work(t) or 0 for t in texts]
    return {"n": len(best), "median_ms": round(statistics.median(best), 3), "max_ms": round(best[-1], 3),
            "p99_ms": round(best[min(len(best) - 1, int(0.99 * len(best)))], 3), "max_work": max(work),
            "work_bound": reader_lexer.MAX_TOKENS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=300, help="problems per generator configuration")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--file", type=Path, action="append", default=[],
                    help="also time the texts of a phrasing file ({'text'} or {'problem'} a line)")
    args = ap.parse_args()
    extra = [json.loads(line) for f in args.file for line in f.read_text().splitlines() if line.strip()]
    rows = corpus(args.size) + [(p.template.split("/")[0], p.problem, p.answer)
                                for p in families.generate_all(100, seed=3)]
    by_key: dict[str, set] = {}
    per_source: dict[str, list[int]] = {}
    disagree = 0
    for source, q, a in rows:
        k = canonical.canonical_key(q)
        got = per_source.setdefault(source, [0, 0])
        got[0] += k is not None
        got[1] += 1
        if k is not None:
            by_key.setdefault(k, set()).add(_answer(a))
            disagree += canonical.value(k) != _answer(a)
    collisions = sum(len(v) > 1 for v in by_key.values())  # by the generators' own answers
    keyed = sum(k for k, _ in per_source.values())
    out = {
        "key_version": canonical.KEY_VERSION,
        "coverage": {s: round(k / n, 4) for s, (k, n) in sorted(per_source.items())},
        "coverage_all": round(keyed / len(rows), 4), "problems": len(rows), "collisions": collisions,
        "value_differs_from_gold": disagree,  # basic_arithmetic's floor-division answers to inexact '/'
        "distinct_keys": len(by_key),
        "normal": timing([q for _, q, _ in rows], args.repeats),
        "hostile": timing(HOSTILE, args.repeats),
        **({"files": timing([r.get("text") or r.get("problem") for r in extra], args.repeats)} if extra else {}),
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
