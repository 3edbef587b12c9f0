"""Default model's greedy accuracy and pass@16 on each built-in family (the README's capability table).

Usage: .venv/bin/python bench/bench_families.py [--n 12] [--k 16] [--model gemma3-270m] [--json]
Greedy: temperature 0 from the base few-shot prompt. pass@k: k seeded samples at temperature 1.0; a
problem counts if any sample is verified. The problems are each family's first n under seed 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env

pin_process_env(DEFAULT_RUNTIME)

from galahad.flywheel.config import Paths  # noqa: E402
from galahad.flywheel.problems import families  # noqa: E402
from galahad.verifier.verifier import Verifier  # noqa: E402
from galahad.workers.generator import Generator  # noqa: E402
from galahad.workers.sampling import SamplingConfig  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--families", default=",".join(families.FAMILIES))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    gen = Generator(args.model, Paths.resolve().models, DEFAULT_RUNTIME)
    rows = []
    with Verifier() as verifier:
        for name in args.families.split(","):
            t0 = time.perf_counter()
            greedy = passk = 0
            for p in families.generate(name, args.n, 0):
                prob = {"id": p.id, "text": p.problem}
                g = gen.attempt(prob, SamplingConfig(k=1, max_tokens=12, temperature=0.0))[0]
                greedy += verifier.check_answer(p.answer, g.answer).verified
                samples = gen.attempt(prob, SamplingConfig(k=args.k, max_tokens=12, temperature=1.0, seed=0))
                passk += any(verifier.check_answer(p.answer, s.answer).verified for s in samples)
            rows.append({"family": name, "description": families.family(name).description, "n": args.n,
                         "greedy": greedy, "pass_at_k": passk, "k": args.k,
                         "seconds": round(time.perf_counter() - t0, 1)})
            r = rows[-1]
            print(f"{name:7} {r['description']:48} greedy {greedy:2}/{args.n} ({100 * greedy / args.n:3.0f}%)  "
                  f"pass@{args.k} {passk:2}/{args.n} ({100 * passk / args.n:3.0f}%)  {r['seconds']} s", flush=True)
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GALAHAD_MODEL_CACHE", str(Path("~/.cache/galahad-models").expanduser()))
    sys.exit(main())
