"""`galahad eval context`: stored and graftable tokens vs the context window, with flat resident memory.
Only the parser and the report (`add_context_parser`, mounted by `cmd_eval`); the measurement is
`evals/context.py`'s.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from galahad.flywheel.cli.argtypes import SEED, count
from galahad.flywheel.cli.session import add_storage_args, storage
from galahad.flywheel.config import DEFAULT_MODEL
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env

GROW_MODEL = "tiny"
GROW_THREADS = 1


def add_context_parser(eval_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = eval_subparsers.add_parser(
        "context", help="stored and graftable tokens vs the context window; resident memory while the store grows")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"model the catalog is evaluated for, without --grow (default {DEFAULT_MODEL})")
    p.add_argument("--grow", type=count(0), default=0, metavar="N",
                   help="first deposit about N synthetic tokens, measuring RSS after every chain")
    p.add_argument("--grow-model", default=GROW_MODEL,
                   help=f"model that grows the store and is then evaluated (default {GROW_MODEL})")
    p.add_argument("--threads", type=count(), default=None,
                   help=f"runtime threads (part of the runtime fingerprint; default {GROW_THREADS} with --grow, "
                        "else the default runtime's)")
    p.add_argument("--libraries", type=count(), default=8, help="synthetic libraries to spread chains over (default 8)")
    p.add_argument("--checks", type=count(), default=4, help="graft checks: the longest chain plus random ones (default 4)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--json", action="store_true", help="print the scores and manifest path as one JSON object")
    add_storage_args(p)
    p.set_defaults(func=run_context)
    return p


def run_context(args: argparse.Namespace) -> int:
    # Growing is many small forwards: on shared cores one thread is many times faster than two spinning
    # OpenMP threads. The thread count is in the runtime fingerprint, so the grown chains graft (and count
    # as graftable) under that runtime only; the manifest records it.
    threads = args.threads or (GROW_THREADS if args.grow else DEFAULT_RUNTIME.threads)
    runtime = DEFAULT_RUNTIME.with_(threads=threads)
    pin_process_env(runtime)  # before torch is imported
    from galahad.flywheel.evals.context import evaluate  # deferred: torch is heavy
    from galahad.workers.engine import Engine  # deferred: torch is heavy

    paths, catalog, store = storage(args, create=args.grow > 0)  # growing produces a catalog
    try:
        model = args.grow_model if args.grow else args.model
        engine = Engine(load_model(model, paths.models, runtime), runtime)
        config = {"model": model, "grow_model": args.grow_model if args.grow else None, "threads": threads,
                  "store": str(getattr(store, "root", store))}
        manifest, path = evaluate(engine, catalog, store, paths.reports, grow_tokens=args.grow, checks=args.checks,
                                  seed=args.seed, libraries=args.libraries, config=config)
    finally:
        catalog.close()
    if args.json:
        print(json.dumps({"manifest": str(path), "model": manifest["model"]["name"],
                          "grown": manifest["growth"], "scores": manifest["scores"]}, sort_keys=True))
    else:
        print_report(manifest, str(path))
    # The ratio is reported, not judged against a fixed target: only a failed graft check (or memory that
    # grew with the store) is a failure of the command.
    s = manifest["scores"]
    return 0 if s["graft_checks_equal"] and s["rss_flat"] is not False else 1


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.1f} MB"


def print_report(m: dict[str, Any], path: str) -> None:
    s, g, model = m["scores"], m["growth"], m["model"]
    print(f"model {model['name']} (fingerprint {model['fingerprint'][:12]}), runtime threads "
          f"{m['runtime']['config']['threads']} (fingerprint {m['runtime']['fingerprint'][:12]})")
    if g:
        rate = g["grown_tokens"] / g["seconds"] if g["seconds"] else 0.0
        print(f"grew {g['grown_tokens']:,} synthetic tokens with {model['name']}: {g['artifacts']:,} artifacts in "
              f"{g['chains']:,} chains over {len(g['libraries'])} libraries, {g['seconds']:,.1f} s ({rate:,.0f} tok/s)")
    print(f"stored tokens {s['stored_tokens']:,}; graftable {s['graftable_tokens']:,} = {s['ratio']:,.1f}x the "
          f"context window of {s['context_window']:,} (stored: {s['stored_ratio']:,.1f}x)")
    if s["rss_flat"] is None:
        print("resident memory: not measured (no --grow)")
    else:
        print(f"store on disk: {_mb(s['store_bytes_first'])} after the first chain -> {_mb(s['store_bytes_last'])} "
              f"(x{s['store_growth_factor']})")
        pct = 100 * s["rss_growth_mb"] / s["rss_first_mb"]
        print(f"resident memory (median of the first / last {s['quarter_batches']} chains): {s['rss_first_mb']:,.1f} "
              f"-> {s['rss_last_mb']:,.1f} MB ({s['rss_growth_mb']:+,.1f} MB, {pct:+.1f}%; flat means at most "
              f"+{s['rss_threshold_mb']:,.1f} MB): {'flat' if s['rss_flat'] else 'NOT flat'}; max {s['rss_max_mb']:,.1f} MB")
        print(f"  (after malloc_trim; raw VmRSS {s['rss_raw_first_mb']:,.1f} -> {s['rss_raw_last_mb']:,.1f} MB, "
              f"max {s['rss_raw_max_mb']:,.1f} MB; peak (getrusage) {s['peak_rss_mb']:,.1f} MB)")
    longest = max((r["tokens"] for r in m["records"] if r["kind"] == "graft_check"), default=0)
    eq = sum(1 for r in m["records"] if r["kind"] == "graft_check" and r["equal"])
    print(f"graft checks: {eq}/{s['graft_checks']} byte-identical logits vs fresh prefill "
          f"(longest chain checked: {longest:,} tokens)")
    print(f"{'meets' if s['meets_target'] else 'does NOT meet'} the target (>= {m['config']['target_ratio']}x, "
          f"flat RSS, exact grafts); manifest {path}")
