"""Tenants at the service: one memory scope per caller, and quotas (`security.identify` says who calls).

`TenantAnswering` is `Answering` as one tenant sees it: its `Solver` reads a `catalog.scopes.ScopedCatalog`
(the tenant's memory and shared's), what it submits or teaches goes into its scope, and every read sees its
scope and shared's only (another scope's ids are 404, like ids that do not exist). The admin (and the
single-user service) keeps `Answering` itself.

Quotas (`galahad tenants add --rpm --queue --store-bytes`; None: unlimited) are refused with 429 and
Retry-After: `rpm` per replica over a sliding minute (a refused request does not count); `queue` (its
pending or claimed problems; learning from use stops quietly there); `store_bytes` (at or past it nothing new
is queued). The queue and store checks read the catalog just before the write, outside its transaction, so
two concurrent submits may overshoot by a batch each.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from typing import Any

from galahad.flywheel.catalog.scopes import ScopedCatalog
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.solver import Solver
from galahad.flywheel.problems.records import problem_hash
from galahad.flywheel.problems.scope_ids import SHARED, library_scope, scoped_id
from galahad.flywheel.service.answering import Answering
from galahad.flywheel.service.api import NotFound, SolveResult, checked_id, checked_text
from galahad.flywheel.service.security import Caller

WINDOW_S = 60.0
QUEUE_RETRY_S = 60  # the learner's pace decides when a queued problem leaves the queue: a minute is a fair wait
STORE_RETRY_S = 3600  # the store frees only when the admin evicts or raises the quota


class OverQuota(GalahadError):
    """A tenant's quota is spent (HTTP 429, `Retry-After: retry_after`)."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = max(1, int(retry_after))


class RateLimiter:
    """Requests per minute per tenant: the times of its admitted requests in the last 60 s."""

    def __init__(self):
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def admit(self, tenant: str, rpm: int | None, now: float | None = None) -> None:
        """Count one request, or OverQuota (not counted) when `rpm` were admitted in the last minute."""
        if rpm is None:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            seen = self._seen.setdefault(tenant, deque())
            while seen and seen[0] <= now - WINDOW_S:
                seen.popleft()
            if len(seen) >= rpm:
                wait = math.ceil(seen[0] + WINDOW_S - now) if seen else WINDOW_S
                raise OverQuota(f"tenant {tenant}: {rpm} requests per minute (its quota); retry in {wait} s", wait)
            seen.append(now)


class TenantAnswering(Answering):
    """`Answering` within one tenant's memory scope (and shared's), under its quotas. Shares the replica's
    engine, store, engine lock and verifier; built per request (cheap), its solver cached per scope."""

    def __init__(self, base: Answering, caller: Caller, solvers: dict[str, Solver]):
        self.__dict__.update(base.__dict__)  # engine, catalog, store, config, lock, verifier: the replica's
        self.scope, self.quotas = caller.tenant, caller.quotas
        self.caller = f"api:tenant-{caller.tenant}"  # who gives the golds this tenant admits
        solver = solvers.get(self.scope)
        if solver is None:
            solver = solvers[self.scope] = Solver(
                base.engine, ScopedCatalog(base.catalog, self.scope), base.store, verifier=base.verifier,
                max_tokens=base.solver.max_tokens, base_max_tokens=base.solver.base_max_tokens,
                recall_policy=base.solver.recall_policy)
        self.solver = solver

    # -- quotas --------------------------------------------------------------------------------------

    def admission(self, n: int) -> None:
        """OverQuota when `n` more problems may not be queued for learning in this scope."""
        queue, store = self.quotas.get("queue"), self.quotas.get("store_bytes")
        if queue is None and store is None:
            return
        used = self.catalog.tenants.usage(self.scope)
        if store is not None and used["used_bytes"] >= store:
            raise OverQuota(f"tenant {self.scope}: its memory holds {used['used_bytes']:,} bytes, its quota is "
                            f"{store:,}: nothing more is queued for learning", STORE_RETRY_S)
        if queue is not None and used["queued"] + n > queue:
            raise OverQuota(f"tenant {self.scope}: {used['queued']:,} problems already wait to be learned, its "
                            f"quota is {queue:,}", QUEUE_RETRY_S)

    def _problem_id(self, text: str) -> str:
        """The id `text` has in this scope's view: its own, unless only shared holds it."""
        own = scoped_id(text, self.scope)
        if self.catalog.scopes.problem(self.scope, own) is None and \
                self.catalog.scopes.problem(self.scope, problem_hash(text)) is not None:
            return problem_hash(text)
        return own

    # -- answering -----------------------------------------------------------------------------------

    def solve(self, problem: object, gold: object = None, decoding=None) -> SolveResult:
        if gold is not None:
            self.admission(1)  # a gold is a request to learn: refused before any forward when over quota
        out = super().solve(problem, gold, decoding)
        return out.model_copy(update={"problem_id": self._problem_id(problem)})

    def queue(self, problem: str, gold: str) -> bool:
        try:
            self.admission(1)
        except OverQuota:  # learning from use stops at the quota (an explicit gold was refused before the solve)
            return False
        return super().queue(problem, gold)

    def submit(self, items: object) -> list[dict[str, Any]]:
        if isinstance(items, list) and items and len(items) <= self.config.max_problems:
            self.admission(len(items))
        return super().submit(items)

    # -- reads: this scope and shared's; another scope's ids are not found --------------------------

    def problem(self, problem_id: str) -> dict[str, Any]:
        if self.catalog.scopes.problem(self.scope, checked_id(problem_id, "problem")) is None:
            raise NotFound(f"unknown problem {problem_id}")
        return super().problem(problem_id)

    def stats(self) -> dict[str, Any]:
        return self.catalog.scopes.stats(self.scope)

    def find(self, text: object) -> list[dict[str, Any]]:
        text = checked_text(text, "text", self.config.max_problem_chars)
        keep = ("id", "text", "status", "topic", "template", "source", "external_id")
        return [{k: r.get(k) for k in keep} for r in self.catalog.scopes.find(self.scope, text, self.config.max_find)]

    def _visible(self, artifact_id: str) -> str:
        if not self.catalog.scopes.artifact_visible(self.scope, checked_id(artifact_id, "artifact")):
            raise NotFound(f"unknown artifact {artifact_id}")
        return artifact_id

    def artifact(self, artifact_id: str) -> dict[str, Any]:
        """Its lineage, cut at this scope's view: another scope's problem, parents and libraries left out,
        no run (runs are the service's, not a scope's), no `extra`. A promoted artifact's blob still carries,
        in its header, the problem id and library it was learned for (its bytes are its id)."""
        out = super().artifact(self._visible(artifact_id))
        sees = {self.scope, SHARED}
        if out["problem"] is not None and out["problem"].get("scope") not in sees:
            out.update(problem=None, attempt=None, verification=None)
        out["run"] = None
        # `extra` (the blob header's rebuild data) names the problem and library it was learned for
        art = {k: v for k, v in out["artifact"].items() if k != "extra"}
        if art.get("parent_id") is not None and not self.catalog.scopes.artifact_visible(self.scope, art["parent_id"]):
            art["parent_id"] = None
        out["artifact"] = art
        out["parents"] = [p for p in out["parents"] if self.catalog.scopes.artifact_visible(self.scope, p["id"])]
        out["libraries"] = [lib for lib in out["libraries"] if library_scope(lib["library"]) in sees]
        return out

    def blob(self, artifact_id: str) -> tuple[bytes, str]:
        return super().blob(self._visible(artifact_id))

