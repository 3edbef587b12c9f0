"""`galahad tenants add NAME | ls | rotate NAME | revoke NAME` and `galahad memory promote | ls`.

Tenants share one `galahad serve` and one catalog, each with its own memory scope (`problems/scope_ids.py`).
`add` and `rotate` print the tenant's token once (`--json`: `{"name", "token"}`); only its salted hash
is stored. Once any tenant exists, `serve` requires a tenant's token (or the admin's `GALAHAD_API_TOKEN`)
on every endpoint but `/healthz`. `memory promote PROBLEM_ID --to shared` moves a tenant's verified
problem and its artifacts into `shared` (every tenant then recalls it) and records who and when.
"""

from __future__ import annotations

import argparse
import json

from galahad.flywheel.cli.argtypes import count
from galahad.flywheel.cli.flags import byte_size
from galahad.flywheel.cli.session import catalog_only, json_default
from galahad.flywheel.config import CATALOG_ENV


def _catalog_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--catalog", default=None, metavar="URL", help=f"database URL (env {CATALOG_ENV})")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tenants", help="the tenants of `galahad serve`: tokens and quotas")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    a = verbs.add_parser("add", help="a new tenant; prints its token once")
    a.add_argument("name")
    a.add_argument("--rpm", type=count(0), default=None, metavar="N", help="requests per minute (default: unlimited)")
    a.add_argument("--queue", type=count(0), default=None, metavar="N",
                   help="problems waiting to be learned (default: unlimited)")
    a.add_argument("--store-bytes", type=byte_size, default=None, metavar="SIZE",
                   help="artifact bytes in its memory (default: unlimited)")
    _catalog_flag(a)
    a.set_defaults(func=cmd_add)
    a = verbs.add_parser("ls", help="tenants, quotas and usage (never tokens)")
    _catalog_flag(a)
    a.set_defaults(func=cmd_ls)
    for verb, func, helptext in (("rotate", cmd_rotate, "a new token (the old one stops working); prints it once"),
                                 ("revoke", cmd_revoke, "the token stops working; the memory stays")):
        a = verbs.add_parser(verb, help=helptext)
        a.add_argument("name")
        _catalog_flag(a)
        a.set_defaults(func=func)

    m = sub.add_parser("memory", help="memory scopes: promote a tenant's knowledge to shared, list a scope")
    mv = m.add_subparsers(dest="verb", required=True, metavar="VERB")
    a = mv.add_parser("promote", help="move a verified problem and its artifacts into shared")
    a.add_argument("problem_id")
    a.add_argument("--to", required=True, choices=["shared"])
    a.add_argument("--by", default="admin:cli", help="who promotes (recorded)")
    _catalog_flag(a)
    a.set_defaults(func=cmd_promote)
    a = mv.add_parser("ls", help="the problems of one scope")
    a.add_argument("--tenant", required=True, metavar="NAME", help="a tenant's name, or shared")
    a.add_argument("--limit", type=count(), default=100)
    _catalog_flag(a)
    a.set_defaults(func=cmd_memory_ls)


def _token(args: argparse.Namespace, token: str) -> int:
    if args.json:
        print(json.dumps({"name": args.name, "token": token}))
    else:
        print(token)
        print(f"(tenant {args.name}: shown once; only its salted hash is kept)")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    with catalog_only(args, create=True) as cat:
        return _token(args, cat.tenants.add(args.name, args.rpm, args.queue, args.store_bytes))


def cmd_rotate(args: argparse.Namespace) -> int:
    with catalog_only(args) as cat:
        return _token(args, cat.tenants.rotate(args.name))


def cmd_revoke(args: argparse.Namespace) -> int:
    with catalog_only(args) as cat:
        cat.tenants.revoke(args.name)
    print(json.dumps({"name": args.name, "revoked": True}) if args.json else f"revoked {args.name}")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    with catalog_only(args) as cat:
        found = cat.tenants.ls()
    if args.json:
        print(json.dumps(found, default=json_default))
        return 0
    print(f"{'name':<20} {'rpm':>6} {'queue':>7} {'store':>12} {'queued':>7} {'problems':>9} {'bytes':>12}  state")
    for t in found:
        def q(v):
            return "-" if v is None else str(v)
        print(f"{t['name']:<20} {q(t['rpm']):>6} {q(t['queue']):>7} {q(t['store_bytes']):>12} {t['queued']:>7} "
              f"{t['problems']:>9} {t['used_bytes']:>12}  "
              f"{'revoked' if t['revoked_at'] else 'active'}")
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    with catalog_only(args) as cat:
        out = cat.scopes.promote(args.problem_id, by=args.by)
    print(json.dumps(out, default=json_default) if args.json else
          f"promoted {out['from_problem_id'][:16]} ({out['from_scope']}) to shared as {out['problem_id'][:16]}: "
          f"{out['artifacts']} artifacts")
    return 0


def cmd_memory_ls(args: argparse.Namespace) -> int:
    with catalog_only(args) as cat:
        found = cat.scopes.ls(args.tenant, args.limit)
    if args.json:
        print(json.dumps(found, default=json_default))
        return 0
    for r in found:
        print(f"{r['id'][:16]}  {r['status']:<9} {' '.join(r['text'].split())[:70]}")
    return 0
