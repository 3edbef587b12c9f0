"""What the codes mode's KV cache (kernels/segments.py: a graft's KV kept where it lies, own rows appended in place)
saves against transformers' DynamicCache (which copies the whole cache to append), side by side in one run.

Usage: nice -n 10 .venv/bin/python bench/bench_kv_cache.py [--model gemma3-270m] [--prefix 4096,16384]
       [--steps 16] [--reps 3] [--json]

For each prefix length: the prefix is prefilled once; then, alternated `--reps` times, each cache kind gets a
graft-like copy of it (`bench_query.grafted`: the KV tensors handed to an empty cache, as `restore` does) and runs
the 17-token query and `--steps` decode steps over it. Medians: `query_s` and `decode_step_s` per kind and their
ratios. The two kinds give the same bits (tests/test_segments.py); this measures only time. The last line with
--json is one JSON object; a report goes to reports/bench-kv-cache-<model>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_query import QUERY, grafted  # noqa: E402

from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--prefix", default="4096,16384", help="prefix lengths, comma-separated")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runtime = DEFAULT_RUNTIME.with_(kernel_mode="codes")
    pin_process_env(runtime)
    import torch
    from transformers import DynamicCache

    from galahad.workers.engine import Engine
    from galahad.workers.model_loader import load_model

    cache_dir = Path(os.environ.get("GALAHAD_MODEL_CACHE", "~/.cache/galahad-models")).expanduser()
    try:
        engine = Engine(load_model(args.model, cache_dir, runtime), runtime)
        lengths = [int(x) for x in args.prefix.split(",") if x]
    except Exception as exc:  # noqa: BLE001  (one line, then out)
        sys.exit(f"bench_kv_cache: error: {str(exc).splitlines()[0]}")
    window = engine.loaded.context_window
    if not lengths or any(n < 2 or n + len(QUERY) + args.steps > window for n in lengths):
        sys.exit(f"bench_kv_cache: error: --prefix lengths must be in 2..{window - 64}")
    kinds = {"dynamic": lambda: DynamicCache(config=engine.model.config), "segmented": engine.new_cache}
    q = engine.encode(QUERY, bos=False)
    load_before = os.getloadavg()
    rows = []
    for n in lengths:
        gen = torch.Generator().manual_seed(0)
        prefix = [engine.tokenizer.bos_token_id] + torch.randint(10, engine.model.config.vocab_size, (n - 1,),
                                                                  generator=gen).tolist()
        base = engine.new_cache()
        engine.prefill(base, prefix, 0, last_only=True)
        times: dict[str, dict[str, list[float]]] = {k: {"query": [], "step": []} for k in kinds}
        for _ in range(args.reps):
            for kind, make in kinds.items():
                cache = grafted(base, make())
                t = time.perf_counter()
                logits = engine.prefill(cache, q, n, last_only=True)
                times[kind]["query"].append(time.perf_counter() - t)
                token, t = int(logits[-1].argmax()), time.perf_counter()
                for s in range(args.steps):
                    token = int(engine.forward(cache, [token], n + len(q) + s, last_only=True)[-1].argmax())
                times[kind]["step"].append((time.perf_counter() - t) / args.steps)
        row = {"prefix_tokens": n}
        for kind in kinds:
            row[f"{kind}_query_s"] = statistics.median(times[kind]["query"])
            row[f"{kind}_decode_step_s"] = statistics.median(times[kind]["step"])
        row["query_speedup"] = row["dynamic_query_s"] / row["segmented_query_s"]
        row["decode_step_speedup"] = row["dynamic_decode_step_s"] / row["segmented_decode_step_s"]
        rows.append(row)
        print(f"prefix {n}: query {row['dynamic_query_s'] * 1e3:.1f} ms (DynamicCache) vs "
              f"{row['segmented_query_s'] * 1e3:.1f} ms (segmented) = {row['query_speedup']:.2f}x; decode step "
              f"{row['dynamic_decode_step_s'] * 1e3:.1f} vs {row['segmented_decode_step_s'] * 1e3:.1f} ms = "
              f"{row['decode_step_speedup']:.2f}x", file=sys.stderr)
    report = {"model": args.model, "kernel_mode": "codes", "query_tokens": len(q), "steps": args.steps,
              "reps": args.reps, "rows": rows, "threads": runtime.threads, "load_before": load_before,
              "load_after": os.getloadavg(), "cpus": os.cpu_count(),
              "command": "python bench/bench_kv_cache.py " + " ".join(sys.argv[1:])}
    (ROOT / "reports" / f"bench-kv-cache-{Path(args.model).name}.json").write_text(json.dumps(report, indent=2))
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
