"""Where a short query's forward goes after a long graft: the 17-token query at 4,096 prefix tokens, taken
apart, beside the prefill's per-token rate, in one run.

Usage: nice -n 10 .venv/bin/python bench/bench_query.py [--model gemma3-270m] [--prefix 4096] [--reps 7] [--json]

Measured side by side (medians over `--reps`, the pinned runtime, `last_only` as serving runs it):
- `prefill_per_token_s`: a fresh chunked prefill of the prefix (the recompute a graft replaces) / its length;
- `query_s`: the query's forward over a copy of that prefix's cache (what `bench_graft.py` reports);
- `query_at_1_s`: the same query over a 1-token cache: `query_s - query_at_1_s` is what the long cache costs
  (attention over it and its cache updates);
- `head_s`: the LM head on one row alone (`Engine.head`: the vocab x hidden product and soft-cap);
- `weights_s`: every parameter read once (the memory traffic no forward can avoid);
- `ops`: the query's top operators by self CPU time (torch.profiler), one forward;
- `linears_by_rows`: the model's own layer linears (every `nn.Linear` under its decoder layers) run alone at
  1, 17, 64 and 256 rows per call (and `torch.mv` at 1): what a row costs at the query's width against a
  prefill chunk's (`linear_row_cost_17_over_256`).
The issue's target is `query_s <= 2 * query_tokens * prefill_per_token_s`; a prefill chunk runs no LM head
(nobody reads its logits), a query must run it once, so `layers_rate_ratio` = (query_s - head_s) /
(query_tokens * prefill_per_token_s) is printed beside the target's ratio. The last line with --json is one
JSON object; a report goes to reports/bench-query-<model>.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path

from galahad.workers.runtime import DEFAULT_RUNTIME, deterministic, pin_process_env

ROOT = Path(__file__).resolve().parents[1]
QUERY = "Question: Add 27, 45 and 8.\nAnswer:"  # 17 tokens with Gemma's tokenizer (bench_graft.py's query)


def median_s(fn, reps: int) -> float:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--prefix", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pin_process_env(DEFAULT_RUNTIME)
    import torch
    from torch.profiler import ProfilerActivity, profile

    from galahad.workers.engine import Engine
    from galahad.workers.model_loader import load_model

    cache_dir = Path(os.environ.get("GALAHAD_MODEL_CACHE", "~/.cache/galahad-models")).expanduser()
    engine = Engine(load_model(args.model, cache_dir, DEFAULT_RUNTIME), DEFAULT_RUNTIME)
    n = args.prefix
    if n < 2 or n + 32 > engine.loaded.context_window:
        sys.exit(f"bench_query: error: --prefix must be in 2..{engine.loaded.context_window - 32}")
    gen = torch.Generator().manual_seed(0)
    bos = engine.tokenizer.bos_token_id
    prefix = [bos] + torch.randint(10, engine.model.config.vocab_size, (n - 1,), generator=gen).tolist()
    q = engine.encode(QUERY, bos=False)
    load_before = os.getloadavg()
    long_cache = engine.new_cache()
    t = time.perf_counter()
    engine.prefill(long_cache, prefix, 0, last_only=True)
    prefill_s = time.perf_counter() - t
    short_cache = engine.new_cache()
    engine.prefill(short_cache, prefix[:1], 0, last_only=True)

    def query_median(cache, start) -> float:  # each forward over its own copy, made before the clock starts
        copies = [copy.deepcopy(cache) for _ in range(args.reps)]
        return median_s(lambda: engine.prefill(copies.pop(), q, start, last_only=True), args.reps)

    query_s = query_median(long_cache, n)
    query_at_1_s = query_median(short_cache, 1)
    hidden = torch.randn(1, engine.model.config.hidden_size)

    def head():
        with engine.kernels.active():
            engine.head(hidden)

    head_s = median_s(head, args.reps)
    weights_s = median_s(lambda: sum(float(p.sum()) for p in engine.model.parameters()), args.reps)
    linears = [m for layer in engine.model.model.layers for m in layer.modules() if isinstance(m, torch.nn.Linear)]
    macs = sum(m.in_features * m.out_features for m in linears)

    def linears_at(rows: int, mv: bool = False) -> dict:
        xs = {m.in_features: torch.randn(rows, m.in_features, generator=gen) for m in linears}
        fn = (lambda m: torch.mv(m.weight, xs[m.in_features][0])) if mv else (lambda m: m(xs[m.in_features]))
        with deterministic(DEFAULT_RUNTIME):
            fn(linears[0])
            s = median_s(lambda: [fn(m) for m in linears], args.reps)
        return {"rows": rows, "op": "mv" if mv else "linear", "calls": len(linears), "ms": round(s * 1e3, 2),
                "ms_per_row": round(s * 1e3 / rows, 3), "gflops": round(2 * rows * macs / s / 1e9, 1)}

    by_rows = [linears_at(r) for r in (1, 17, 64, 256)] + [linears_at(1, mv=True)]
    c = copy.deepcopy(long_cache)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        engine.prefill(c, q, n, last_only=True)
    ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:8]
    total_us = sum(e.self_cpu_time_total for e in prof.key_averages())
    rate = prefill_s / n
    row = {
        "model": args.model, "prefix_tokens": n, "query_tokens": len(q), "threads": DEFAULT_RUNTIME.threads,
        "prefill_s": prefill_s, "prefill_per_token_s": rate, "query_s": query_s, "query_at_1_s": query_at_1_s,
        "long_cache_s": query_s - query_at_1_s, "head_s": head_s, "weights_s": weights_s,
        "target_s": 2 * len(q) * rate, "query_rate_ratio": query_s / (len(q) * rate),
        "layers_rate_ratio": (query_s - head_s) / (len(q) * rate),
        "ops": [{"op": e.key, "calls": e.count, "self_ms": round(e.self_cpu_time_total / 1e3, 2),
                 "share": round(e.self_cpu_time_total / total_us, 3)} for e in ops],
        "linears_by_rows": by_rows,
        "linear_row_cost_17_over_256": round(by_rows[1]["ms_per_row"] / by_rows[3]["ms_per_row"], 2),
        "load_before": load_before, "load_after": os.getloadavg(), "cpus": os.cpu_count(),
        "command": "python bench/bench_query.py " + " ".join(sys.argv[1:]),
    }
    out = ROOT / "reports" / f"bench-query-{Path(args.model).name}.json"
    out.write_text(json.dumps(row, indent=2))
    print(f"prefill {n} tokens: {rate * 1e3:.2f} ms/token; query ({len(q)} tokens) {query_s * 1e3:.1f} ms "
          f"= {row['query_rate_ratio']:.2f}x its tokens at the prefill rate (target 2x: {row['target_s'] * 1e3:.1f} ms)"
          f"; over a 1-token cache {query_at_1_s * 1e3:.1f} ms; LM head alone {head_s * 1e3:.1f} ms; without it "
          f"{row['layers_rate_ratio']:.2f}x; weights read once {weights_s * 1e3:.1f} ms; load {load_before[0]:.2f}",
          file=sys.stderr)
    for o in row["ops"]:
        print(f"  {o['op']:<24} {o['calls']:>5} calls {o['self_ms']:>9.2f} ms ({o['share']:.0%})", file=sys.stderr)
    for r in by_rows:
        print(f"  {r['op']:<6} x{r['calls']} at {r['rows']:>3} rows {r['ms']:>8.2f} ms  {r['ms_per_row']:>8.3f} ms/row  "
              f"{r['gflops']:>6.1f} GFLOP/s", file=sys.stderr)
    if args.json:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
