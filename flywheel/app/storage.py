"""Opening what a job or a command needs: the catalog, the artifact store, and the pinned answering engine.

Also which catalog is the data dir's own (`is_embedded`): only that one is guarded by the run lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from galahad.flywheel.artifacts.s3_store import S3Store
from galahad.flywheel.artifacts.store import BlobStore, LocalStore
from galahad.flywheel.config import DEFAULTS, Paths
from galahad.kernels.modes import resolve
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env

if TYPE_CHECKING:  # imported where used: `galahad verify` and `--help` start without SQLAlchemy
    from galahad.flywheel.catalog import Catalog  # deferred: sqlalchemy is heavy

STORE_CACHE = "store-cache"  # an object store's local cache folder, in the data dir


def make_store(paths: Paths, store: str | Path | None = None, ram_tier_bytes: int | None = None) -> BlobStore:
    """The artifact store `--store` names, by scheme: `s3://BUCKET/PREFIX` an object store (`S3Store`;
    endpoint and credentials from the standard AWS variables) read through `<data>/store-cache/` (or
    `?cache=DIR`) and the RAM tier; anything else a folder (default: the data dir's store)."""
    if isinstance(store, str) and store.startswith("s3://"):
        return S3Store(store, paths.root / STORE_CACHE, ram_tier_bytes)
    return LocalStore(Path(store).expanduser() if store else paths.store, ram_tier_bytes)


def open_storage(paths: Paths, catalog: str | None = None, store: str | Path | None = None,
                 create: bool = False, ram_tier_bytes: int | None = None) -> tuple[Catalog, BlobStore]:
    """(catalog, store) for a data dir, the catalog migrated on open (`catalog`: a SQLAlchemy URL, `store`:
    what `make_store` takes; defaults: the data dir's). Only jobs that produce a catalog (`run`, `serve`,
    `catalog import`) pass `create=True`; otherwise a catalog that does not exist, or has no Galahad tables,
    is a one-line error and nothing is created (not even the data dir)."""
    url = paths.resolve_catalog(catalog)
    if create:
        paths.ensure()
    opened = open_catalog(url, create)
    paths.ensure()
    return opened, make_store(paths, store, ram_tier_bytes)


def open_catalog(url: str, create: bool = True) -> Catalog:
    """A catalog by URL (a worker actor's, in a process of its own: created and migrated if need be)."""
    from galahad.flywheel.catalog import Catalog  # deferred: sqlalchemy is heavy

    return Catalog(url, create=create)


def engine_for(model: str, paths: Paths, kernel_mode: str = DEFAULTS.kernel_mode):
    """The answering engine runs under the default runtime: the one depositors write artifacts under."""
    runtime = DEFAULT_RUNTIME.with_(kernel_mode=resolve(kernel_mode)[0])
    pin_process_env(runtime)
    from galahad.workers.engine import Engine  # deferred: torch after pinning

    return Engine(load_model(model, paths.models, runtime), runtime)


def sqlite_file(url: str) -> Path | None:
    """The resolved database file of a SQLite URL (None for other databases or in-memory SQLite), so
    `sqlite:////D/./catalog.sqlite3` and a symlink to the data dir name the same catalog."""
    from galahad.flywheel.catalog.db import parse_url  # deferred: sqlalchemy is heavy

    u = parse_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database).expanduser().resolve()


def is_embedded(url: str, paths: Paths) -> bool:
    """Is this the data dir's own SQLite catalog, however the URL spells it?"""
    return sqlite_file(url) == sqlite_file(paths.catalog_url)
