"""Depositing a verified solution into its library: the catalog chooses the tail, a depositor prefills.

`LibraryDeposits` picks the library and the tail a solution extends, commits the artifact row (the
depositor has already put the blob) and redoes the prefill after the new tail when another job appended
first (`ChainConflict`). Each solution is also deposited alone as its problem's recall artifact
(`recall_call` / `commit_recall`, or `deposit_recall`), with the decode the depositor made stored beside it
(`catalog.recall_answers`). The prefill is a callable: a local `workers.Depositor` or a Ray actor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.errors import ChainConflict
from galahad.flywheel.memory.library_names import library_name
from galahad.flywheel.problems import prompts

# (segment, tail, extra[, recall_of]) -> a `workers.kv_chain.Span`: its blob is durable in the store when it
# returns; `recall_of` (a recall root's question): the span also carries that question's decode after it
Prefill = Callable[..., object]


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
        """Deposit after the library's current tail, then the recall artifact (waiting on each prefill).
        Another depositor may append first (jobs sharing a catalog): the catalog then refuses ours
        atomically, and we redo it after the new tail."""
        req = self.request(problem, answer, verification_id)
        while True:
            placed = self.commit(req, self.prefill(req.segment, self.tail(req), req.extra))
            if placed is not None:
                break
        self.commit_recall(req, self.prefill(*self.recall_call(req)))
        return placed

    def request(self, problem: dict, answer: str, verification_id: str) -> DepositRequest:
        lib = library_name(problem)
        self.catalog.libraries.ensure(lib, topic=problem.get("topic"), template=problem.get("template"))
        segment = prompts.solution_segment(problem["text"], answer)
        extra = {"problem_id": problem["id"], "library": lib, "verification_id": verification_id}
        return DepositRequest(problem, lib, segment, extra, verification_id, answer)

    def tail(self, req: DepositRequest) -> dict | None:
        """The library's committed tail, which the next prefill of `req` must extend (None: a new chain)."""
        tail = self.catalog.libraries.tail(req.library, fingerprints=self.fingerprints)
        req.tail = tail and {"id": tail["id"], "token_end": tail["token_end"]}
        return req.tail

    def commit(self, req: DepositRequest, span) -> Deposited | None:
        """Record a deposited span's library row; None when another job appended first (redo it after
        `tail(req)`; the span's blob is then an orphan gc collects). The recall deposit is the caller's."""
        try:
            self.catalog.artifacts.deposit(self.store, span.artifact_id, verification_id=req.verification_id,
                                 library=req.library, new_chain=span.parent is None and req.tail is not None)
        except ChainConflict:
            req.conflicts += 1
            if req.conflicts >= self.attempts:
                raise
            return None
        placed = self.catalog.libraries.tail(req.library, fingerprints=self.fingerprints)
        return Deposited(span.artifact_id, req.library, placed["chain_index"], placed["position"], span.start,
                         span.tokens)

    @staticmethod
    def recall_call(req: DepositRequest) -> tuple[str, None, dict, str]:
        """The prefill call of `req`'s recall artifact: the solution again, alone, as a root (BOS + its
        segment), so no other solution stands between the question and its answer; and the question a hit
        decodes after it (the problem's own)."""
        extra = {"problem_id": req.problem["id"], "verification_id": req.verification_id, "role": "recall"}
        return req.segment, None, extra, req.problem["text"]

    def commit_recall(self, req: DepositRequest, span) -> str:
        """Record a deposited recall span as the artifact that serves `req`'s problem's recurrence, and the
        decode a hit on it reads (`span.answer`, when the depositor computed one)."""
        aid = self.catalog.artifacts.deposit(self.store, span.artifact_id, recall=(req.problem["id"], req.verification_id))
        a = getattr(span, "answer", None)
        if a is not None and a["tail"] == span.artifact_id and a["question"] == req.problem["text"]:
            self.catalog.recall_answers.put(a["tail"], a["question"], a["prompt"], a["max_tokens"],
                                            tuple(a["fingerprints"]), a)
        return aid

    def deposit_recall(self, problem: dict, answer: str, verification_id: str) -> str:
        """Deposit the recall artifact alone, waiting on its prefill. Idempotent (same bytes, same id), so a
        reconcile may redo it."""
        req = DepositRequest(problem, library_name(problem), prompts.solution_segment(problem["text"], answer), {},
                             verification_id, answer)
        return self.commit_recall(req, self.prefill(*self.recall_call(req)))
