"""Flywheel throughput with 1 and 2 generator actors, side by side in one run, and scaling efficiency.

Usage: .venv/bin/python bench/bench_flywheel.py [--limit 12] [--k 8] [--model gemma3-270m]
Each configuration learns the same problems (same families, seeds and budget) into a fresh data dir.
Throughput counts the loop only (model loading and Ray start-up excluded, reported separately).
Problems attempted per hour is the primary figure: verified/hour also depends on which problems the
model happens to solve, which is identical across configurations here because sampling is seeded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one(generators: int, args, env) -> dict:
    data = Path(tempfile.mkdtemp(prefix=f"bench-flywheel-{generators}-"))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "galahad.flywheel.cli.main", "--data", str(data), "run",
                           "--model", args.model, "--families", args.families, "--per-family", "24",
                           "--limit", str(args.limit), "--k", str(args.k), "--generators", str(generators),
                           "--no-progress", "--json"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"run with {generators} generators failed: {proc.stderr[-500:]}")
    s = json.loads(proc.stdout.strip().splitlines()[-1])
    hours = s["seconds"] / 3600
    return {"generators": generators, "problems": s["problems"], "attempted": s["attempted"],
            "verified": s["verified"], "loop_seconds": round(s["seconds"], 1), "wall_seconds": round(wall, 1),
            "problems_per_hour": s["problems"] / hours, "attempts_per_hour": s["attempted"] / hours,
            "verified_per_hour": s["verified"] / hours}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--families", default="add1,mul1,lin1")
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--k", type=int, default=8)
    args = ap.parse_args()
    env = {**os.environ}
    env.setdefault("GALAHAD_MODEL_CACHE", str(Path("~/.cache/galahad-models").expanduser()))
    rows = [one(1, args, env), one(2, args, env)]
    for r in rows:
        print(f"{r['generators']} generator(s): {r['problems']} problems, {r['attempted']} attempts, "
              f"{r['verified']} verified in {r['loop_seconds']} s loop ({r['wall_seconds']} s wall): "
              f"{r['problems_per_hour']:.0f} problems/h, {r['attempts_per_hour']:.0f} attempts/h, "
              f"{r['verified_per_hour']:.0f} verified/h")
    speedup = rows[1]["attempts_per_hour"] / rows[0]["attempts_per_hour"]
    print(f"speed-up 2 vs 1 (attempts/h): {speedup:.2f}x, scaling efficiency {100 * speedup / 2:.0f}% "
          f"on {os.cpu_count()} CPU cores")
    print(json.dumps({"rows": rows, "speedup": speedup, "efficiency": speedup / 2}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
