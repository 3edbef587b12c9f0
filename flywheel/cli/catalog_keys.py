"""`galahad catalog keygen` and `catalog trust`: the keys that sign bundles and the keys a data dir trusts.

    galahad catalog keygen KEYFILE          # KEYFILE (private, 0600) and KEYFILE.pub
    galahad catalog export B --sign KEYFILE # a signed bundle
    galahad catalog trust KEYFILE.pub       # on the importing machine: <data>/trusted_keys/<key id>.pub
    galahad catalog trust --ls | --rm KEYID

Neither needs a catalog; both only touch the files named and the data dir's `trusted_keys/`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from galahad.flywheel.errors import GalahadError

ACTIONS = {"keygen", "trust"}


def register(cs: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    a = cs.add_parser("keygen", parents=[common],
                      help="make an Ed25519 key to sign bundles: KEYFILE (private, mode 0600) and KEYFILE.pub")
    a.add_argument("keyfile")
    a = cs.add_parser("trust", parents=[common],
                      help="trust a public key's signed bundles on import (the data dir's trusted_keys/); "
                           "--ls lists them, --rm KEYID drops one")
    a.add_argument("pubkey", nargs="?", default=None, help="a public key file (KEYFILE.pub from keygen)")
    g = a.add_mutually_exclusive_group()
    g.add_argument("--ls", action="store_true", help="list the trusted keys")
    g.add_argument("--rm", default=None, metavar="KEYID", help="stop trusting a key (8 or more hex digits of its id)")


def trusted(args: argparse.Namespace):
    from galahad.flywheel.catalog.signing import TrustedKeys  # deferred: sqlalchemy is heavy

    return TrustedKeys(args.paths.trusted_keys)


def _print(obj: Any, as_json: bool, line: str) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str) if as_json else line)


def run(args: argparse.Namespace) -> int:
    from galahad.flywheel.catalog.signing import keygen  # deferred: sqlalchemy is heavy

    as_json = args.json
    if args.catalog_command == "keygen":
        out = keygen(args.keyfile)
        _print(out, as_json, f"wrote private key {out['private_key']} (mode 0600: keep it secret) and public key "
                             f"{out['public_key']}; key id {out['key_id']}. Sign with `galahad catalog export BUNDLE "
                             f"--sign {out['private_key']}`; trust on the importing machine with `galahad catalog "
                             f"trust {out['public_key']}`")
        return 0
    keys = trusted(args)
    chosen = sum((args.pubkey is not None, args.ls, args.rm is not None))
    if chosen != 1:
        raise GalahadError("trust needs exactly one of PUBKEYFILE, --ls or --rm KEYID")
    if args.ls:
        rows = keys.listing()
        if as_json:
            _print(rows, True, "")
        elif not rows:
            print(f"(no trusted keys in {keys.root})")
        else:
            for r in rows:
                print(f"{r['key_id']}  added {r['added_at'].isoformat(sep=' ')}  {r['file']}")
    elif args.rm is not None:
        out = keys.remove(args.rm)
        _print(out, as_json, f"no longer trusted: key {out['key_id']}")
    else:
        out = keys.add(args.pubkey)
        _print(out, as_json, f"{'trusted' if out['added'] else 'already trusted'}: key {out['key_id']} ({out['file']})")
    return 0
