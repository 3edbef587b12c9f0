"""The CLI's storage flags (`--catalog`, `--store`) and opening them from parsed args.

What is opened, and how, is the application layer's (`flywheel/app/storage.py`); `engine_for` is
re-exported from there for the commands that load the answering engine.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from galahad.flywheel.app.storage import engine_for, open_catalog, open_storage
from galahad.flywheel.config import Paths

__all__ = ["add_storage_args", "catalog_only", "engine_for", "json_default", "storage"]


def add_storage_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--catalog", default=None, help="SQLAlchemy URL (default: SQLite file in the data dir)")
    p.add_argument("--store", default=None,
                   help="artifact store folder (default: the data dir's store), or s3://BUCKET/PREFIX: an object "
                        "store (endpoint and keys from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...) read through "
                        "<data>/store-cache/")


def storage(args: argparse.Namespace, create: bool = False):
    """(paths, catalog, store) for a command (`open_storage`: only `run`, `serve` and `catalog import`
    pass `create=True`; otherwise a missing catalog is a one-line error and nothing is created)."""
    paths: Paths = args.paths
    catalog, store = open_storage(paths, args.catalog, args.store, create=create,
                                  ram_tier_bytes=getattr(args, "ram_tier", None))
    return paths, catalog, store


def catalog_only(args: argparse.Namespace, create: bool = False):
    """The catalog `--catalog` names, without a store (creating the data dir only for its own SQLite file)."""
    url = args.paths.resolve_catalog(args.catalog)
    if create and url == args.paths.catalog_url:
        args.paths.root.mkdir(parents=True, exist_ok=True)
    return open_catalog(url, create)


def json_default(o: Any) -> Any:
    """`json.dumps(default=...)` for catalog rows: times in ISO form, sets sorted, anything else as text."""
    if isinstance(o, datetime):
        return o.isoformat()
    if isinstance(o, set):
        return sorted(o)
    return str(o)
