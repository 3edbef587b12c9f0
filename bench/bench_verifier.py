"""Verifier latency and accuracy on the labeled set, and on a flywheel-like workload.

    python bench/bench_verifier.py [--repeats 3] [--pairs N] [--flywheel 1000] [--json]

Workers are started (and warmed) before any timing. "first sight" times each labeled pair the first
time the worker sees it (no parse cache); "repeat" times later passes over the same pairs; "flywheel"
times built-in family problems against short model-style outputs, right and wrong. Fast-path and
symbolic (worker) checks are also reported apart, and so are false accepts and false rejects.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from galahad.flywheel.problems import families
from galahad.verifier.verifier import VERSION, Verifier, VerifierConfig

PAIRS = Path(__file__).resolve().parents[1] / "tests" / "data" / "verifier_pairs.jsonl"
# Reasons decided without the worker (string, rational and text comparisons, guards).
FAST = ("equal: identical", "equal: exact number", "equal: same numbers", "equal: same text", "units differ",
        "too large", "no answer found", "not equal: different number", "not equal: text", "bad input")


def summary(seconds: list[float]) -> dict:
    ms = sorted(s * 1000 for s in seconds)
    if not ms:
        return {"n": 0}
    def pick(q: float) -> float:
        return ms[min(len(ms) - 1, int(q * len(ms)))]

    return {"n": len(ms), "median_ms": round(statistics.median(ms), 3), "p90_ms": round(pick(0.90), 3),
            "p99_ms": round(pick(0.99), 3), "max_ms": round(ms[-1], 3), "mean_ms": round(statistics.fmean(ms), 3)}


def timed(verifier: Verifier, gold: str, output: str):
    start = time.perf_counter()
    verdict = verifier.check(gold, output)
    return verdict, time.perf_counter() - start


def labeled(repeats: int, pairs: int | None = None) -> dict:
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()][:pairs]
    strict, lenient = Verifier(), Verifier(VerifierConfig(strip_units=True))
    strict.warm()
    lenient.warm()
    first, repeat, fast, symbolic = [], [], [], []
    false_accepts = false_rejects = 0
    try:
        for rnd in range(1 + repeats):
            for r in rows:
                v = lenient if r.get("options", {}).get("strip_units") else strict
                verdict, dt = timed(v, r["gold"], r["output"])
                (first if rnd == 0 else repeat).append(dt)
                if rnd == 0:
                    (fast if verdict.reason.startswith(FAST) else symbolic).append(dt)
                    false_accepts += verdict.verified and not r["expected"]
                    false_rejects += r["expected"] and not verdict.verified
    finally:
        strict.close()
        lenient.close()
    return {"pairs": len(rows), "false_accepts": false_accepts, "false_rejects": false_rejects,
            "first_sight": summary(first), "repeat": summary(repeat),
            "first_sight_fast_path": summary(fast), "first_sight_symbolic": summary(symbolic)}


def flywheel(n: int = 1000) -> dict:
    rng = random.Random(0)
    problems = families.generate_all(n // len(families.FAMILIES), seed=0)
    shapes = ["The answer is {}.", "{} ", "Answer: {}\n", "So x = {}.", "\\boxed{{{}}}", "#### {}"]
    times = []
    with Verifier() as v:
        v.warm()
        for p in problems:
            value = int(p.answer) + rng.choice([0, 0, 1, -1, 10])
            _, dt = timed(v, p.answer, rng.choice(shapes).format(value))
            times.append(dt)
    return summary(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed passes after the first sight")
    parser.add_argument("--pairs", type=int, default=None, help="only the first N labeled pairs (default: all)")
    parser.add_argument("--flywheel", type=int, default=1000, help="checks in the flywheel-like workload")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {"version": VERSION, "labeled": labeled(args.repeats, args.pairs), "flywheel": flywheel(args.flywheel)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    lab = result["labeled"]
    print(f"verifier {VERSION}")
    print(f"labeled set: {lab['pairs']} pairs, false accepts {lab['false_accepts']}, "
          f"false rejects {lab['false_rejects']}")
    for name in ("first_sight", "repeat", "first_sight_fast_path", "first_sight_symbolic"):
        print(f"  {name:24} {json.dumps(lab[name])}")
    print(f"  {'flywheel workload':24} {json.dumps(result['flywheel'])}")


if __name__ == "__main__":
    main()
