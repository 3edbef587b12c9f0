"""Deposits that run while sampling continues: the loop never waits on a depositor.

A verdict is committed before its deposit is submitted, so a kill loses nothing (`reconcile` deposits it
next run). The depositor's object refs join the generators' rounds in one `ray.wait` set; a returned span
(its blob already stored) is recorded here. Each solution makes a library deposit then, once recorded, its
recall artifact. Chains stay linear: at most one library deposit per library in flight, each given the tail
the previous produced. A `ChainConflict` (another job appended first) is redone after the new tail.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from galahad.flywheel.errors import GalahadError
from galahad.flywheel.learn.deposit import Deposited, DepositRequest, LibraryDeposits

Submit = Callable[..., object]  # (segment, tail, extra[, recall_of]) -> an ObjectRef of a Span (`deposit.Prefill`)
Fetch = Callable[[object], object]  # ObjectRef -> Span (raises the worker's failure)


class BackgroundDeposits:
    def __init__(self, deposits: LibraryDeposits, submit: Submit, fetch: Fetch):
        self.deposits, self.submit, self.fetch = deposits, submit, fetch
        self.queued: dict[str, deque[DepositRequest]] = {}
        self.in_flight: dict[object, DepositRequest] = {}  # library deposits: at most one per library
        self.recalls: dict[object, DepositRequest] = {}  # recall deposits of recorded library deposits
        self.busy: set[str] = set()

    def add(self, problem: dict, answer: str, verification_id: str) -> None:
        """Queue a verified solution's deposit; it starts now unless its library has one in flight."""
        req = self.deposits.request(problem, answer, verification_id)
        self.queued.setdefault(req.library, deque()).append(req)
        self._start(req.library)

    def refs(self) -> list:
        return [*self.in_flight, *self.recalls]

    def __contains__(self, ref) -> bool:
        return ref in self.in_flight or ref in self.recalls

    def __len__(self) -> int:
        return len(self.in_flight) + len(self.recalls) + sum(len(q) for q in self.queued.values())

    def done(self, ref) -> Deposited | None:
        """Record a returned deposit (its ref is ready). A library deposit returns where it was placed
        (and submits its recall deposit); None for a recall deposit, or a library deposit redone after a
        chain conflict."""
        if ref in self.recalls:
            req = self.recalls.pop(ref)
            try:
                self.deposits.commit_recall(req, self.fetch(ref))
            except GalahadError as exc:
                raise GalahadError(f"recall deposit of problem {req.problem['id'][:16]} failed: "
                                   f"{str(exc)[:300]}") from None
            return None
        req = self.in_flight.pop(ref)
        try:
            placed = self.deposits.commit(req, self.fetch(ref))
        except GalahadError as exc:
            raise GalahadError(f"deposit of problem {req.problem['id'][:16]} failed: {str(exc)[:300]}") from None
        if placed is None:
            self._submit(req)
            return None
        self.recalls[self.submit(*self.deposits.recall_call(req))] = req
        self.busy.discard(req.library)
        self._start(req.library)
        return placed

    def _start(self, library: str) -> None:
        queue = self.queued.get(library)
        if library in self.busy or not queue:
            return
        self.busy.add(library)
        self._submit(queue.popleft())

    def _submit(self, req: DepositRequest) -> None:
        self.in_flight[self.submit(req.segment, self.deposits.tail(req), req.extra)] = req
