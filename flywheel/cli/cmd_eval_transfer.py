"""`galahad eval transfer`: held-out instances and templates under four conditions, with a manifest and plots."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from galahad.flywheel.cli.argtypes import SEED, count
from galahad.flywheel.cli.eval_support import base_manifest, manifest_path, progress_bar
from galahad.flywheel.cli.flags import add_model_flag
from galahad.flywheel.cli.session import add_storage_args, engine_for, storage
from galahad.flywheel.config import DEFAULTS, RetrievalPolicy
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.evals import transfer as eval_transfer
from galahad.flywheel.evals.evidence import sealed, write_manifest
from galahad.flywheel.evals.gate_evidence import evidence
from galahad.flywheel.problems.records import load_jsonl
from galahad.verifier.verifier import Verifier


def add_transfer_parser(ev: argparse._SubParsersAction) -> None:
    tc, fc = DEFAULTS.transfer, DEFAULTS.file_transfer
    ns = ",".join(str(n) for n in tc.max_solutions)
    t = ev.add_parser("transfer", help="held-out problems: base, empty-memory, random-artifact, library graft")
    add_model_flag(t)
    t.add_argument("--families", default=",".join(tc.families))
    t.add_argument("--per-split", type=count(), default=tc.per_split,
                   help=f"problems per family and split (default {tc.per_split})")
    t.add_argument("--max-solutions", default=ns, help=f"retrieval policies: solutions grafted (default {ns})")
    t.add_argument("--seed", type=SEED, default=tc.seed)
    t.add_argument("--problems", type=Path, default=None,
                   help="JSONL problem file: evaluate its problems (base, empty, random, nearest, text, system) "
                        "instead of the built-in families' held-out problems")
    t.add_argument("--k", type=count(), default=fc.k,
                   help="with --problems: solutions in the random and nearest memories")
    t.add_argument("--conditions", default=",".join(fc.conditions),
                   help="with --problems: conditions to run (default all; text needs nearest; base with "
                        "transfer or system records the transfer gates' evidence in the catalog)")
    t.add_argument("--json", action="store_true")
    t.add_argument("--out", type=Path, default=None, help="manifest path (default: the reports folder)")
    add_storage_args(t)
    t.set_defaults(func=run_transfer)


def run_transfer(args: argparse.Namespace) -> int:
    from galahad.flywheel.evals import plots  # deferred: matplotlib is heavy

    try:
        ns = tuple(sorted({int(x) for x in args.max_solutions.split(",") if x.strip()}))
    except ValueError:
        raise GalahadError(f"--max-solutions must be comma-separated integers, got {args.max_solutions!r}") from None
    if not ns or min(ns) < 1:
        raise GalahadError("--max-solutions and --per-split must be at least 1")
    if args.problems is not None:
        return run_transfer_file(args)
    cfg = eval_transfer.TransferConfig(families=tuple(f for f in args.families.split(",") if f),
                                       per_split=args.per_split, seed=args.seed, max_solutions=ns)
    paths, catalog, store = storage(args)
    with catalog, Verifier() as verifier:
        if not any(lib.get("artifacts") for lib in catalog.libraries.all()):
            raise GalahadError("the catalog has no library yet: run `galahad run` first")
        engine = engine_for(args.model, paths, args.kernel_mode)
        specs = eval_transfer.plan(catalog, cfg, (engine.model_fingerprint, engine.runtime_fingerprint))
        with progress_bar(len(specs), "transfer") as tick:
            records = eval_transfer.run(engine, catalog, store, verifier, cfg, progress=tick, planned=specs)
        events = catalog.runs.events()
        scores = eval_transfer.score(records, asdict(cfg))
        path = manifest_path(args, paths, "transfer")
        manifest = {**base_manifest("transfer", engine, asdict(cfg)), "records": records, "scores": scores,
                    "store": str(store.root)}
        write_manifest(manifest, path)
        scores["gates"] = record_gates(catalog, engine, manifest)
    png1 = plots.accuracy_by_condition(scores["table"], path.with_suffix(".accuracy.png"))
    png2 = plots.flywheel_over_time(events, path.with_suffix(".flywheel.png"))
    if args.json:
        print(json.dumps({**scores, "manifest": str(path), "plots": [str(png1), str(png2)]}))
    else:
        print_transfer(scores, path, [png1, png2])
    return 0


def print_transfer(s: dict, path: Path, pngs: list[Path]) -> None:
    print(f"{s['problems']} held-out problems, {s['records']} records")
    print(f"{'family':8} {'split':18} {'condition':22} {'acc':>5}  95% CI")
    for r in s["table"]:
        print(f"{r['family']:8} {r['split']:18} {r['condition']:22} {r['correct']:>2}/{r['n']:<3} "
              f"[{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]")
    print("paired (library - control), all families:")
    for c in s["comparisons"]:
        if c["family"] == "all":
            print(f"  {c['split']:18} {c['condition']:22} vs {c['control']:6} diff {c['difference']:+.2f} "
                  f"[{c['ci95'][0]:+.2f}, {c['ci95'][1]:+.2f}]  McNemar p={c['p_value']:.3f} (n={c['n']})")
    print_gates(s["gates"])
    print(f"manifest: {path}\nplots: {', '.join(str(p) for p in pngs)}")


def record_gates(catalog, engine, manifest: dict) -> list[dict]:
    """The transfer gates' evidence in this manifest (`evals/gate_evidence.py`), recorded in the catalog; the rows."""
    rows = evidence(manifest["records"], sealed(manifest)["manifest_sha256"], engine.model_fingerprint)
    catalog.gates.record(rows)
    return rows


def print_gates(rows: list[dict]) -> None:
    from galahad.flywheel.catalog.gates import describe  # deferred: sqlalchemy is heavy

    if not rows:
        print("transfer gates: no evidence recorded (it needs the base condition beside transfer or system, or "
              f"beside a library condition grafting what solve grafts: --max-solutions with {RetrievalPolicy.max_solutions})")
    for g in rows:
        print(f"  gate {g['library']:30} {describe(g)}")


def run_transfer_file(args: argparse.Namespace) -> int:
    from galahad.flywheel.evals import transfer_file  # deferred: sqlalchemy is heavy
    from galahad.flywheel.memory.solver import Solver  # deferred: sqlalchemy is heavy

    conditions = tuple(c for c in args.conditions.split(",") if c)
    unknown = sorted(set(conditions) - set(transfer_file.CONDITIONS))
    if unknown or not conditions:
        raise GalahadError(f"unknown condition {(unknown or [''])[0]!r}; known: {', '.join(transfer_file.CONDITIONS)}")
    if "text" in conditions and "nearest" not in conditions:
        raise GalahadError("the text condition is compared with nearest: give both")
    items = [{"text": p.problem, "answer": p.answer, "source": p.source, "external_id": p.id}
             for p in load_jsonl(args.problems)]  # refused whole on a bad line, before any model loads
    if not items:
        raise GalahadError(f"{args.problems}: no problems")
    cfg = transfer_file.FileTransferConfig(k=args.k, seed=args.seed, conditions=conditions)
    paths, catalog, store = storage(args)
    with catalog, Verifier() as verifier:
        catalog.problems.ensure_keys()
        if not catalog.recalls.all():
            raise GalahadError("the catalog has no verified problem with a recall artifact: run `galahad run` first")
        engine = engine_for(args.model, paths, args.kernel_mode)
        solver = Solver(engine, catalog, store, verifier)
        with progress_bar(len(items), "transfer") as tick:
            records = transfer_file.run(engine, catalog, store, verifier, items, cfg, solver, progress=tick)
        config = {**asdict(cfg), "problems_file": str(args.problems)}
        scores = transfer_file.score(records, config)
        path = manifest_path(args, paths, "transfer-file")
        manifest = {**base_manifest(transfer_file.KIND, engine, config), "records": records, "scores": scores,
                    "store": str(store.root)}
        write_manifest(manifest, path)
        scores["gates"] = record_gates(catalog, engine, manifest)
    if args.json:
        print(json.dumps({**scores, "manifest": str(path)}))
    else:
        print_transfer_file(scores, path)
    return 0


def print_transfer_file(s: dict, path: Path) -> None:
    print(f"{s['problems']} problems, {s['records']} records")
    for name, c in s["conditions"].items():
        print(f"  {name:8} {c['correct']:>4}/{c['n']:<4} {100 * c['accuracy']:5.1f}%  "
              f"[{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}]")
    for tag, conds in s["by_overlap"].items():
        print(f"  overlap {tag:8} " + "  ".join(f"{n} {c['correct']}/{c['n']}" for n, c in conds.items()))
    t = s["text_identical_to_nearest"]
    print(f"  text == nearest byte for byte: {t['identical']}/{t['n']}; system paths: {s['system_paths']}")
    for c in s["comparisons"]:
        print(f"  {c['condition']:8} vs {c['control']:6} diff {c['difference']:+.2f} "
              f"[{c['ci95'][0]:+.2f}, {c['ci95'][1]:+.2f}]  McNemar p={c['p_value']:.3g} (n={c['n']})")
    print_gates(s["gates"])
    print(f"manifest: {path}")
