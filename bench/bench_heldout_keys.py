"""Key soundness and coverage on bench/data/heldout/ (phrasings written by someone who never read the code).

Prints JSON: paraphrases keyed, paraphrase pairs sharing their source's key, keys shared by texts whose
answers differ (must be 0), keyed texts whose value() differs from the written answer (must be 0), and near
misses that key like the problem they imitate while their answer differs (must be 0). No model, no catalog.

Usage: python bench/bench_heldout_keys.py [--details]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from galahad.flywheel.problems.canonical import canonical_key, value
from galahad.flywheel.problems.golds import exact_number

HERE = Path(__file__).resolve().parent / "data" / "heldout"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (HERE / name).read_text().splitlines() if line.strip()]


def _answer(a: str | None) -> str:
    q = exact_number(a) if a is not None else None
    return str(q) if q is not None else repr(a)


def measure() -> dict:
    paraphrases, near = _rows("paraphrases.jsonl"), _rows("near_misses.jsonl")
    groups: dict[str, list[dict]] = {}
    for p in paraphrases:
        groups.setdefault(p["group"], []).append(p)
    texts = [(p["problem"], p["answer"]) for p in paraphrases] + [(n["problem"], n["answer"]) for n in near]
    answers_by_key: dict[str, set[str]] = {}
    for text, answer in texts:
        key = canonical_key(text)
        if key:
            answers_by_key.setdefault(key, set()).add(_answer(answer))
    collisions = {k: sorted(v) for k, v in answers_by_key.items() if len(v) > 1}
    shared, pairs, missed = 0, 0, []
    for rows in groups.values():
        source = canonical_key(rows[0]["problem"])
        for p in rows[1:]:
            pairs += 1
            if source and canonical_key(p["problem"]) == source:
                shared += 1
            else:
                missed.append([p["problem"], rows[0]["problem"]])
    wrong = [[t, a, str(value(t))] for t, a in texts if canonical_key(t) and exact_number(a) is not None
             and value(t) != exact_number(a)]
    group_key = {g: canonical_key(rows[0]["canonical"]) for g, rows in groups.items()}
    group_value = {g: value(rows[0]["canonical"]) for g, rows in groups.items()}
    joins = [[n["problem"], n["looks_like"]] for n in near
             if canonical_key(n["problem"]) and canonical_key(n["problem"]) == group_key.get(n["looks_like"])
             and (n["answer"] is None or exact_number(n["answer"]) != group_value.get(n["looks_like"]))]
    return {"paraphrases": len(paraphrases), "paraphrases_keyed": sum(bool(canonical_key(p["problem"]))
                                                                       for p in paraphrases),
            "pairs_sharing_source_key": [shared, pairs], "near_misses": len(near),
            "near_misses_keyed": sum(bool(canonical_key(n["problem"])) for n in near),
            "collisions_different_answers": len(collisions), "keyed_with_wrong_value": len(wrong),
            "near_miss_joins_with_different_answer": len(joins),
            "details": {"collisions": collisions, "wrong_values": wrong, "near_miss_joins": joins,
                        "missed_pairs": missed}}


if __name__ == "__main__":
    out = measure()
    if "--details" not in sys.argv:
        out.pop("details")
    print(json.dumps(out, indent=1))
