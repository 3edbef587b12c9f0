"""`catalog.recalls`: which artifact serves a verified problem's recurrence, and finding it again.

A recall artifact is a verified solution deposited alone (a root after BOS), recorded in `recalls` in the
same transaction as its artifact row; a problem has one per runtime. A recurrence is found by the problem's
id, or through its key row: the canonical key (the same mathematics in other words) or the numbers it
mentions. `matches` asks all of a new text's questions in one statement, so routing a solve is one round
trip whatever the catalog's size.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, String, and_, cast, literal, null, select, union_all

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import Fingerprints, Part, made_under, rows, visible
from galahad.flywheel.catalog.problems import oldest_of_shape
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError

P, A, V, KEY, REC, ART = (TABLES[t] for t in ("problems", "attempts", "verifications", "problem_keys", "recalls",
                                              "artifacts"))
RECALLED = [P.c.id, P.c.text, P.c.answer, P.c.topic, P.c.template, P.c.source, P.c.gold_source, REC.c.artifact_id,
            REC.c.verification_id, KEY.c.canonical_key, KEY.c.numbers, A.c.provenance]
ORDER = ("p_at", "id", "r_at", "artifact_id")  # a recall list's order: oldest problem, then its oldest recall
# How a recall is found, by kind: the problem's id, its canonical key (the same mathematics), its numbers.
BY = {"hash": lambda problem_id: P.c.id.in_(problem_id) if isinstance(problem_id, list) else P.c.id == problem_id,
      "key": lambda key: and_(KEY.c.canonical_key.is_not(None), KEY.c.canonical_key == key),
      "numbers": lambda numbers: KEY.c.numbers == numbers}


def _recalled_stmt(*where, fingerprints: Fingerprints | None = None, scope: str | None = None):
    stmt = (select(*RECALLED, P.c.created_at.label("p_at"), REC.c.created_at.label("r_at"))
            .join(REC, REC.c.problem_id == P.c.id).outerjoin(KEY, KEY.c.problem_id == P.c.id)
            .outerjoin(V, V.c.id == REC.c.verification_id).outerjoin(A, A.c.id == V.c.attempt_id)
            .where(P.c.status == "verified", *where, *visible(P, scope)))
    if fingerprints is not None:
        stmt = stmt.join(ART, ART.c.id == REC.c.artifact_id).where(made_under(fingerprints))
    return stmt


def _first_per_problem(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """In ORDER; one per problem: its first recall (one per runtime since migration 0004)."""
    found = sorted(found, key=lambda r: tuple(r[c] for c in ORDER))
    seen: set[str] = set()
    return [{k: v for k, v in r.items() if k not in ("p_at", "r_at", "match")}
            for r in found if not (r["id"] in seen or seen.add(r["id"]))]


class Recalls(Part):
    def record(self, conn: Connection, problem_id: str, artifact_id: str, verification_id: str) -> None:
        """In `conn`'s write transaction: name the problem's recall artifact. Only a positive verdict on an
        attempt at this very problem may."""
        verdict = conn.execute(select(A.c.problem_id, V.c.verified).join(A, A.c.id == V.c.attempt_id)
                               .where(V.c.id == verification_id)).first()
        if verdict is None or verdict.problem_id != problem_id or not verdict.verified:
            raise GalahadError(f"verification {str(verification_id)[:16]} is not an accepted solution of "
                               f"problem {str(problem_id)[:16]}: refusing it as the recall artifact")
        self.insert_ignore(conn, REC, [dict(problem_id=problem_id, artifact_id=artifact_id,
                                            verification_id=verification_id, created_at=now())])

    scope: str | None = None  # a scoped view's (`catalog.scopes.ScopedCatalog`): its own and shared's rows only

    def _recalled(self, *where, fingerprints: Fingerprints | None = None) -> list[dict[str, Any]]:
        """With `fingerprints` (the engine's model, runtime): only recall artifacts made under them."""
        with self.engine.connect() as conn:
            return _first_per_problem(rows(conn.execute(_recalled_stmt(*where, fingerprints=fingerprints,
                                                                       scope=self.scope))))

    def matches(self, problem_id: str | list[str], key: str | None, numbers: str | None, shape_hash: str | None,
                fingerprints: Fingerprints, scope: str | None = None) -> dict[str, Any]:
        """Everything routing asks of a new text, in one statement: `hash` (`get(problem_id)`), `key`
        (`by_key(key)`), `numbers` (`by_numbers(numbers)`), each a list made under `fingerprints`, and
        `shape`: the template and topic of the oldest problem of `shape_hash` (`problems.classify`), or
        None. A None argument asks nothing of that kind (an empty list, or None). `scope`: only problems
        that scope sees (its own and shared; `problem_id` then a list of its ids: `catalog.scopes`)."""
        asked = {"hash": problem_id, "key": key, "numbers": numbers}
        branches = [_recalled_stmt(BY[kind](value), fingerprints=fingerprints, scope=scope)
                    .add_columns(literal(kind).label("match"))
                    for kind, value in asked.items() if value is not None]
        if shape_hash is not None:  # a recall row's columns, the problem's own filled: only template, topic are read
            cols = [c if c.table is P else cast(null(), String).label(c.name) for c in RECALLED]
            branches.append(select(*cols, P.c.created_at.label("p_at"), cast(null(), P.c.created_at.type).label("r_at"),
                                   literal("shape").label("match")).where(P.c.id == oldest_of_shape(shape_hash, scope)))
        with self.engine.connect() as conn:
            found = rows(conn.execute(union_all(*branches) if len(branches) > 1 else branches[0]))
        out: dict[str, Any] = {kind: _first_per_problem([r for r in found if r["match"] == kind])
                               for kind in ("hash", "key", "numbers")}
        shaped = next((r for r in found if r["match"] == "shape"), None)
        out["shape"] = {"template": shaped["template"], "topic": shaped["topic"]} if shaped else None
        return out

    def elsewhere(self, problem_id: str | list[str], key: str | None, fingerprints: Fingerprints,
                  scope: str | None = None) -> list[dict[str, Any]]:
        """Recall artifacts of this problem (or of its canonical key) made under other fingerprints than
        `fingerprints`: what a catalog moved to another machine holds, unusable until recompiled."""
        match = BY["hash"](problem_id)
        if key is not None:
            match = match | BY["key"](key)
        stmt = (select(ART.c.id, ART.c.model_fingerprint, ART.c.runtime_fingerprint)
                .join(REC, REC.c.artifact_id == ART.c.id).join(P, P.c.id == REC.c.problem_id)
                .outerjoin(KEY, KEY.c.problem_id == P.c.id)
                .where(P.c.status == "verified", match, *visible(P, scope),
                       (ART.c.model_fingerprint != fingerprints[0]) | (ART.c.runtime_fingerprint != fingerprints[1])))
        return self.read(stmt.distinct())

    def get(self, problem_id: str, fingerprints: Fingerprints | None = None) -> dict[str, Any] | None:
        """The verified problem with the artifact that serves its recurrence, or None."""
        found = self._recalled(BY["hash"](problem_id), fingerprints=fingerprints)
        return found[0] if found else None

    def all(self, fingerprints: Fingerprints | None = None) -> list[dict[str, Any]]:
        """Every verified problem with a recall artifact, oldest first (what `eval recurrence` covers)."""
        return self._recalled(fingerprints=fingerprints)

    def by_key(self, key: str, fingerprints: Fingerprints | None = None) -> list[dict[str, Any]]:
        """Verified problems with a recall artifact and this canonical key (the same mathematics)."""
        return self._recalled(BY["key"](key), fingerprints=fingerprints)

    def by_numbers(self, numbers: str, fingerprints: Fingerprints | None = None) -> list[dict[str, Any]]:
        """Verified problems with a recall artifact that mention exactly this multiset of numbers."""
        return self._recalled(BY["numbers"](numbers), fingerprints=fingerprints)

    def missing(self) -> list[dict[str, Any]]:
        """Verified problems whose recall artifact was never deposited (a kill, or a pre-recall catalog)."""
        stmt = (select(P).outerjoin(REC, REC.c.problem_id == P.c.id)
                .where(P.c.status == "verified", REC.c.problem_id.is_(None)).order_by(P.c.created_at, P.c.id))
        return self.read(stmt)
