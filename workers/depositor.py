"""The depositor: prefill an accepted solution after its library's tail and deposit the KV artifact.

Plain class (the Ray actor wraps it). It keeps the live cache of each library's tail so consecutive
deposits into one library cost one segment prefill, not a chain restore; when the catalog's tail is not
the one it holds (another depositor appended, or a restart), it restores the chain from the store,
which is exact at own positions. One depositor per library keeps chains linear.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from transformers import DynamicCache

from galahad.flywheel import prompts
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory import library_name, load_chain
from galahad.flywheel.store import LocalStore
from galahad.workers.engine import Engine
from galahad.workers.graft import deposit_span, restore
from galahad.workers.models import load_model
from galahad.workers.runtime import RuntimeConfig


@dataclass(frozen=True)
class Deposited:
    artifact_id: str
    library: str
    chain_index: int
    position: int
    start: int
    tokens: int


class Depositor:
    def __init__(
        self, model: str, model_cache: str | os.PathLike, runtime: RuntimeConfig, catalog_url: str,
        store_path: str | os.PathLike, chain_max_tokens: int | None = None,
    ):
        self.engine = Engine(load_model(model, Path(model_cache), runtime), runtime)
        self.catalog = Catalog(catalog_url)
        self.store = LocalStore(store_path)
        window = self.engine.loaded.context_window
        self.chain_max_tokens = min(chain_max_tokens or window, window)
        self._live: dict[str, tuple[str, DynamicCache]] = {}

    @property
    def fingerprints(self) -> tuple[str, str]:
        return self.engine.model_fingerprint, self.engine.runtime_fingerprint

    def deposit(self, problem: dict, answer: str, verification_id: str, attempts: int = 3) -> Deposited:
        """Deposit after the library's current tail. Another depositor may append first (jobs sharing a
        catalog): the catalog then refuses ours atomically, and we redo it after the new tail."""
        for attempt in range(attempts):
            try:
                return self._deposit_once(problem, answer, verification_id)
            except GalahadError as exc:
                if "does not extend library" not in str(exc) or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def _deposit_once(self, problem: dict, answer: str, verification_id: str) -> Deposited:
        lib = library_name(problem)
        self.catalog.ensure_library(lib, topic=problem.get("topic"), template=problem.get("template"))
        segment = prompts.solution_segment(problem["text"], answer)
        tail = self.catalog.library_tail(lib)
        ids = self.engine.encode(segment, bos=False)
        new_chain = tail is None or tail["token_end"] + len(ids) > self.chain_max_tokens
        if new_chain:
            ids = self.engine.encode(segment, bos=True)
            start, parent, cache = 0, None, self.engine.new_cache()
        else:
            start, parent = tail["token_end"], tail["id"]
            live = self._live.pop(lib, None)  # taken, not borrowed: a failed prefill must not leave it live
            cache = live[1] if live and live[0] == parent else restore(self.engine, load_chain(self.store, parent))
        extra = {"problem_id": problem["id"], "library": lib, "verification_id": verification_id}
        art_id, data = deposit_span(self.engine, cache, ids, start, parent, extra)
        self.catalog.deposit(self.store, data, verification_id=verification_id, library=lib,
                             new_chain=new_chain and tail is not None)
        self._live[lib] = (art_id, cache)
        placed = self.catalog.library_tail(lib)
        return Deposited(art_id, lib, placed["chain_index"], placed["position"], start, len(ids))
