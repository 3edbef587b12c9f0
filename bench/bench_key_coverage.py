"""Key soundness and coverage on a grouped phrasing file (default bench/data/keys_heldout/test.jsonl: written by a
helper that never read the key reader; dev.jsonl is for development, test.jsonl only for measuring).

Each line: {"id", "group", "area", "text", "answer", "kind"}; texts of one group ask the same mathematics;
`answer` is the exact value, "ambiguous" or "undefined" (keyed = wrong for both); `kind` is "single" or "word" (a multi-step word problem).
Prints per area and in total: coverage of single, unambiguous texts (keyed / all), keyed texts whose key's value
differs from the answer (must be 0), keyed ambiguous texts (must be 0), keys shared by texts whose answers differ
(wrong joins, must be 0), and paraphrases keyed like their group's first keyed text (where both key).

Usage: python bench/bench_key_coverage.py [--file PATH] [--details] [--json] [--reader old|new]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from galahad.flywheel.problems.canonical import canonical_key, value
from galahad.flywheel.problems.golds import exact_number

DEFAULT = Path(__file__).resolve().parent / "data" / "keys_heldout" / "test.jsonl"


def measure(path: Path, details: bool = False, canonical_key=canonical_key, value=value) -> dict:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_area: dict[str, dict] = defaultdict(lambda: {"single": 0, "keyed": 0})
    wrong_values, keyed_ambiguous, answers_by_key = [], [], defaultdict(set)
    groups: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    for r in rows:
        key = canonical_key(r["text"])
        groups[r["group"]].append((r["text"], key))
        ambiguous = r["answer"] in ("ambiguous", "undefined")
        if key and ambiguous:
            keyed_ambiguous.append((r["text"], key))
        if not ambiguous:
            want = exact_number(r["answer"])
            if key:
                answers_by_key[key].add(str(want))
                got = value(key)
                if got is not None and got != want:
                    wrong_values.append((r["text"], key, str(got), r["answer"]))
            if r["kind"] == "single":
                a = by_area[r["area"]]
                a["single"] += 1
                a["keyed"] += bool(key)
    joins = {k: sorted(v) for k, v in answers_by_key.items() if len(v) > 1}
    pairs = same = 0
    for members in groups.values():
        keyed = [k for _, k in members if k]
        if len(keyed) > 1:
            pairs += len(keyed) - 1
            same += sum(k == keyed[0] for k in keyed[1:])
    single = sum(a["single"] for a in by_area.values())
    keyed = sum(a["keyed"] for a in by_area.values())
    out = {"file": str(path), "texts": len(rows), "single_unambiguous": single, "single_keyed": keyed,
           "coverage": round(keyed / single, 3) if single else None, "wrong_values": len(wrong_values),
           "keyed_ambiguous": len(keyed_ambiguous), "wrong_joins": len(joins), "paraphrase_pairs": pairs,
           "paraphrases_keyed_alike": same, "paraphrase_agreement": round(same / pairs, 3) if pairs else None,
           "by_area": {a: f"{v['keyed']}/{v['single']}" for a, v in sorted(by_area.items())}}
    if details:
        out["details"] = {"wrong_values": wrong_values, "keyed_ambiguous": keyed_ambiguous, "wrong_joins": joins,
                          "split_groups": [[t for t, k in m] for m in groups.values()
                                           if len({k for _, k in m if k}) > 1]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", type=Path, default=DEFAULT)
    ap.add_argument("--details", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--reader", choices=("old", "new"), default="old", help="new: problems/reader.py")
    args = ap.parse_args()
    fns = (canonical_key, value)
    if args.reader == "new":
        from galahad.flywheel.problems import reader
        values: dict = {}

        def new_key(text: str) -> str | None:
            got = reader.key_and_value(text)
            if got is not None:
                values[got[0]] = got[1]
            return None if got is None else got[0]
        fns = (new_key, values.get)
    report = measure(args.file, args.details, *fns)
    report["command"] = "python bench/bench_key_coverage.py " + " ".join(sys.argv[1:])
    print(json.dumps(report, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
