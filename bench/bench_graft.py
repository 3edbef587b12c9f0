"""Time to first token: graft (THE serving path) vs recomputing the prefix, side by side in one run.

Usage: nice -n 10 .venv/bin/python bench/bench_graft.py [--model gemma3-270m] [--sizes 512,2048,4096,8192,16384]
                                                       [--reps 5] [--recompute-reps 1] [--json]

For each prefix length N (deterministic token ids) and one query (17 tokens with Gemma's tokenizer):
- `recompute_s`: a fresh chunked prefill of the prefix, then the query's forward (last-position logits), as a
  model without memory would answer.
- `graft_s`: `recall.graft_decode(..., max_tokens=1)`, the one graft -> decode path solve/evals/replay run:
  read the artifact from the store (one buffer, SHA-256 computed as it is read), parse it (tensors are views
  over those bytes), restore it at its own positions, the query's forward, the first token.
- `restore_s`: `recall.graft` alone (read, hash, parse, restore) vs `floor_s`: a plain read + SHA-256 of the
  very same file (what no correct graft can beat).
- `query_s`: the query's forward alone over a cache already in memory (the other half of the floor).
- `weights_s`: reading every weight of the model once (a sum over each parameter), which any forward
  pass, however short its query, must do: `ceiling` = recompute_s / (floor_s + weights_s) is the most a
  graft from disk can gain on this machine with these weights (no restore or query kernel can beat it).
- RAM tier (`artifacts/ram_tier.py`): the same graft from a store that already read and hash-checked the
  artifact in this process: `ram_restore_s`, `ram_graft_s` (one `lstat`, no read, no hash), `ram_speedup`;
  its bound has no read and no hash: `ram_ceiling` = recompute_s / weights_s. The disk figures use a store
  with the tier off (`ram_tier_bytes=0`), so every disk graft reads and hashes.
The graft's first token and last-position logits are checked byte-equal (`torch.equal`) to the recompute's.
Break-even: prefixes of 1..256 tokens are timed the same way; the first length where recompute is slower
is reported. gemma3-270m's context window is 32,768; its sliding layers keep 511 positions, so the
artifact of an N-token prefix holds N positions for the 3 full layers and 511 for the 15 sliding ones.
The store is on local disk and was just written (warm page cache for both the graft and the floor).
Results go to reports/bench-graft-<model>.json and a PNG of both curves beside it.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env

ROOT = Path(__file__).resolve().parents[1]
QUERY = "Question: Add 27, 45 and 8.\nAnswer:"  # 17 tokens with Gemma's tokenizer (the query length)


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def stream_weights(engine) -> float:
    """Read every parameter once (tied weights once), on the runtime's threads: the memory traffic no
    forward pass can avoid."""
    from galahad.workers.runtime import deterministic

    with deterministic(engine.runtime):
        return float(sum(float(p.sum()) for p in engine.model.parameters()))


def prefix_tokens(engine, n: int, gen) -> list[int]:
    """The N-token prefix `measure` times: BOS, then deterministic random ids from `gen` (bench_peers.py feeds
    the very same ids to llama.cpp)."""
    import torch

    vocab = engine.model.config.vocab_size
    return [engine.tokenizer.bos_token_id] + torch.randint(10, vocab, (n - 1,), generator=gen).tolist()


def measure(engine, store, n: int, reps: int, recompute_reps: int, gen) -> dict:
    import torch

    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.flywheel.memory.recall import graft, graft_decode
    from galahad.workers.graft import encode_span

    prefix = prefix_tokens(engine, n, gen)
    q = engine.encode(QUERY, bos=False)
    recompute, ref_logits, art_id = [], None, None
    for _ in range(recompute_reps):
        cache = engine.new_cache()
        _, t_prefix = timed(lambda cache=cache: engine.prefill(cache, prefix, 0, last_only=True))
        if art_id is None:  # the artifact is these very bytes (encoded between the two timed parts)
            art_id = store.put(encode_span(engine, cache, prefix, 0, None)[1])
        ref_logits, t_query = timed(lambda cache=cache: engine.prefill(cache, q, n, last_only=True)[-1])
        recompute.append(t_prefix + t_query)
    path = store.path(art_id)
    # A blob is kept in RAM only once its file is older than the file-time tick (`RACY_NS`): date it back,
    # as an artifact deposited a while ago is, then read it once through the RAM store.
    past = time.time_ns() - 60 * 10**9
    os.utime(path, ns=(past, past))
    ram = LocalStore(store.root)
    ram.get_checked(art_id)
    warm, _, _ = graft(engine, store, art_id)
    floor, restore, query, ttft, ram_restore, ram_ttft = [], [], [], [], [], []
    for _ in range(reps):  # interleaved, so load changes hit every figure alike
        floor.append(timed(lambda: hashlib.sha256(path.read_bytes()).hexdigest())[1])
        restore.append(timed(lambda: graft(engine, store, art_id))[1])
        ram_restore.append(timed(lambda: graft(engine, ram, art_id))[1])
        c = copy.deepcopy(warm)
        query.append(timed(lambda c=c: int(torch.argmax(engine.prefill(c, q, n, last_only=True)[-1])))[1])
        out, t = timed(lambda: graft_decode(engine, store, art_id, QUERY, max_tokens=1))
        ttft.append(t)
        ram_out, t = timed(lambda: graft_decode(engine, ram, art_id, QUERY, max_tokens=1))
        ram_ttft.append(t)
    hits = ram.ram.stats()["hits"]
    weights = [timed(lambda: stream_weights(engine))[1] for _ in range(reps)]
    cache, start, _ = graft(engine, store, art_id)
    graft_logits = engine.prefill(cache, q, start, last_only=True)[-1]
    cache, start, _ = graft(engine, ram, art_id)
    ram_logits = engine.prefill(cache, q, start, last_only=True)[-1]
    exact = (bool(torch.equal(graft_logits, ref_logits)) and bool(torch.equal(ram_logits, ref_logits))
             and out.output_token_ids == [int(torch.argmax(ref_logits))] == ram_out.output_token_ids)
    row = {"tokens": n, "recompute_s": statistics.median(recompute), "graft_s": statistics.median(ttft),
           "restore_s": statistics.median(restore), "floor_s": statistics.median(floor),
           "query_s": statistics.median(query), "weights_s": statistics.median(weights),
           "ram_restore_s": statistics.median(ram_restore), "ram_graft_s": statistics.median(ram_ttft),
           "ram_hits": hits, "artifact_bytes": path.stat().st_size, "query_tokens": len(q), "exact": exact}
    row["speedup"] = row["recompute_s"] / row["graft_s"]
    row["restore_vs_floor"] = row["restore_s"] / row["floor_s"]
    row["graft_vs_floor"] = row["graft_s"] / (row["floor_s"] + row["query_s"])
    row["ceiling"] = row["recompute_s"] / (row["floor_s"] + row["weights_s"])
    row["ram_speedup"] = row["recompute_s"] / row["ram_graft_s"]
    row["ram_ceiling"] = row["recompute_s"] / row["weights_s"]
    return row


def plot(rows: list[dict], small: list[dict], title: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = sorted(small + rows, key=lambda r: r["tokens"])
    x = [r["tokens"] for r in pts]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(x, [r["recompute_s"] for r in pts], "o-", label="recompute prefix + query")
    ax.plot(x, [r["graft_s"] for r in pts], "s-", label="graft (read, hash, restore) + query")
    ax.plot(x, [r["ram_graft_s"] for r in pts], "^-", label="graft from the RAM tier (no read, no hash) + query")
    ax.plot(x, [r["floor_s"] + r["query_s"] for r in pts], ":", label="floor: read + SHA-256 + query forward")
    ax.plot(x, [r["floor_s"] + r["weights_s"] for r in pts], "--", label="bound: read + SHA-256 + weights read once")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("prefix tokens")
    ax.set_ylabel("time to first token (s)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--sizes", default="512,2048,4096,8192,16384")
    ap.add_argument("--reps", type=int, default=5, help="graft-side repetitions (medians)")
    ap.add_argument("--recompute-reps", type=int, default=1, help="recompute repetitions (16k takes minutes)")
    ap.add_argument("--break-even", default="1,2,4,8,16,32,64,128,256", help="small prefix lengths to time")
    ap.add_argument("--out", type=Path, default=None, help="report path (default reports/bench-graft-MODEL.json)")
    ap.add_argument("--threads", type=int, default=DEFAULT_RUNTIME.threads, help="CPU threads (default: the runtime's)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runtime = DEFAULT_RUNTIME.with_(threads=args.threads)
    pin_process_env(runtime)
    import torch

    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.workers.engine import Engine
    from galahad.workers.model_loader import load_model

    sizes = [int(s) for s in args.sizes.split(",") if s]
    small = [int(s) for s in args.break_even.split(",") if s]
    cache_dir = Path(os.environ.get("GALAHAD_MODEL_CACHE", "~/.cache/galahad-models")).expanduser()
    engine = Engine(load_model(args.model, cache_dir, runtime), runtime)
    window = engine.loaded.context_window
    too_long = [n for n in sizes + small if n < 1 or n + 17 > window]
    if too_long:
        sys.exit(f"prefix lengths must be in 1..{window - 17} (context window {window}): {too_long}")
    load_before = uptime()
    gen = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="bench-graft-") as tmp:
        store = LocalStore(tmp, ram_tier_bytes=0)  # disk: every graft reads and hashes
        measure(engine, store, 64, 1, 1, gen)  # warm-up (first calls allocate)
        small_rows = [measure(engine, store, n, args.reps, args.reps, gen) for n in small]
        rows = []
        out = args.out or ROOT / "reports" / f"bench-graft-{args.model}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            rows.append(measure(engine, store, n, args.reps, args.recompute_reps, gen))
            out.write_text(json.dumps({"partial": True, "rows": rows, "small_rows": small_rows,
                                       "load": uptime()}, indent=2))  # a killed run still leaves its rows
            r = rows[-1]
            print(f"{n:>6} tokens: recompute {r['recompute_s']:.3f} s, graft {r['graft_s'] * 1e3:.1f} ms "
                  f"({r['speedup']:.0f}x); restore {r['restore_s'] * 1e3:.1f} ms vs floor {r['floor_s'] * 1e3:.1f} ms "
                  f"({r['restore_vs_floor']:.2f}x); query {r['query_s'] * 1e3:.1f} ms; graft/(floor+query) "
                  f"{r['graft_vs_floor']:.2f}; weights read once {r['weights_s'] * 1e3:.1f} ms, ceiling "
                  f"{r['ceiling']:.0f}x; RAM tier: restore {r['ram_restore_s'] * 1e3:.1f} ms, graft "
                  f"{r['ram_graft_s'] * 1e3:.1f} ms ({r['ram_speedup']:.0f}x, ceiling {r['ram_ceiling']:.0f}x); "
                  f"exact {r['exact']}", file=sys.stderr, flush=True)
    slower = [r["tokens"] for r in small_rows if r["recompute_s"] > r["graft_s"]]
    below = [r["tokens"] for r in small_rows if r["recompute_s"] <= r["graft_s"]]
    report = {
        "model": args.model, "threads": runtime.threads, "query": QUERY, "reps": args.reps,
        "recompute_reps": args.recompute_reps, "rows": rows, "small_rows": small_rows,
        "break_even_tokens": min(slower) if slower else None,
        "recompute_cheaper_at": below,
        "all_exact": all(r["exact"] for r in rows + small_rows),
        "load_before": load_before, "load_after": uptime(), "cpus": os.cpu_count(),
        "command": "python bench/bench_graft.py " + " ".join(sys.argv[1:]),
    }
    out.write_text(json.dumps(report, indent=2, sort_keys=True))
    plot(rows, small_rows, f"{args.model}, {runtime.threads} threads, {len(engine.encode(QUERY, bos=False))}-token query; {report['load_before'][-40:]}",
         out.with_suffix(".png"))
    print(f"break-even: graft is faster from {report['break_even_tokens']} prefix tokens "
          f"(recompute cheaper at {below or 'none'}); all exact: {report['all_exact']}; report {out}")
    if args.json:
        print(json.dumps(report, sort_keys=True))
    return 0 if report["all_exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
