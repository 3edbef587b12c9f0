"""Flywheel throughput, sequential vs batched sampling, side by side in one run on the same problems and seeds.

Usage: nice -n 10 .venv/bin/python bench/bench_flywheel.py [--limit 12] [--k 8] [--round-size 8] [--kernel-modes stock,codes]
                                                          [--sampler-dtypes float32,bfloat16 [--kernel-mode auto]]
                                                          [--problems-per-call P] [--model gemma3-270m]
                                                          [--generators 1] [--json]
Each sampler learns the same problems (same families, seeds and budget) into a fresh data dir with
`galahad run --sampler S --round-size R --problems-per-call P`. A generator call gets P problems (the loop
claims them together) with R samples each: the batched sampler prefills their prompts in one padded
forward and decodes all P x R samples in one continuous batch; the sequential sampler prefills each prompt
and decodes each sample alone (batch 1). Both run the generators' runtime (one thread, grouped
attention) and the same draws (torch.multinomial's exponential race). Throughput counts the loop only
(model loading and Ray start-up excluded, reported separately as wall time); `sampling_seconds` is the
generators' own time on the attempts (prompt prefill and decode, summed from the attempts' recorded
seconds), so `sampling_speedup` is the samplers' ratio without the loop's verification, SQL and deposits,
which neither sampler changes. Verified counts are reported for both: sampling is seeded per sample, but
the two samplers run different GEMM shapes, so the same seed may draw a different token where two
candidates are nearly tied; the counts show whether that moved anything. Gold solutions are off: a problem
no sample verifies would otherwise be deposited from its gold, with no sampling to time. The machine's load (`uptime`)
before and after is part of the output.
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


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def one(sampler: str, args, env, kernel_mode: str = "stock", dtype: str = "float32") -> dict:
    data = Path(tempfile.mkdtemp(prefix=f"bench-flywheel-{sampler}-{kernel_mode}-{dtype}-"))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "galahad.flywheel.cli.main", "--data", str(data), "run",
                           "--model", args.model, "--families", args.families, "--per-family", "24",
                           "--limit", str(args.limit), "--k", str(args.k), "--round-size", str(args.round_size),
                           "--problems-per-call", str(args.problems_per_call),
                           "--generators", str(args.generators), "--sampler", sampler,
                           "--kernel-mode", kernel_mode, "--sampler-dtype", dtype, "--no-gold-solutions", "--no-progress", "--json"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"run with the {sampler} sampler ({kernel_mode} kernels) failed: {proc.stderr[-500:]}")
    s = json.loads(proc.stdout.strip().splitlines()[-1])
    secs = s["seconds"]
    return {"sampler": sampler, "kernel_mode": kernel_mode, "dtype": dtype, "problems": s["problems"], "attempted": s["attempted"], "verified": s["verified"],
            "deposited": s["deposited"], "tokens": s["tokens_spent"], "loop_seconds": round(secs, 1),
            "wall_seconds": round(wall, 1), "attempts_per_s": s["attempted"] / secs,
            "tokens_per_s": s["tokens_spent"] / secs, "verified_per_hour": s["verified"] / (secs / 3600),
            "problems_per_hour": s["problems"] / (secs / 3600),
            "sampling_seconds": round(s["sampling_seconds"], 1),
            "sampling_attempts_per_s": s["attempted"] / max(s["sampling_seconds"], 1e-9)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--families", default="add1,mul1,lin1")
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--round-size", type=int, default=None, help="samples per generator call (default: k)")
    ap.add_argument("--problems-per-call", type=int, default=None,
                    help="problems per generator call, one batch (default: the loop's, batch rows // round size)")
    ap.add_argument("--generators", type=int, default=1)
    ap.add_argument("--kernel-modes", default=None,
                    help="compare these kernel modes (e.g. stock,codes) with the batched sampler, side by side, "
                         "instead of the two samplers")
    ap.add_argument("--sampler-dtypes", default=None,
                    help="compare what the generators compute in (e.g. float32,bfloat16), the batched sampler under "
                         "--kernel-mode, side by side, instead of the two samplers")
    ap.add_argument("--kernel-mode", default="auto", help="with --sampler-dtypes: the job's kernel mode")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.round_size = args.round_size or args.k
    if args.problems_per_call is None:
        from galahad.flywheel.learn.loop import LoopConfig, problems_per_call
        from galahad.workers.sampling import SamplingConfig

        args.problems_per_call = problems_per_call(LoopConfig(round_size=args.round_size, sampling=SamplingConfig()))
    env = {**os.environ}
    env.setdefault("GALAHAD_MODEL_CACHE", str(Path("~/.cache/galahad-models").expanduser()))
    before = uptime()
    if args.sampler_dtypes:
        dtypes = args.sampler_dtypes.split(",")  # named twice runs twice, alternated: float32,bfloat16,float32,...
        runs = [one("batched", args, env, args.kernel_mode, d) for d in dtypes]
        out = {"runs": runs}
    elif args.kernel_modes:
        modes = args.kernel_modes.split(",")  # a mode named twice runs twice, alternated: stock,codes,stock,codes
        runs = [one("batched", args, env, m) for m in modes]
        out = {"runs": runs}
    else:
        out = {"sequential": one("sequential", args, env), "batched": one("batched", args, env)}
        runs = list(out.values())
    for r in runs:
        print(f"{r['sampler']:>10} ({r['kernel_mode']}, {r['dtype']}): {r['problems']} problems, {r['attempted']} attempts, {r['verified']} verified "
              f"({r['deposited']} deposited), {r['tokens']} tokens in {r['loop_seconds']} s loop "
              f"({r['wall_seconds']} s wall): {r['attempts_per_s']:.2f} attempts/s, {r['tokens_per_s']:.2f} tokens/s, "
              f"{r['verified_per_hour']:.0f} verified/h; the generator's own time {r['sampling_seconds']} s "
              f"({r['sampling_attempts_per_s']:.2f} attempts/s)", file=sys.stderr)
    def variant(r: dict) -> tuple:
        return r["sampler"], r["kernel_mode"], r["dtype"]

    base = [r for r in runs if variant(r) == variant(runs[0])]
    other = [r for r in runs if variant(r) == variant(runs[-1])]

    def total(rs: list[dict], key: str) -> float:  # pooled over repeats: counts over seconds
        return sum(r[key] for r in rs)

    out["speedup"] = (total(other, "attempted") / total(other, "loop_seconds")) / (
        total(base, "attempted") / total(base, "loop_seconds"))
    out["sampling_speedup"] = (total(other, "attempted") / max(total(other, "sampling_seconds"), 1e-9)) / max(
        total(base, "attempted") / max(total(base, "sampling_seconds"), 1e-9), 1e-9)
    out["verified_per_hour_ratio"] = (total(other, "verified") / total(other, "loop_seconds")) / max(
        total(base, "verified") / total(base, "loop_seconds"), 1e-9)
    base, other = base[0], other[0]
    out["config"] = {"model": args.model, "kernel_modes": args.kernel_modes, "sampler_dtypes": args.sampler_dtypes,
                     "families": args.families, "limit": args.limit, "k": args.k,
                     "round_size": args.round_size,
                     "problems_per_call": args.problems_per_call, "generators": args.generators, "cpus": os.cpu_count()}
    out["load_before"], out["load_after"] = before, uptime()
    out["command"] = "python bench/bench_flywheel.py " + " ".join(sys.argv[1:])
    what = (f"{other['dtype']} vs {base['dtype']}" if args.sampler_dtypes else
            f"{other['kernel_mode']} vs {base['kernel_mode']}" if args.kernel_modes else "batched vs sequential")
    print(f"speed-up {what} (attempts/s): {out['speedup']:.2f}x over the loop, "
          f"{out['sampling_speedup']:.2f}x over the generator's own time, at k={args.k}, "
          f"round size {args.round_size}", file=sys.stderr)
    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        print(json.dumps(out, sort_keys=True, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
