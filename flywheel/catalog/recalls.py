"""Recall rows and problem keys (mixed into `Catalog`): which artifact serves a problem's recurrence, and
the canonical key / numbers index that finds a verified problem posed in other words.

A recall artifact is a verified solution deposited alone (a root after BOS), recorded in `recalls` in the
same transaction as its artifact row (`Catalog.deposit(recall=...)`). Keys are derived from the text by
`problems/canonical.py` when a problem is added; `ensure_keys` fills in (or recomputes, on a newer key
version) the keys of problems added before, so lookups never miss a problem for want of its key.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, delete, or_, select

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems import canonical

P, A, V, KEY, REC, ART = (TABLES[t] for t in ("problems", "attempts", "verifications", "problem_keys", "recalls",
                                              "artifacts"))
RECALLED = [P.c.id, P.c.text, P.c.answer, P.c.topic, P.c.template, P.c.source, P.c.gold_source, REC.c.artifact_id,
            REC.c.verification_id, KEY.c.canonical_key, KEY.c.numbers]


def key_row(problem_id: str, text: str) -> dict[str, Any]:
    return {"problem_id": problem_id, "key_version": canonical.KEY_VERSION,
            "canonical_key": canonical.canonical_key(text), "numbers": canonical.numbers(text)[:500]}


class Recalls:
    # -- keys --------------------------------------------------------------------------------------

    def _add_keys(self, conn: Connection, keys: list[dict[str, Any]]) -> None:
        self.insert_ignore(conn, KEY, keys)

    def ensure_keys(self) -> int:
        """Key every problem that has no key of the current version; returns how many were (re)keyed."""
        stale = (select(P.c.id, P.c.text).outerjoin(KEY, KEY.c.problem_id == P.c.id)
                 .where(or_(KEY.c.problem_id.is_(None), KEY.c.key_version != canonical.KEY_VERSION)))
        with self.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(stale)]
        if not rows:
            return 0
        keys = [key_row(r["id"], r["text"]) for r in rows]  # user text is parsed outside any transaction
        with self.write() as conn:
            conn.execute(delete(KEY).where(KEY.c.problem_id.in_([r["id"] for r in rows])))
            self._add_keys(conn, keys)
        return len(rows)

    def problems_by_key(self, keys: list[str]) -> list[dict[str, Any]]:
        """Problems (any status) whose canonical key is one of `keys`: the golds a new one must agree with."""
        if not keys:
            return []
        stmt = (select(P.c.id, P.c.text, P.c.answer, P.c.source, P.c.gold_source, KEY.c.canonical_key)
                .join(KEY, KEY.c.problem_id == P.c.id).where(KEY.c.canonical_key.in_(sorted(set(keys))))
                .order_by(P.c.created_at, P.c.id))
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(stmt)]

    def problem_key(self, problem_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            r = conn.execute(select(KEY).where(KEY.c.problem_id == problem_id)).first()
        return None if r is None else dict(r._mapping)

    # -- recall rows -------------------------------------------------------------------------------

    def _set_recall(self, conn: Connection, problem_id: str, artifact_id: str, verification_id: str) -> None:
        """Only a positive verdict on an attempt at this very problem may name its recall artifact."""
        verdict = conn.execute(select(A.c.problem_id, V.c.verified).join(A, A.c.id == V.c.attempt_id)
                               .where(V.c.id == verification_id)).first()
        if verdict is None or verdict.problem_id != problem_id or not verdict.verified:
            raise GalahadError(f"verification {str(verification_id)[:16]} is not an accepted solution of "
                               f"problem {str(problem_id)[:16]}: refusing it as the recall artifact")
        self.insert_ignore(conn, REC, [dict(problem_id=problem_id, artifact_id=artifact_id,
                                            verification_id=verification_id, created_at=now())])

    def _recalled(self, *where, fingerprints: tuple[str, str] | None = None) -> list[dict[str, Any]]:
        """With `fingerprints` (the engine's model, runtime): only recall artifacts made under them."""
        stmt = (select(*RECALLED).join(REC, REC.c.problem_id == P.c.id)
                .outerjoin(KEY, KEY.c.problem_id == P.c.id)
                .where(P.c.status == "verified", *where).order_by(P.c.created_at, P.c.id))
        if fingerprints is not None:
            stmt = stmt.join(ART, ART.c.id == REC.c.artifact_id).where(
                ART.c.model_fingerprint == fingerprints[0], ART.c.runtime_fingerprint == fingerprints[1])
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(stmt)]

    def recall(self, problem_id: str, fingerprints: tuple[str, str] | None = None) -> dict[str, Any] | None:
        """The verified problem with the artifact that serves its recurrence, or None."""
        rows = self._recalled(P.c.id == problem_id, fingerprints=fingerprints)
        return rows[0] if rows else None

    def recalled_problems(self, fingerprints: tuple[str, str] | None = None) -> list[dict[str, Any]]:
        """Every verified problem with a recall artifact, oldest first (what `eval recurrence` covers)."""
        return self._recalled(fingerprints=fingerprints)

    def recalls_by_key(self, key: str, fingerprints: tuple[str, str] | None = None) -> list[dict[str, Any]]:
        """Verified problems with a recall artifact and this canonical key (the same mathematics)."""
        return self._recalled(and_(KEY.c.canonical_key.is_not(None), KEY.c.canonical_key == key),
                              fingerprints=fingerprints)

    def recalls_by_numbers(self, numbers: str, fingerprints: tuple[str, str] | None = None) -> list[dict[str, Any]]:
        """Verified problems with a recall artifact that mention exactly this multiset of numbers."""
        return self._recalled(KEY.c.numbers == numbers, fingerprints=fingerprints)

    def missing_recalls(self) -> list[dict[str, Any]]:
        """Verified problems whose recall artifact was never deposited (a kill, or a pre-recall catalog)."""
        stmt = (select(P).outerjoin(REC, REC.c.problem_id == P.c.id)
                .where(P.c.status == "verified", REC.c.problem_id.is_(None)).order_by(P.c.created_at, P.c.id))
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(stmt)]
