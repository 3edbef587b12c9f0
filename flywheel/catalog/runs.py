"""`catalog.runs`: runs, the attempts made at problems and their verdicts (verifications).

An attempt is one sampled output for a problem (in a run, or outside any); a verification is a verdict on
an attempt. A positive verdict also marks its problem verified, in the same transaction, so a verified
problem always has the accepted attempt behind it. `verified_solution` picks the best accepted attempt;
`events` is the timeline of first verdicts and deposits the transfer eval plots.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, insert, select, update

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import Fingerprints, Part, made_under, new_id, require, rows, storable
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError

P, R, A, V, ART = (TABLES[t] for t in ("problems", "runs", "attempts", "verifications", "artifacts"))


class Runs(Part):
    def start(self, config: dict[str, Any]) -> str:
        run_id = new_id()
        with self.write() as conn:
            conn.execute(insert(R).values(id=run_id, config=config, summary=None, started_at=now(),
                                          finished_at=None))
        return run_id

    def finish(self, run_id: str, summary: dict[str, Any]) -> None:
        with self.write() as conn:
            if conn.execute(update(R).where(R.c.id == run_id).values(summary=summary, finished_at=now())).rowcount == 0:
                raise GalahadError(f"unknown run {str(run_id)[:80]!r}")

    def get(self, run_id: str) -> dict[str, Any]:
        row = self.read_one(select(R).where(R.c.id == run_id))
        if row is None:
            raise GalahadError(f"unknown run {str(run_id)[:80]!r}")
        return row

    def recent(self, limit: int | None = 50) -> list[dict[str, Any]]:
        """The newest runs first (`limit` None: every run)."""
        stmt = select(R).order_by(R.c.started_at.desc())
        if limit is not None:
            stmt = stmt.limit(int(limit))
        return self.read(stmt)

    def count(self) -> int:
        """How many runs the catalog has recorded."""
        return int(self.scalar(select(func.count()).select_from(R)) or 0)

    def add_attempt(
        self, problem_id: str, run_id: str | None, model_fingerprint: str, sampling: dict[str, Any],
        output_text: str, tokens: int, seconds: float, cpu_seconds: float, energy_joules: float | None = None,
        provenance: str = "sampled",
    ) -> str:
        attempt_id = new_id()
        with self.write() as conn:
            require(conn, P, problem_id, "problem")
            if run_id is not None:
                require(conn, R, run_id, "run")
            conn.execute(insert(A).values(
                id=attempt_id, problem_id=problem_id, run_id=run_id, model_fingerprint=model_fingerprint,
                sampling=sampling, output_text=storable(output_text), tokens=int(tokens), seconds=float(seconds),
                cpu_seconds=float(cpu_seconds), energy_joules=None if energy_joules is None else float(energy_joules),
                created_at=now(), provenance=provenance,
            ))
        return attempt_id

    def add_verification(self, attempt_id: str, verifier_version: str, verified: bool, reason: str) -> str:
        """Record a verdict; a positive one also marks the problem verified, in the same transaction."""
        verification_id = new_id()
        with self.write() as conn:
            problem_id = conn.execute(select(A.c.problem_id).where(A.c.id == attempt_id)).scalar()
            if problem_id is None:
                raise GalahadError(f"unknown attempt {str(attempt_id)[:80]!r}")
            conn.execute(insert(V).values(id=verification_id, attempt_id=attempt_id,
                                          verifier_version=verifier_version, verified=bool(verified),
                                          reason=storable(reason), created_at=now()))
            if verified:
                conn.execute(update(P).where(P.c.id == problem_id).values(
                    status="verified", claimed_by=None, lease_until=None, updated_at=now()))
        return verification_id

    def attempts(self, problem_id: str) -> list[dict[str, Any]]:
        """Attempts on a problem, each with its verdicts (`verifications`, newest last)."""
        with self.engine.connect() as conn:
            attempts = rows(conn.execute(select(A).where(A.c.problem_id == problem_id)
                                         .order_by(A.c.created_at, A.c.id)))
            for a in attempts:
                a["verifications"] = rows(conn.execute(select(V).where(V.c.attempt_id == a["id"])
                                                       .order_by(V.c.created_at, V.c.id)))
        return attempts

    def verified_solution(self, problem_id: str, fingerprints: Fingerprints | None = None) -> dict[str, Any] | None:
        """The best verified attempt: one with a deposited artifact first, then fewest tokens, then oldest.
        The attempt's columns plus verification_id, verifier_version and artifact_id (or None). With
        `fingerprints` (model, runtime), only an artifact made under them counts as deposited."""
        on = ART.c.verification_id == V.c.id
        if fingerprints is not None:
            on = and_(on, made_under(fingerprints))
        stmt = (
            select(A, V.c.id.label("verification_id"), V.c.verifier_version, ART.c.id.label("artifact_id"))
            .join(V, V.c.attempt_id == A.c.id)
            .outerjoin(ART, on)
            .where(A.c.problem_id == problem_id, V.c.verified.is_(True))
            .order_by(ART.c.id.is_(None), A.c.tokens, A.c.created_at, A.c.id)
            .limit(1)
        )
        return self.read_one(stmt)

    def events(self) -> list[tuple[float, str]]:
        """(unix time, "verified" | "deposited"): each problem once, when first verified; each artifact."""
        first_verified = (select(func.min(V.c.created_at)).join(A, V.c.attempt_id == A.c.id)
                          .where(V.c.verified.is_(True)).group_by(A.c.problem_id))
        with self.engine.connect() as conn:
            verified = [r[0] for r in conn.execute(first_verified)]
            deposited = [r[0] for r in conn.execute(select(ART.c.created_at))]
        return [(t.timestamp(), "verified") for t in verified] + [(t.timestamp(), "deposited") for t in deposited]
