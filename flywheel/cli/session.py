"""Opening what a command needs, with one-line errors: catalog, store, and the pinned engine."""

from __future__ import annotations

import argparse
from pathlib import Path

from galahad.flywheel.config import Paths


def add_storage_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--catalog", default=None, help="SQLAlchemy URL (default: SQLite file in the data dir)")
    p.add_argument("--store", default=None, help="artifact store folder (default: the data dir's store)")


def storage(args: argparse.Namespace, create: bool = False):
    """(paths, catalog, store) for a command; the catalog is migrated on open.

    Only commands that produce a catalog (`run`, `serve`, `catalog import`) pass `create=True`; for every
    other command a catalog that does not exist, or has no Galahad tables, is a one-line error, and
    nothing is created (not even the data dir)."""
    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.flywheel.catalog import Catalog

    paths: Paths = args.paths
    url = paths.resolve_catalog(args.catalog)
    if create:
        paths.ensure()
    catalog = Catalog(url, create=create)
    paths.ensure()
    store = LocalStore(Path(args.store).expanduser() if args.store else paths.store)
    return paths, catalog, store


def engine_for(model: str, paths: Paths, kernel_mode: str = "stock"):
    """The answering engine runs under the default runtime: the one depositors write artifacts under."""
    from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env

    runtime = DEFAULT_RUNTIME.with_(kernel_mode=kernel_mode)
    pin_process_env(runtime)
    from galahad.workers.engine import Engine
    from galahad.workers.model_loader import load_model

    return Engine(load_model(model, paths.models, runtime), runtime)
