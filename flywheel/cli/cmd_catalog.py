"""`galahad catalog ...`: look into and maintain the catalog and its store. Tables for people, --json for
programs. Exit codes: 0 fine, 1 fsck found something, 2 a clear one-line error (unknown id, bad bundle,
unreachable database, ...).

The catalog is `--catalog URL` (any SQLAlchemy URL; env GALAHAD_CATALOG; default the data dir's SQLite file)
and the store `--store PATH` (default the data dir's store). Only `import` may create a catalog: every other
action refuses one that does not exist or has no Galahad tables (a mistyped URL must never read as empty).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any

from galahad.flywheel.app.storage import make_store
from galahad.flywheel.cli import catalog_keys
from galahad.flywheel.cli.argtypes import count, finite
from galahad.flywheel.cli.eval_support import progress_bar
from galahad.flywheel.cli.flags import add_model_flag, byte_size
from galahad.flywheel.cli.session import catalog_only, engine_for, json_default
from galahad.flywheel.config import CATALOG_ENV, GcConfig
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.learn.rebuild_check import RebuildCheck
from galahad.flywheel.learn.recompile import recompile
from galahad.flywheel.memory.rebuild import rebuilding

CREATES = {"import"}  # every other action refuses a catalog that does not exist or has no Galahad tables


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("catalog", help="inspect and maintain the catalog and artifact store")
    p.add_argument("--catalog", default=None, metavar="URL", help=f"database URL (env {CATALOG_ENV})")
    p.add_argument("--store", default=None, metavar="PATH", help="artifact store folder, or s3://BUCKET/PREFIX")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    # Also accepted after the subcommand; SUPPRESS keeps the subparser from resetting the value given before.
    common.add_argument("--catalog", default=argparse.SUPPRESS, metavar="URL", help=argparse.SUPPRESS)
    common.add_argument("--store", default=argparse.SUPPRESS, metavar="PATH", help=argparse.SUPPRESS)
    cs = p.add_subparsers(dest="catalog_command", required=True, metavar="ACTION")
    a = cs.add_parser("ls", parents=[common], help="list artifacts (newest first, or one library in order)")
    a.add_argument("--library", default=None)
    _add_limit(a, "artifacts")
    a = cs.add_parser("show", parents=[common], help="one artifact (with lineage) or problem, by id or prefix")
    a.add_argument("id")
    a = cs.add_parser("stats", parents=[common], help="counts, stored tokens and bytes (per memory scope too, "
                      "once tenants exist)")
    a.add_argument("--tenant", default=None, metavar="NAME", help="what one tenant sees: its scope and shared's")
    cs.add_parser("libraries", parents=[common], help="libraries with chains, tokens, bytes and transfer gates")
    a = cs.add_parser("find", parents=[common], help="find problems by text, hash (prefix), topic or status")
    a.add_argument("text", nargs="?", default=None)
    a.add_argument("--hash", default=None)
    a.add_argument("--topic", default=None)
    a.add_argument("--status", default=None,
                   help="the work queue's status: pending, claimed, verified or failed")
    _add_limit(a, "problems")
    a = cs.add_parser("runs", parents=[common], help="learning runs, newest first (start, finish, summary)")
    _add_limit(a, "runs")
    verify = argparse.ArgumentParser(add_help=False)
    verify.add_argument("--verify", action="store_true",
                        help="also re-derive every artifact from its token ids and parent on the local engine "
                             "(--model) and refuse any whose bytes differ: proves the KV authentic, not just intact")
    add_model_flag(verify, "engine for --verify and --recompile: ")
    cs.add_parser("fsck", parents=[common, verify],
                  help="re-hash every blob; report dangling rows, orphans, corruption")
    gcc = GcConfig()
    a = cs.add_parser("gc", parents=[common], help="delete orphan blobs and temp files older than --grace")
    a.add_argument("--grace", type=finite(), default=gcc.grace_seconds, metavar="SECONDS")
    a.add_argument("--dry-run", action="store_true")
    a.add_argument("--force", action="store_true",
                   help=f"delete even more than {100 * gcc.max_fraction:.0f}%% of the store's blobs, or any when "
                        "the catalog has no artifacts (refused otherwise: the catalog is likely the wrong one)")
    a = cs.add_parser("export", parents=[common], help="write artifacts and their rows to a bundle file")
    a.add_argument("bundle")
    a.add_argument("--library", default=None, help="only this library's chains (with ancestors)")
    a.add_argument("--force", action="store_true", help="overwrite an existing file")
    a.add_argument("--sign", default=None, metavar="KEYFILE",
                   help="sign the bundle with this Ed25519 private key (`catalog keygen`); importers that trust "
                        "its public key take it without --verify")
    a = cs.add_parser("import", parents=[common, verify],
                      help="check a bundle completely, then add it (signed by a trusted key, else --verify or "
                           "--trust-unsigned)")
    a.add_argument("bundle")
    a.add_argument("--trust-unsigned", action="store_true",
                   help="take a bundle that is unsigned or signed by a key this data dir does not trust, without "
                        "re-deriving it (every content check still runs; a bad signature is still refused)")
    a.add_argument("--recompile", action="store_true",
                   help="then rebuild its artifacts made under another runtime for this machine (as `recompile`)")
    a = cs.add_parser("recompile", parents=[common],
                      help="rebuild every artifact made under another runtime from its tokens and parent, under "
                           "this engine (new ids, same verifications, libraries and recalls; originals kept)")
    add_model_flag(a, "engine to rebuild under: ")
    a.add_argument("--evicted", action="store_true", help="also rebuild this runtime's evicted blobs (same ids)")
    a = cs.add_parser("evict", parents=[common],
                      help="delete least recently grafted blobs until the store fits SIZE (rows, tokens and "
                           "verdicts stay; a graft rebuilds an evicted artifact exactly)")
    a.add_argument("--to", type=byte_size, required=True, metavar="SIZE", help="e.g. 20G, 500M, 123456 (bytes)")
    a.add_argument("--dry-run", action="store_true")
    a.add_argument("--all", action="store_true",
                   help="also the libraries' current chains (spared by default: a running learner extends them "
                        "from the store); only while no learner runs on this catalog")
    catalog_keys.register(cs, common)
    p.set_defaults(func=run)


LIST_LIMIT = 50  # rows a listing shows unless --limit N or --all


def _add_limit(p: argparse.ArgumentParser, what: str) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--limit", type=count(), default=LIST_LIMIT, metavar="N",
                   help=f"show at most N {what} (default {LIST_LIMIT})")
    g.add_argument("--all", action="store_true", help=f"show every {what[:-1]}")


def _limit(args: argparse.Namespace) -> int | None:
    return None if args.all else args.limit


def _truncated(args: argparse.Namespace, shown: int, total) -> None:
    """Say when a listing left rows out, and how to see them (stdout under a table; stderr with --json,
    which keeps stdout one JSON document). `total()` is counted only after a full page."""
    if _limit(args) == shown and shown < (n := total()):
        out = sys.stderr if args.json else sys.stdout
        print(f"{shown:,} of {n:,} shown; --limit N or --all for more", file=out)


def _open(args: argparse.Namespace):
    store = make_store(args.paths, args.store)
    return catalog_only(args, create=args.catalog_command in CREATES), store


def _json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=json_default))


def _cell(v: Any, width: int) -> str:
    s = v.isoformat(sep=" ", timespec="seconds") if isinstance(v, datetime) else ("-" if v is None else str(v))
    s = " ".join(s.split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _table(rows: list[dict[str, Any]], cols: list[tuple[str, int]]) -> None:
    if not rows:
        print("(none)")
        return
    cells = [[_cell(r.get(c), w) for c, w in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, (c, _) in enumerate(cols)]
    print("  ".join(c.ljust(w) for (c, _), w in zip(cols, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def _fields(title: str, row: dict[str, Any] | None, keys: list[str]) -> None:
    print(f"{title}:")
    if row is None:
        print("  (none)")
        return
    for k in keys:
        print(f"  {k:<20} {_cell(row.get(k), 100)}")


ART_COLS = [("id", 16), ("token_start", 8), ("token_end", 8), ("n_tokens", 8), ("size", 12), ("parent_id", 16),
            ("verification_id", 12), ("created_at", 19)]
PROB_COLS = [("id", 16), ("topic", 20), ("template", 20), ("status", 9), ("answer", 12), ("text", 60)]


def _show(cat, ref: str, as_json: bool) -> None:
    kind, full = cat.resolve(ref)
    if kind == "artifact":
        lin = cat.artifacts.lineage(full)
        if as_json:
            return _json({"kind": kind, **lin})
        _fields("artifact", lin["artifact"], ["id", "token_start", "token_end", "n_tokens", "size", "dtype",
                                              "model_fingerprint", "runtime_fingerprint", "layer_kinds",
                                              "location", "created_at"])
        _fields("verification", lin["verification"], ["id", "verified", "verifier_version", "reason", "created_at"])
        _fields("attempt", lin["attempt"], ["id", "provenance", "model_fingerprint", "sampling", "tokens", "seconds",
                                            "cpu_seconds", "energy_joules", "output_text"])
        _fields("problem", lin["problem"], ["id", "topic", "template", "source", "status", "answer", "text"])
        _fields("run", lin["run"], ["id", "started_at", "finished_at", "config"])
        print(f"parents ({len(lin['parents'])}, nearest first):")
        _table(lin["parents"], ART_COLS[:6])
        print("libraries:")
        _table(lin["libraries"], [("library", 40), ("chain_index", 6), ("position", 8)])
        return None
    prob = cat.problems.get(full)
    attempts = cat.runs.attempts(full)
    best = cat.runs.verified_solution(full)
    if as_json:
        return _json({"kind": kind, "problem": prob, "attempts": attempts, "verified_solution": best})
    if prob.get("failure"):  # why it failed (learn/failures.py), one line
        from galahad.flywheel.learn.failures import describe  # deferred: lark is heavy

        prob = {**prob, "failure": describe(prob["failure"])}
    _fields("problem", prob, ["id", "topic", "template", "source", "external_id", "status", "claims", "answer",
                              "text", *(["failure"] if prob.get("failure") else [])])
    print(f"attempts ({len(attempts)}):")
    for a in attempts:
        a["verdict"] = "; ".join(f"{'ok' if v['verified'] else 'no'} ({v['verifier_version']}: {v['reason']})"
                                 for v in a["verifications"]) or "unverified"
    _table(attempts, [("id", 12), ("provenance", 10), ("tokens", 7), ("seconds", 8), ("verdict", 50),
                      ("output_text", 40)])  # provenance: sampled (the model's) or gold (a gold solution)
    _fields("verified solution", best, ["id", "provenance", "verification_id", "artifact_id", "tokens", "output_text"])
    return None


def _rederiver(args: argparse.Namespace):
    """The local engine's re-deriver for `--verify` (loads the model), else None."""
    if not getattr(args, "verify", False):
        return None
    return RebuildCheck(engine_for(args.model, args.paths, args.kernel_mode))


def _recompile(args: argparse.Namespace, cat, store, as_json: bool) -> dict[str, Any]:
    """`recompile` (and `import --recompile`): rebuild under the local engine, a bar on stderr, a summary."""
    engine = engine_for(args.model, args.paths, args.kernel_mode)
    state: dict[str, Any] = {}

    def total(n: int) -> None:
        state["bar"] = progress_bar(n, "recompile")
        state["tick"] = state["bar"].__enter__()

    def hook(event: str, _aid: str) -> None:
        if event == "recorded" and "tick" in state:
            state["tick"]()

    try:
        out = recompile(cat, store, engine, hook, evicted=getattr(args, "evicted", False), total=total)
    finally:
        if "bar" in state:
            state["bar"].__exit__(None, None, None)
    summary = out.to_dict()
    if not as_json:
        print(f"recompiled {len(out.rebuilt):,} of {out.pending:,} artifacts made under another runtime"
              + (f"; {len(out.skipped):,} skipped (e.g. {out.skipped[0]['id'][:16]}: {out.skipped[0]['reason']})"
                 if out.skipped else "")
              + (f"; {out.other_model:,} of another model left as they are" if out.other_model else "")
              + (f"; {out.restored:,} evicted blobs rebuilt" if out.restored else ""))
    return summary


def run(args: argparse.Namespace) -> int:
    if args.catalog_command in catalog_keys.ACTIONS:  # keys need no catalog
        return catalog_keys.run(args)
    cat, store = _open(args)
    try:
        return _dispatch(args, cat, store)
    finally:
        cat.close()


def _dispatch(args: argparse.Namespace, cat, store) -> int:
    action, as_json = args.catalog_command, args.json
    if action == "ls":
        if args.library is not None and args.library not in {lib["library"] for lib in cat.libraries.all()}:
            raise GalahadError(f"unknown library {args.library[:200]!r}")
        rows = cat.artifacts.listing(limit=_limit(args), library=args.library)
        _json(rows) if as_json else _table(rows, ART_COLS + ([("chain_index", 5), ("position", 5)] if args.library else []))
        _truncated(args, len(rows), lambda: cat.artifacts.count(args.library))
    elif action == "show":
        _show(cat, args.id, as_json)
    elif action == "stats":
        if getattr(args, "tenant", None) is not None:  # one tenant's view (its scope and shared's)
            if cat.tenants.get(args.tenant) is None:
                raise GalahadError(f"unknown tenant {args.tenant[:60]!r}")
            s = cat.scopes.stats(args.tenant)
            s.pop("scope")
        else:
            s = cat.stats()
            if cat.tenants.any():  # with tenants: each memory scope's own figures
                s["scopes"] = cat.scopes.by_scope()
        if as_json:
            _json(s)
        else:
            by_status, scopes = s.pop("by_status"), s.pop("scopes", None)
            for k, v in s.items():
                print(f"{k:<16} {v:>14,}")
            print("by status        " + (", ".join(f"{k} {v:,}" for k, v in sorted(by_status.items())) or "-"))
            if scopes:
                _table(scopes, [("scope", 40), ("problems", 9), ("queued", 7), ("verified", 9), ("artifacts", 9),
                                ("bytes", 14)])
    elif action == "libraries":
        from galahad.flywheel.catalog.gates import describe  # deferred: sqlalchemy is heavy

        rows = cat.libraries.all()
        gates: dict[str, list[dict]] = {}
        for g in cat.gates.all():  # transfer/similar answer only where an eval showed they pay
            gates.setdefault(g["library"], []).append(g)
        for r in rows:
            r["gates"] = gates.get(r["library"], [])
            r["gate"] = "; ".join(describe(g) for g in r["gates"]) or describe(None)
        _json(rows) if as_json else _table(rows, [("library", 40), ("topic", 20), ("chains", 6), ("artifacts", 9),
                                                  ("stored_tokens", 13), ("bytes", 14), ("gate", 120)])
    elif action == "runs":
        rows = cat.runs.recent(_limit(args))
        if as_json:
            _json(rows)
        else:
            for r in rows:
                r["summary"] = ", ".join(f"{k} {v}" for k, v in (r.get("summary") or {}).items()
                                         if isinstance(v, int | float | str)) or "-"
            _table(rows, [("id", 12), ("started_at", 19), ("finished_at", 19), ("summary", 80)])
        _truncated(args, len(rows), cat.runs.count)
    elif action == "find":
        if args.text is None and args.hash is None and args.topic is None and args.status is None:
            raise GalahadError("find needs TEXT, --hash, --topic or --status")
        filters = {"text": args.text, "hash": args.hash, "topic": args.topic, "status": args.status}
        rows = cat.problems.find(**filters, limit=_limit(args))
        _json(rows) if as_json else _table(rows, PROB_COLS)
        _truncated(args, len(rows), lambda: cat.problems.count(**filters))
    elif action == "fsck":
        from galahad.flywheel.catalog.fsck import fsck  # deferred: sqlalchemy is heavy

        rederive = _rederiver(args)
        if rederive is not None:  # an evicted parent is rebuilt (checked by hash) to re-derive its children
            store = rebuilding(store, cat, rederive.engine)
        report = fsck(cat, store, rederive=rederive)
        if as_json:
            _json(report.to_dict())
        else:
            print(f"checked {report.rows:,} rows and {report.blobs:,} blobs")
            if report.database != "ok":
                print(f"database    {report.database}")
            for name in ("dangling", "corrupted", "mismatched", "unreadable", "orphans", "temp_files", "forged",
                         "unverifiable"):
                items = getattr(report, name)
                if items is None:  # forged/unverifiable: only with --verify
                    continue
                print(f"{name:<11} {len(items):>8,}" + ("  (collectable: galahad catalog gc)"
                                                        if items and name in ("orphans", "temp_files") else ""))
                for it in items[:20]:
                    print(f"    {it}")
            if report.evicted:
                print(f"evicted     {report.evicted:>8,}  (rebuilt on their next graft)")
            print("ok" if report.ok else ("DAMAGED" if report.damaged else "not clean"))
        return 0 if report.ok else 1
    elif action == "gc":
        from galahad.flywheel.catalog.fsck import gc  # deferred: sqlalchemy is heavy

        out = gc(cat, store, grace_seconds=args.grace, dry_run=args.dry_run, force=args.force)
        if as_json:
            _json(out)
        else:
            verb = "would remove" if args.dry_run else "removed"
            print(f"{verb} {len(out['removed_orphans']):,} orphan blobs ({out['freed_bytes']:,} bytes) and "
                  f"{len(out['removed_temp_files']):,} temp files; kept {out['kept_young']:,} younger than "
                  f"{args.grace:g}s; evicted {len(out['evicted_superseded']):,} superseded originals "
                  f"({out['superseded_bytes']:,} bytes; rows kept)")
    elif action == "export":
        from galahad.flywheel.catalog.bundle import export_bundle  # deferred: sqlalchemy is heavy
        from galahad.flywheel.catalog.signing import load_private_key  # deferred: sqlalchemy is heavy

        signer = load_private_key(args.sign) if args.sign is not None else None  # refused before any work
        out = export_bundle(cat, store, args.bundle, library=args.library, overwrite=args.force, signer=signer)
        _json(out) if as_json else print(f"exported {out['artifacts']:,} artifacts ({out['bytes']:,} bytes) "
                                         f"to {out['bundle']}"
                                         + (f", signed by key {out['signed_by'][:16]}" if out["signed_by"] else ""))
    elif action == "import":
        from galahad.flywheel.catalog.bundle import import_bundle  # deferred: sqlalchemy is heavy

        trusted = catalog_keys.trusted(args).ids()
        out = import_bundle(cat, store, args.bundle, rederive=_rederiver(args), trusted_keys=trusted,
                            trust_unsigned=args.trust_unsigned)
        if args.recompile:
            out["recompile"] = _recompile(args, cat, store, as_json)
        if out["upgraded"] and not as_json:  # an older bundle: which columns its migrations' defaults filled
            print(out["upgraded"])
        signer = (f"signed by trusted key {out['signed_by'][:16]}" if out["trusted"] else
                  f"signed by untrusted key {out['signed_by'][:16]}" if out["signed_by"] else "unsigned")
        _json(out) if as_json else print(f"imported {out['bundle']}: {out['artifacts']:,} artifacts "
                                         f"({out['bytes']:,} bytes; {signer}, taken by {out['admitted_by']}); "
                                         "new rows: " + ", ".join(f"{k} {v}" for k, v in out["added"].items()))
    elif action == "recompile":
        out = _recompile(args, cat, store, as_json)
        if as_json:
            _json(out)
    elif action == "evict":
        from galahad.flywheel.catalog.evictions import evict  # deferred: sqlalchemy is heavy

        out = evict(cat, store, args.to, dry_run=args.dry_run, spare_current=not args.all)
        if as_json:
            _json({k: (len(v) if k == "evicted" else v) for k, v in out.items()})
        else:
            verb = "would evict" if args.dry_run else "evicted"
            print(f"{verb} {len(out['evicted']):,} blobs ({out['freed_bytes']:,} bytes): store artifacts "
                  f"{out['before_bytes']:,} -> {out['after_bytes']:,} bytes (target {out['target_bytes']:,}; "
                  f"{out['protected']:,} in current chains kept)")
    sys.stdout.flush()
    return 0
