"""Prefill and decode ms/token per architecture: the tiny random-init folders of tests/test_arch.py and a
real model (gemma3-270m by default), under the pinned stock runtime (2 threads, fp32, eager attention).

Usage: nice -n 10 .venv/bin/python bench/bench_arch.py [--folders DIR [--build]] [--real gemma3-270m]
                                     [--prefill 128] [--decode 32] [--reps 3] [--threads 2] [--json]

`--folders DIR`: every subfolder with a config.json (build them with `--build`, which writes each config of
tests/test_arch.py into DIR). Per model: parameters, prefill ms/token (median of `--reps` chunked prefills
of `--prefill` tokens into a fresh cache), decode ms/token (median per-step time of a greedy decode of
`--decode` tokens after that prefill, last-position LM head). Estimates for 1-3B models are the real
model's figures scaled by parameter count, labelled as estimates.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env

pin_process_env(DEFAULT_RUNTIME)


def measure(engine, prefill: int, decode: int, reps: int) -> dict:
    vocab = engine.model.config.vocab_size
    ids = [(7 * i + 11) % (vocab - 10) + 10 for i in range(prefill)]
    pre = []
    for _ in range(reps):
        cache = engine.new_cache()
        t0 = time.perf_counter()
        logits = engine.prefill(cache, ids, 0, last_only=True)[-1]
        pre.append(time.perf_counter() - t0)
    steps = []
    pos, tok = prefill, int(logits.argmax())
    for _ in range(decode):
        t0 = time.perf_counter()
        logits = engine.forward(cache, [tok], pos, last_only=True)[-1]
        steps.append(time.perf_counter() - t0)
        pos, tok = pos + 1, int(logits.argmax())
    params = sum(p.numel() for p in engine.model.parameters())
    return {"params": params, "layers": list(engine.loaded.layer_kinds), "arch": engine.loaded.arch.name,
            "prefill_ms_per_token": 1e3 * statistics.median(pre) / prefill,
            "decode_ms_per_token": 1e3 * statistics.median(steps)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--folders", type=Path, default=None)
    p.add_argument("--build", action="store_true", help="write tests/test_arch.py's configs into --folders first")
    p.add_argument("--real", default="gemma3-270m", help="a built-in name or folder ('' to skip)")
    p.add_argument("--model-cache", type=Path, default=None)
    p.add_argument("--prefill", type=int, default=128)
    p.add_argument("--decode", type=int, default=32)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=DEFAULT_RUNTIME.threads, help="the runtime's thread count")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from galahad.flywheel.config import model_cache
    from galahad.workers.engine import Engine
    from galahad.workers.model_loader import load_model

    rt = DEFAULT_RUNTIME.with_(threads=args.threads)
    cache = args.model_cache or model_cache()
    specs: list[str] = []
    if args.folders:
        if args.build:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
            import test_arch

            for name in test_arch.CONFIGS:
                if not (args.folders / name / "config.json").is_file():
                    test_arch.build(args.folders / name, name)
        specs += sorted(str(f) for f in args.folders.iterdir() if (f / "config.json").is_file())
    if args.real:
        specs.append(args.real)
    rows = {}
    for spec in specs:
        engine = Engine(load_model(spec, cache, rt), rt)
        rows[Path(spec).name] = measure(engine, args.prefill, args.decode, args.reps)
        del engine
    real = rows.get(Path(args.real).name) if args.real else None
    if real:
        for billions in (1, 3):
            scale = billions * 1e9 / real["params"]
            rows[f"estimate-{billions}B"] = {"estimate": True, "scaled_from": args.real, "params": int(billions * 1e9),
                                             "prefill_ms_per_token": real["prefill_ms_per_token"] * scale,
                                             "decode_ms_per_token": real["decode_ms_per_token"] * scale}
    if args.json:
        print(json.dumps(rows, sort_keys=True))
    else:
        for name, r in rows.items():
            print(f"{name:<18} {r['params'] / 1e6:9.2f}M  prefill {r['prefill_ms_per_token']:9.3f} ms/token  "
                  f"decode {r['decode_ms_per_token']:9.2f} ms/token{'  (estimate)' if r.get('estimate') else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
