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


@dataclass
class DepositRequest:
    """One verified solution on its way into its library: what to prefill, and how often it was redone."""

    problem: dict
    library: str
    segment: str
    extra: dict
    verification_id: str
    answer: str = ""
    tail: dict | None = None  # the tail its current prefill extends
    conflicts: int = 0


class LibraryDeposits:
    def __init__(self, catalog: Catalog, store: BlobStore, prefill: Prefill, attempts: int = 3,
                 fingerprints: tuple[str, str] | None = None):
        """`fingerprints`: the depositor's (model, runtime); only chains made under them are extended, so
        artifacts of another model or runtime in the same library (an imported bundle's) never block."""
        self.catalog, self.store, self.prefill, self.attempts = catalog, store, prefill, attempts
        self.fingerprints = fingerprints

    def deposit(self, problem: dict, answer: str, verification_id: str) -> Deposited:
        """Deposit after the library's current tail. Another depositor may append first (jobs sharing a
        catalog): the catalog then refuses ours atomically, and we redo it after the new tail."""
        req = self.request(problem, answer, verification_id)
        while True:
            placed = self.commit(req, self.prefill(req.segment, self.tail(req), req.extra))
            if placed is not None:
                return placed

    def request(self, problem: dict, answer: str, verification_id: str) -> DepositRequest:
        lib = library_name(problem)
        self.catalog.ensure_library(lib, topic=problem.get("topic"), template=problem.get("template"))
        segment = prompts.solution_segment(problem["text"], answer)
        extra = {"problem_id": problem["id"], "library": lib, "verification_id": verification_id}
        return DepositRequest(problem, lib, segment, extra, verification_id, answer)

    def tail(self, req: DepositRequest) -> dict | None:
        """The library's committed tail, which the next prefill of `req` must extend (None: a new chain)."""
        tail = self.catalog.library_tail(req.library, fingerprints=self.fingerprints)
        req.tail = tail and {"id": tail["id"], "token_end": tail["token_end"]}
        return req.tail

    def commit(self, req: DepositRequest, span) -> Deposited | None:
        """Commit a prefilled span; None when another job appended first (redo it after `tail(req)`)."""
        try:
            self.catalog.deposit(self.store, span.data, verification_id=req.verification_id, library=req.library,
                                 new_chain=span.parent is None and req.tail is not None)
        except ChainConflict:
            req.conflicts += 1
            if req.conflicts >= self.attempts:
                raise
            return None
        placed = self.catalog.library_tail(req.library, fingerprints=self.fingerprints)
        self.deposit_recall(req.problem, req.answer, req.verification_id)
        return Deposited(span.artifact_id, req.library, placed["chain_index"], placed["position"], span.start,
                         span.tokens)

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
        super().__init__(Catalog(catalog_url), LocalStore(store_path), self.worker.deposit,
                         fingerprints=self.worker.fingerprints)
