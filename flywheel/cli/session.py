"""The CLI's storage flags (`--catalog`, `--store`) and opening them from parsed args.

What is opened, and how, is the application layer's (`flywheel/app/storage.py`); `engine_for` is
re-exported from there for the commands that load the answering engine.
"""

from __future__ import annotations

import argparse

from galahad.flywheel.app.storage import engine_for, open_storage
from galahad.flywheel.config import Paths

__all__ = ["add_storage_args", "engine_for", "storage"]


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
