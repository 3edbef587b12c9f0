"""Depositing a verified solution into its library: the catalog chooses the tail, a depositor prefills.

`LibraryDeposits` owns the library side of a deposit: which library a problem's solution joins, which
tail it extends, committing the artifact row (the blob is durable first: `Catalog.deposit`), and redoing
the prefill after the new tail when another job appended first (`ChainConflict`). Each solution is also
deposited alone as its problem's recall artifact (`deposit_recall`), what recurrence grafts. The prefill itself is
a callable, so the same logic drives a local `workers.Depositor` or a Ray actor.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from galahad.flywheel.artifacts.store import BlobStore, LocalStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.errors import ChainConflict
from galahad.flywheel.memory.libraries import library_name
from galahad.flywheel.problems import prompts

Prefill = Callable[[str, "dict | None", dict], object]  # (segment, tail, extra) -> workers.depositor.Span


@dataclass(frozen=True)
class Deposited:
    artifact_id: str
    library: str
    chain_index: int
    position: int
    start: int
    tokens: int


class LibraryDeposits:
    def __init__(self, catalog: Catalog, store: BlobStore, prefill: Prefill, attempts: int = 3):
        self.catalog, self.store, self.prefill, self.attempts = catalog, store, prefill, attempts

    def deposit(self, problem: dict, answer: str, verification_id: str) -> Deposited:
        """Deposit after the library's current tail. Another depositor may append first (jobs sharing a
        catalog): the catalog then refuses ours atomically, and we redo it after the new tail."""
        lib = library_name(problem)
        self.catalog.ensure_library(lib, topic=problem.get("topic"), template=problem.get("template"))
        segment = prompts.solution_segment(problem["text"], answer)
        extra = {"problem_id": problem["id"], "library": lib, "verification_id": verification_id}
        for attempt in range(self.attempts):
            tail = self.catalog.library_tail(lib)
            span = self.prefill(segment, tail and {"id": tail["id"], "token_end": tail["token_end"]}, extra)
            try:
                self.catalog.deposit(self.store, span.data, verification_id=verification_id, library=lib,
                                     new_chain=span.parent is None and tail is not None)
            except ChainConflict:
                if attempt == self.attempts - 1:
                    raise
                continue
            placed = self.catalog.library_tail(lib)
            self.deposit_recall(problem, answer, verification_id)
            return Deposited(span.artifact_id, lib, placed["chain_index"], placed["position"], span.start,
                             span.tokens)
        raise AssertionError("unreachable")

    def deposit_recall(self, problem: dict, answer: str, verification_id: str) -> str:
        """Deposit the solution again, alone: a root (BOS + its segment) recorded as the artifact that
        serves this problem's recurrence, so no other solution stands between the question and its answer.
        Idempotent (same bytes, same id), so a reconcile may redo it."""
        segment = prompts.solution_segment(problem["text"], answer)
        extra = {"problem_id": problem["id"], "verification_id": verification_id, "role": "recall"}
        span = self.prefill(segment, None, extra)
        return self.catalog.deposit(self.store, span.data, recall=(problem["id"], verification_id))


class LocalDepositor(LibraryDeposits):
    """A depositor in this process (tests, benches): a `workers.Depositor` plus its catalog and store."""

    def __init__(self, model: str, model_cache: str | os.PathLike, runtime, catalog_url: str,
                 store_path: str | os.PathLike, chain_max_tokens: int | None = None):
        from galahad.workers.depositor import Depositor

        self.worker = Depositor(model, model_cache, runtime, store_path, chain_max_tokens)
        self.engine = self.worker.engine
        super().__init__(Catalog(catalog_url), LocalStore(store_path), self.worker.deposit)
