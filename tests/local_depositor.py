"""An in-process depositor for tests: a `workers.Depositor` plus its catalog and store, driving the same
`LibraryDeposits` logic the Ray depositor drives (no cluster needed)."""

from __future__ import annotations

import os

from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.learn.deposit import LibraryDeposits


class LocalDepositor(LibraryDeposits):
    """A depositor in this process: a `workers.Depositor` plus its catalog and store."""

    def __init__(self, model: str, model_cache: str | os.PathLike, runtime, catalog_url: str,
                 store_path: str | os.PathLike, chain_max_tokens: int | None = None):
        from galahad.workers.depositor import Depositor

        self.worker = Depositor(model, model_cache, runtime, store_path, chain_max_tokens)
        self.engine = self.worker.engine
        super().__init__(Catalog(catalog_url), LocalStore(store_path), self.worker.deposit,
                         fingerprints=self.worker.fingerprints)
