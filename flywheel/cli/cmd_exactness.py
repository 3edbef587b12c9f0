"""`galahad exactness`: run the exactness proof and print a table or one JSON object."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from galahad.flywheel.artifacts.store import LocalStore, atomic_write
from galahad.flywheel.cli.argtypes import SEED, count
from galahad.flywheel.cli.flags import add_kernel_mode_flag
from galahad.flywheel.config import DEFAULT_MODEL
from galahad.kernels.modes import MODES
from galahad.workers.model_loader import check_spec, load_model
from galahad.workers.runtime import DEFAULT_RUNTIME, cpu_key, pin_process_env


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("exactness", help="prove grafted logits are byte-identical to a fresh computation")
    p.add_argument("--model", default=DEFAULT_MODEL, help="gemma3-270m (default), tiny, or a local model folder")
    p.add_argument("--samples", type=count(), default=50, help="number of (prefix, query) pairs (default 50)")
    p.add_argument("--seed", type=SEED, default=0)
    add_kernel_mode_flag(p, tuple(MODES))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", type=Path, default=None,
                   help="also write the JSON report to this file; to an existing folder: as the per-CPU record "
                        "<model>-<mode>-<cpu key>.json in it (e.g. reports/exactness)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_spec(args.model)  # an unsupported architecture is refused here, before the depositor starts
    runtime = DEFAULT_RUNTIME.with_(kernel_mode=args.kernel_mode)
    pin_process_env(runtime)
    from galahad.flywheel.evals.exactness import make_cases, prove, run_depositor  # deferred: torch is heavy
    from galahad.workers.engine import Engine  # deferred: torch is heavy

    paths = args.paths.ensure()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=paths.root, prefix="exactness-") as tmp:
        store = LocalStore(tmp)
        ids = run_depositor(args.model, paths.models, args.kernel_mode, args.samples, args.seed, Path(tmp))
        engine = Engine(load_model(args.model, paths.models, runtime), runtime)
        window = engine.loaded.sliding_window or 64  # the architecture adapter's smallest window
        cases = make_cases(engine.model.config.vocab_size, window, args.samples, args.seed)
        report = prove(engine, cases, ids, store)
    report["seconds"] = round(time.perf_counter() - t0, 2)
    if args.out:
        out = args.out / report_name(report) if args.out.is_dir() else args.out
        atomic_write(out, json.dumps(report, indent=2, sort_keys=True).encode())
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print_table(report)
    exact = report["sha256_equal"] == report["serving_sha256_equal"] == report["samples"]
    if args.kernel_mode == "invariant":
        exact = exact and report["monolithic_sha256_equal"] == report["samples"]
    return 0 if exact else 1


def report_name(report: dict) -> str:
    """The per-CPU record's file name, `<model>-<mode>-<cpu key>.json`, from what the report itself records.
    Its logits hashes hold only on the processor that computed them, so reports/exactness/ keeps one per
    model, kernel mode and processor (`workers/runtime.py: cpu_key`), and a run compares only with its own
    processor's record."""
    model = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in Path(str(report["model"])).name)
    return f"{model}-{report['mode']}-{cpu_key(report.get('runtime_facts', {}).get('cpu', {}))}.json"


def print_table(r: dict) -> None:
    n = r["samples"]
    print(f"model {r['model']}  mode {r['mode']}  fingerprints model {r['model_fingerprint'][:12]} "
          f"runtime {r['runtime_fingerprint'][:12]}")
    print(f"own-position graft vs fresh prefill : SHA-256 equal {r['sha256_equal']}/{n}, KL max {r['kl_max']:.3g}, "
          f"argmax agreement {100 * r['argmax_agreement']:.1f}%")
    print(f"serving (last-position logits)      : SHA-256 equal {r['serving_sha256_equal']}/{n}")
    print(f"graft vs one-pass forward           : SHA-256 equal {r['monolithic_sha256_equal']}/{n}")
    if "token_by_token_sha256_equal" in r:
        print(f"graft vs token-by-token             : SHA-256 equal {r['token_by_token_sha256_equal']}/{n}")
    print(f"shifted graft (RoPE re-rotation)    : SHA-256 equal {r['shifted_sha256_equal']}/{n}, "
          f"max |diff| {r['shifted_max_abs_diff']:.3g}")
    print("  shift distance -> max |logit diff|: " + ", ".join(
        f"{row['shift']}: {row['max_abs_diff']:.2g}" for row in r["shift_table"]))
    print(f"({r['seconds']} s)")
