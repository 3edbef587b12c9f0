"""An in-process depositor for tests: a `workers.Depositor` plus its catalog and store, driving the same
`LibraryDeposits` logic the Ray depositor drives (no cluster needed)."""

from __future__ import annotations

import contextlib
import os

from galahad.flywheel.artifacts.store import LocalStore, open_store
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.learn.deposit import LibraryDeposits
from galahad.workers.runtime import DEFAULT_RUNTIME


class LocalDepositor(LibraryDeposits):
    """A depositor in this process: a `workers.Depositor` plus its catalog and store."""

    def __init__(self, model: str, model_cache: str | os.PathLike, runtime, catalog_url: str,
                 store_path: str | os.PathLike, chain_max_tokens: int | None = None):
        from galahad.workers.depositor import Depositor

        self.worker = Depositor(model, model_cache, runtime, store_path, chain_max_tokens)
        self.engine = self.worker.engine
        super().__init__(Catalog(catalog_url), open_store(store_path), self.worker.deposit,
                         fingerprints=self.worker.fingerprints)


@contextlib.contextmanager
def local_memory(tmp_path, model_cache):
    """(depositor, catalog, store, data dir) on a fresh SQLite catalog and store under `tmp_path`."""
    dep = LocalDepositor("tiny", model_cache, DEFAULT_RUNTIME, f"sqlite:///{tmp_path / 'catalog.sqlite3'}",
                         tmp_path / "store")
    try:
        yield dep, dep.catalog, LocalStore(tmp_path / "store"), tmp_path
    finally:
        dep.catalog.close()


def verify_and_deposit(dep: LocalDepositor, pid: str, answer: str) -> str:
    """Record `answer` to problem `pid` as an accepted attempt and deposit it as the loop does (library
    artifact + recall artifact); returns `pid`."""
    attempt = dep.catalog.runs.add_attempt(pid, None, "fp", {}, answer, 1, 0.0, 0.0)
    vid = dep.catalog.runs.add_verification(attempt, "test", True, "ok")
    dep.deposit(dep.catalog.problems.get(pid), answer, vid)
    return pid
