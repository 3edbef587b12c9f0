"""`galahad eval recurrence|transfer|context`, and `galahad replay|rescore MANIFEST`.

`eval transfer` and `eval context` live in their own modules, mounted here; what the evals share
(progress bar, manifest path and head) is in `eval_support.py`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from galahad.flywheel.app.storage import make_store
from galahad.flywheel.cli.argtypes import SEED, count
from galahad.flywheel.cli.cmd_eval_context import add_context_parser
from galahad.flywheel.cli.cmd_eval_transfer import add_transfer_parser
from galahad.flywheel.cli.eval_support import base_manifest, manifest_path, progress_bar
from galahad.flywheel.cli.flags import add_model_flag
from galahad.flywheel.cli.session import add_storage_args, engine_for, storage
from galahad.flywheel.config import DEFAULTS
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.evals import recurrence as eval_recurrence
from galahad.flywheel.evals import transfer as eval_transfer  # noqa: F401  (registers its scorer for rescore)
from galahad.flywheel.evals.evidence import read_manifest, write_manifest
from galahad.flywheel.evals.replay import replay, rescore
from galahad.flywheel.memory.foreign import foreign_message, record_runtime
from galahad.flywheel.memory.rebuild import rebuilding
from galahad.verifier.verifier import Verifier
from galahad.workers.telemetry import EnergyMeter


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluations backed by evidence (each writes a manifest)")
    ev = p.add_subparsers(dest="eval_kind", required=True, metavar="KIND")
    rc = DEFAULTS.recurrence
    r = ev.add_parser("recurrence", help="base model vs graft on problems with a verified solution")
    add_model_flag(r)
    r.add_argument("--k", type=count(), default=rc.k, help="base budget: samples per problem")
    r.add_argument("--max-tokens", type=count(), default=rc.max_tokens, help="base budget: tokens per sample")
    r.add_argument("--limit", type=count(), default=rc.limit, help="problems evaluated (default: every verified one)")
    r.add_argument("--seed", type=SEED, default=rc.seed)
    r.add_argument("--json", action="store_true")
    r.add_argument("--out", type=Path, default=None, help="manifest path (default: the reports folder)")
    add_storage_args(r)
    r.set_defaults(func=run_recurrence)

    add_transfer_parser(ev)
    add_context_parser(ev)

    rp = sub.add_parser("replay", help="re-run a manifest's records and compare output hashes")
    rp.add_argument("manifest", type=Path)
    rp.add_argument("--json", action="store_true")
    add_storage_args(rp)
    rp.set_defaults(func=run_replay)
    rs = sub.add_parser("rescore", help="recompute a manifest's scores from its recorded outputs (no model)")
    rs.add_argument("manifest", type=Path)
    rs.add_argument("--json", action="store_true")
    rs.set_defaults(func=run_rescore)


def foreign_note(catalog, engine) -> str | None:
    """One stderr line when verified problems are known only through artifacts made elsewhere (returned too)."""
    record_runtime(catalog, engine)
    fps = (engine.model_fingerprint, engine.runtime_fingerprint)
    usable = {p["id"] for p in catalog.recalls.all(fps)}
    elsewhere = [p["id"] for p in catalog.recalls.all() if p["id"] not in usable]
    if elsewhere:
        arts = [a for pid in elsewhere for a in catalog.recalls.elsewhere(pid, None, fps)]
        note = f"{len(elsewhere):,} verified problem(s) left out: {foreign_message(catalog, fps, arts)}"
        print(f"galahad: {note}", file=sys.stderr)
        return note
    return None


def run_recurrence(args: argparse.Namespace) -> int:
    paths, catalog, store = storage(args)
    cfg = eval_recurrence.RecurrenceConfig(k=args.k, max_tokens=args.max_tokens, seed=args.seed, limit=args.limit)
    with catalog, Verifier() as verifier:
        engine = engine_for(args.model, paths, args.kernel_mode)
        problems = eval_recurrence.candidates(catalog, cfg.limit,
                                              (engine.model_fingerprint, engine.runtime_fingerprint))
        note = foreign_note(catalog, engine)
        with progress_bar(len(problems), "recurrence") as tick:
            records = eval_recurrence.run(engine, catalog, rebuilding(store, catalog, engine), verifier, cfg,
                                          EnergyMeter(), tick, problems)  # an evicted artifact is rebuilt
    if not records and note:
        raise GalahadError("no verified problem with a recall artifact of this runtime: run `galahad catalog "
                           "recompile` (the line above says what differs)")
    if not records:
        raise GalahadError("no verified problem with a recall artifact in the catalog: run `galahad run` first "
                           "(it also finishes the recall artifacts of a catalog learned before they existed)")
    scores = eval_recurrence.score(records, asdict(cfg))
    manifest = {**base_manifest("recurrence", engine, asdict(cfg)), "records": records, "scores": scores,
                "store": str(store.root)}
    path = write_manifest(manifest, manifest_path(args, paths, "recurrence"))
    if args.json:
        print(json.dumps({**{k: v for k, v in scores.items() if k != "per_problem"}, "manifest": str(path)}))
    else:
        print_recurrence(scores, path)
    return 0


def print_recurrence(s: dict, path: Path) -> None:
    a = s["all_problems"]
    print(f"problems the base model fails within its budget: {s['problems']} (of {a['problems']} evaluated)")
    print(f"  accuracy   base {100 * s['base_accuracy']:.0f}%   graft {100 * s['graft_accuracy']:.0f}%")
    print(f"  decode tokens   base {s['base_decode_tokens']}   graft {s['graft_decode_tokens']}   "
          f"(max {s['graft_max_decode_tokens']} per problem; ratio {s['token_ratio'] or float('nan'):.1f}x)")
    print(f"  seconds   base {s['base_seconds']:.1f}   graft {s['graft_seconds']:.1f}   "
          f"cpu base {s['base_cpu_seconds']:.1f} graft {s['graft_cpu_seconds']:.1f}")
    print(f"all evaluated: base pass@k {100 * a['base_accuracy']:.0f}%, graft {100 * a['graft_accuracy']:.0f}%, "
          f"tokens base {a['base_decode_tokens']} vs graft {a['graft_decode_tokens']}")
    print(f"manifest: {path}")


def run_rescore(args: argparse.Namespace) -> int:
    # every rescorable kind's scorer is registered by importing its eval module (recurrence, transfer: above)
    from galahad.flywheel.evals import transfer_file  # deferred: sqlalchemy is heavy  # noqa: F401
    manifest = read_manifest(args.manifest)
    with Verifier() as verifier:
        result = rescore(manifest, verifier)
    _report(args, result, f"rescore {manifest['kind']}: scores recomputed from {len(manifest['records'])} records")
    return 0 if result["ok"] else 1


def run_replay(args: argparse.Namespace) -> int:
    manifest = read_manifest(args.manifest)
    if not any("output_sha256" in r for r in manifest["records"]):
        raise GalahadError(f"manifest kind {manifest['kind']!r} has no replayable outputs")
    paths = args.paths.ensure()
    store = make_store(paths, args.store)
    mode = manifest.get("runtime", {}).get("config", {}).get("kernel_mode", "stock")  # the mode it ran under
    engine = engine_for(manifest["model"], paths, mode)
    result = replay(manifest, engine, store)
    _report(args, result, f"replay {manifest['kind']}: {result['checked']} records re-run")
    return 0 if result["ok"] else 1


def _report(args, result: dict, headline: str) -> None:
    if args.json:
        print(json.dumps(result, sort_keys=True, default=str))
        return
    print(headline)
    issues = result.get("problems") or result.get("mismatches") or []
    print("  OK: every hash and score matches" if result["ok"] else f"  FAILED: {len(issues)} problem(s)")
    for line in issues[:20]:
        print(f"  - {line}")
