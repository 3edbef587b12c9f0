"""What a query row costs in the layers' linears, by rows per call: gemma3-270m's seven products per layer
(q, k, v, o, gate, up, down; 18 layers, random weights of the real shapes) at M = 1, 17, 64 and 256 rows,
under the pinned runtime (MKL_CBWR, threads), side by side in one run.

Usage: nice -n 10 .venv/bin/python bench/bench_gemm_rows.py [--reps 3] [--json]

Why (#21 item 4): a 17-token query runs these products at M = 17; a prefill chunk at M = 256. The per-row
cost ratio between the two is a floor under `query_s / (query tokens x prefill per-token rate)` that no
per-operation saving removes (`bench/bench_query.py` reports the query itself). `mv` is the M = 1
matrix-vector product (what `StockMode.lm_head` runs for one row). The last line with --json is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env

SHAPES = [(640, 1024), (640, 256), (640, 256), (1024, 640), (640, 2048), (640, 2048), (2048, 640)]  # (in, out)
LAYERS = 18


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pin_process_env(DEFAULT_RUNTIME)
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(DEFAULT_RUNTIME.threads)
    gen = torch.Generator().manual_seed(0)
    weights = [[torch.randn(o, i, generator=gen) for i, o in SHAPES] for _ in range(LAYERS)]
    macs = sum(i * o for i, o in SHAPES) * LAYERS

    def sweep(rows: int, fn) -> float:
        x = {i: torch.randn(rows, i, generator=gen) for i in (640, 1024, 2048)}
        times = []
        for _ in range(args.reps + 1):  # the first pass warms up
            t = time.perf_counter()
            for layer in weights:
                for w in layer:
                    fn(x[w.shape[1]], w)
            times.append(time.perf_counter() - t)
        return statistics.median(times[1:])

    load = os.getloadavg()
    out = []
    for rows in (1, 17, 64, 256):
        s = sweep(rows, lambda x, w: F.linear(x, w))
        out.append({"rows": rows, "op": "linear", "ms": round(s * 1e3, 2), "ms_per_row": round(s * 1e3 / rows, 3),
                    "gflops": round(2 * rows * macs / s / 1e9, 1)})
    s = sweep(1, lambda x, w: torch.mv(w, x[0]))
    out.append({"rows": 1, "op": "mv", "ms": round(s * 1e3, 2), "ms_per_row": round(s * 1e3, 3),
                "gflops": round(2 * macs / s / 1e9, 1)})
    per_row = {r["rows"]: r["ms_per_row"] for r in out if r["op"] == "linear"}
    row = {"results": out, "row_cost_17_over_256": round(per_row[17] / per_row[256], 2),
           "mkl_cbwr": os.environ.get("MKL_CBWR"), "threads": DEFAULT_RUNTIME.threads,
           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "load_before": load,
           "load_after": os.getloadavg(), "command": "python bench/bench_gemm_rows.py " + " ".join(sys.argv[1:])}
    for r in out:
        print(f"  {r['op']:<6} M={r['rows']:<4} {r['ms']:>8.2f} ms  {r['ms_per_row']:>8.3f} ms/row  {r['gflops']:>6.1f} "
              "GFLOP/s", file=sys.stderr)
    print(f"a row at M=17 costs {row['row_cost_17_over_256']}x a row at M=256; load {load[0]:.2f}", file=sys.stderr)
    if args.json:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
