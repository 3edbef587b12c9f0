"""`Activity`: what learning did over time, for the service's page (`/ui`, `service/dashboard.py`).

Read from rows the catalog keeps anyway (attempts' and verdicts' `created_at`, naive UTC), so every replica
draws the same history, across restarts: `first_attempt`, `verified_by` (problems with a positive verdict by
each time; past the last, `Catalog.stats()["verified"]`), `attempts_between` (per interval) and
`latest_verified` (one row per problem). Each figure over many times is one query (a sum of CASEs per time).
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, select

from galahad.flywheel.catalog.part import Part, rows
from galahad.flywheel.catalog.schema import TABLES

P, A, V = (TABLES[t] for t in ("problems", "attempts", "verifications"))


class Activity(Part):
    def first_attempt(self) -> datetime | None:
        """The oldest attempt's time (naive UTC), or None in a catalog without attempts."""
        return self.scalar(select(func.min(A.c.created_at)))

    def verified_by(self, times: list[datetime]) -> list[int]:
        """Problems with a positive verdict at or before each of `times` (each problem once)."""
        if not times:
            return []
        first = (select(func.min(V.c.created_at).label("at")).join(A, V.c.attempt_id == A.c.id)
                 .where(V.c.verified.is_(True)).group_by(A.c.problem_id).subquery())
        stmt = select(*[func.sum(case((first.c.at <= t, 1), else_=0)) for t in times])
        with self.engine.connect() as conn:
            return [int(v or 0) for v in conn.execute(stmt).one()]

    def attempts_between(self, times: list[datetime]) -> list[int]:
        """Attempts recorded in (times[i-1], times[i]] for each i >= 1 (len(times) - 1 counts)."""
        if len(times) < 2:
            return []
        at = A.c.created_at
        stmt = (select(*[func.sum(case((and_(at > lo, at <= hi), 1), else_=0)) for lo, hi in zip(times, times[1:], strict=False)])
                .where(at > times[0], at <= times[-1]))
        with self.engine.connect() as conn:
            return [int(v or 0) for v in conn.execute(stmt).one()]

    def latest_verified(self, limit: int) -> list[dict[str, Any]]:
        """The newest verified problems, one row each, newest first: problem_id, text, answer, scope,
        verified_at (its newest positive verdict, naive UTC), verifier_version, provenance. Newest verdicts
        are read a page at a time until `limit` problems are found."""
        stmt = (select(P.c.id.label("problem_id"), P.c.text, P.c.answer, P.c.scope,
                       V.c.created_at.label("verified_at"), V.c.verifier_version, A.c.provenance)
                .join(A, V.c.attempt_id == A.c.id).join(P, P.c.id == A.c.problem_id)
                .where(V.c.verified.is_(True)).order_by(V.c.created_at.desc(), V.c.id))
        out: dict[str, dict[str, Any]] = {}
        with self.engine.connect() as conn:
            for offset in itertools.count(0, page := 4 * int(limit)):
                got = rows(conn.execute(stmt.limit(page).offset(offset)))
                for r in got:
                    out.setdefault(r["problem_id"], r)
                if len(out) >= limit or len(got) < page:
                    return list(out.values())[:int(limit)]
