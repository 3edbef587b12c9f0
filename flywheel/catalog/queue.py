"""`catalog.queue`: the problem rows as the durable work queue: claims with leases (round-robin across memory
scopes with tenants), releases, failed problems tried again (`retry`), and unfinished deposits (a verified
problem with no artifact behind it, a deposit a kill interrupted, finished by the loop).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import and_, func, or_, select, update

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import Part
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError

P, A, V, ART = (TABLES[t] for t in ("problems", "attempts", "verifications", "artifacts"))
MARKABLE = ("pending", "verified", "failed")


class Queue(Part):
    def claim(self, n: int, worker_id: str, lease_seconds: float) -> list[dict[str, Any]]:
        """Atomically hand out up to n pending problems (or ones whose lease expired), oldest first."""
        t = now()
        candidates = (
            select(P.c.id)
            .where(or_(P.c.status == "pending", and_(P.c.status == "claimed", P.c.lease_until < t)))
            .order_by(P.c.created_at, P.c.id)
            .limit(int(n))
        )
        recheck = []
        if self._catalog.tenants.any():
            candidates = self._round_robin(t, n)
            recheck = [or_(P.c.status == "pending", and_(P.c.status == "claimed", P.c.lease_until < t))]
        elif self._catalog.dialect == "postgresql":  # concurrent claimers skip each other's rows instead of waiting
            candidates = candidates.with_for_update(skip_locked=True)
        stmt = (
            update(P)
            .where(P.c.id.in_(candidates.scalar_subquery()), *recheck)
            .values(status="claimed", claimed_by=worker_id, lease_until=t + timedelta(seconds=lease_seconds),
                    claims=P.c.claims + 1, updated_at=t)
            .returning(*P.c)
        )
        with self.write() as conn:  # SQLite: BEGIN IMMEDIATE makes this one UPDATE exclusive
            rows = [dict(r._mapping) for r in conn.execute(stmt)]
        return sorted(rows, key=lambda r: (r["created_at"], r["id"]))

    @staticmethod
    def _round_robin(t, n: int):
        """With tenants: the claimable problems ranked within their scope (oldest first), taken rank by rank
        across scopes, so a scope with 10,000 queued delays another's first problems by at most one round.
        The UPDATE's own WHERE re-checks the status, so two claimers never take the same row."""
        claimable = or_(P.c.status == "pending", and_(P.c.status == "claimed", P.c.lease_until < t))
        rank = func.row_number().over(partition_by=P.c.scope, order_by=(P.c.created_at, P.c.id)).label("rank")
        ranked = select(P.c.id, P.c.created_at, rank).where(claimable).subquery()
        return select(ranked.c.id).order_by(ranked.c.rank, ranked.c.created_at, ranked.c.id).limit(int(n))

    def extend_lease(self, problem_ids: list[str], worker_id: str, lease_seconds: float) -> int:
        """Renew this worker's leases (long jobs); returns how many it still held."""
        t = now()
        stmt = (
            update(P)
            .where(P.c.id.in_(problem_ids), P.c.status == "claimed", P.c.claimed_by == worker_id)
            .values(lease_until=t + timedelta(seconds=lease_seconds), updated_at=t)
        )
        with self.write() as conn:
            return conn.execute(stmt).rowcount

    def mark(self, problem_id: str, status: str, failure: dict[str, Any] | None = None) -> None:
        """Set pending (release), verified or failed (budget exhausted); drops any lease. `failure`: why it
        failed (`learn/failures.py`), kept in `problems.failure` (a status other than failed clears it)."""
        if status not in MARKABLE:
            raise GalahadError(f"cannot mark a problem {status!r}; use one of {', '.join(MARKABLE)}")
        if failure is not None and status != "failed":
            raise GalahadError(f"a failure reason goes with status 'failed', not {status!r}")
        stmt = (
            update(P).where(P.c.id == problem_id)
            .values(status=status, claimed_by=None, lease_until=None, updated_at=now(), failure=failure)
        )
        with self.write() as conn:
            if conn.execute(stmt).rowcount == 0:
                raise GalahadError(f"unknown problem {str(problem_id)[:80]!r}")

    def retry(self, problem_id: str, tries: int, delay_seconds: float) -> bool:
        """A failed problem asked again goes back to the queue, with backoff: not before `delay_seconds` x
        2^(claims - 1) after it failed (`updated_at`), and only while it has been claimed (tried) fewer than
        `tries` times; its failure record stays (the next failure adds to it). True when it was requeued.
        The UPDATE re-checks status and claims, so two callers requeue it once."""
        with self.write() as conn:
            row = conn.execute(select(P.c.claims, P.c.updated_at).where(P.c.id == problem_id,
                                                                         P.c.status == "failed")).first()
            if row is None or row.claims >= tries:
                return False
            t = now()
            if t < row.updated_at + timedelta(seconds=delay_seconds * 2 ** max(0, row.claims - 1)):
                return False
            stmt = (update(P).where(P.c.id == problem_id, P.c.status == "failed", P.c.claims == row.claims)
                    .values(status="pending", updated_at=t))
            return conn.execute(stmt).rowcount == 1

    def release_all(self) -> int:
        """Return every claimed problem to the queue. Only safe when no other job shares the catalog: the
        CLI calls it while holding the data dir's run lock on the embedded default catalog."""
        with self.write() as conn:
            return conn.execute(update(P).where(P.c.status == "claimed")
                                .values(status="pending", claimed_by=None, lease_until=None)).rowcount

    def unfinished_deposits(self) -> list[dict[str, Any]]:
        """Verified problems with no artifact behind any accepted attempt: a kill hit between verdict and deposit."""
        has_artifact = select(ART.c.id).join(V, ART.c.verification_id == V.c.id).join(A, V.c.attempt_id == A.c.id)
        stmt = (select(P).where(P.c.status == "verified", ~has_artifact.where(A.c.problem_id == P.c.id).exists())
                .order_by(P.c.created_at, P.c.id))
        return self.read(stmt)
