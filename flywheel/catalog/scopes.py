"""`catalog.scopes`: what one memory scope sees, and promoting a tenant's knowledge into `shared`.

A view is a scope name (its own rows and shared's: `Catalog.visible`) or None (every row). Another scope's
ids are simply not found (404, never 403). Library names carry their scope (`<tenant>/template:<id>`;
shared's are bare), so a tenant's transfer reads its own chains and shared's.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, func, select, update

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.libraries import Libraries
from galahad.flywheel.catalog.part import Part, new_id, one, rows
from galahad.flywheel.catalog.problems import Problems, key_row
from galahad.flywheel.catalog.recalls import Recalls
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.golds import same_gold
from galahad.flywheel.problems.records import problem_hash
from galahad.flywheel.problems.scope_ids import (
    SHARED,
    check_scope,
    library_scope,
    scoped_hash_id,
    scoped_library,
)
from galahad.flywheel.problems.shapes import shape_hash

P, A, V, ART, REC, KEY, SHAPE, PROMO, LIB = (TABLES[t] for t in (
    "problems", "attempts", "verifications", "artifacts", "recalls", "problem_keys", "problem_shapes",
    "promotions", "libraries"))


class ScopedRecalls(Recalls):
    """Recall lookups of one scope: a problem hash asks the scope's own id and shared's; every statement
    reads the scope's problems and shared's only (still one statement each)."""

    def __init__(self, catalog, scope: str):
        super().__init__(catalog)
        self.scope = scope

    def _ids(self, problem_id):
        ids = problem_id if isinstance(problem_id, list) else [problem_id]
        return sorted({scoped_hash_id(i, self.scope) for i in ids} | set(ids))

    def matches(self, problem_id, key, numbers, shape_hash, fingerprints, scope=None):
        return super().matches(self._ids(problem_id), key, numbers, shape_hash, fingerprints, scope=self.scope)

    def elsewhere(self, problem_id, key, fingerprints, scope=None):
        return super().elsewhere(self._ids(problem_id), key, fingerprints, scope=self.scope)

    def get(self, problem_id, fingerprints=None):
        found = self._recalled(P.c.id.in_(self._ids(problem_id)), fingerprints=fingerprints)
        return found[0] if found else None


class ScopedLibraries(Libraries):
    """Library reads of one scope: a name asks the scope's own library (`<scope>/<name>`) first, then shared's."""

    def __init__(self, catalog, scope: str):
        super().__init__(catalog)
        self.scope = scope

    def first_chain(self, names, fingerprints):
        own = [scoped_library(n, self.scope) for n in names if library_scope(n) == SHARED]
        return super().first_chain(own + [n for n in names if library_scope(n) == SHARED], fingerprints)


class ScopedProblems(Problems):
    """`problems` of one scope's routing: `classify` reads the oldest problem of a shape among what the scope
    sees (another tenant's templates and topics never name this one's libraries)."""

    def __init__(self, catalog, scope: str):
        super().__init__(catalog)
        self.scope = scope

    def classify(self, text: str, scope: str | None = None) -> dict[str, Any] | None:
        return super().classify(text, self.scope)


class ScopedCatalog:
    """A catalog as one tenant's routing sees it: `recalls`, `libraries` and `problems.classify` read its
    scope and shared's only; everything else is the catalog's. What `Solver` is given for a tenant's solve."""

    def __init__(self, catalog, scope: str):
        self._base, self.scope = catalog, check_scope(scope)
        self.recalls = ScopedRecalls(catalog, scope)
        self.libraries = ScopedLibraries(catalog, scope)
        self.problems = ScopedProblems(catalog, scope)

    def __getattr__(self, name: str):
        return getattr(self._base, name)


class Scopes(Part):
    def of_deposit(self, conn: Connection, verification_id: str | None, library: str | None) -> str:
        """In a deposit's transaction: the scope of the problem its verification answered, else of its library."""
        if verification_id is not None:
            found = conn.execute(select(P.c.scope).join(A, A.c.problem_id == P.c.id).join(V, V.c.attempt_id == A.c.id)
                                 .where(V.c.id == verification_id)).scalar()
            if found:
                return found
        return library_scope(library) if library else SHARED

    def problem(self, view: str | None, problem_id: str) -> dict[str, Any] | None:
        return self.read_one(select(P).where(P.c.id == problem_id, *self._catalog.visible(P, view)))

    def artifact_visible(self, view: str | None, artifact_id: str) -> bool:
        visible = self._catalog.visible(ART, view)
        return self.read_one(select(ART.c.id).where(ART.c.id == artifact_id, *visible)) is not None

    def find(self, view: str | None, text: str, limit: int) -> list[dict[str, Any]]:
        stmt = (select(P).where(*Problems._matching(text, None, None), *self._catalog.visible(P, view))
                .order_by(P.c.created_at, P.c.id).limit(int(limit)))
        return self.read(stmt)

    def ls(self, scope: str, limit: int = 100) -> list[dict[str, Any]]:
        """The problems of exactly one scope, oldest first."""
        return self.read(select(P.c.id, P.c.text, P.c.status, P.c.topic, P.c.scope)
                         .where(P.c.scope == scope).order_by(P.c.created_at, P.c.id).limit(int(limit)))

    def stats(self, view: str) -> dict[str, Any]:
        """`Catalog.stats`' main figures over what `view` sees (its scope and shared)."""
        vis_p, vis_a = self._catalog.visible(P, view), self._catalog.visible(ART, view)
        with self.engine.connect() as conn:
            by_status = {r.status: int(r.n) for r in conn.execute(
                select(P.c.status, func.count().label("n")).where(*vis_p).group_by(P.c.status))}
            verified = conn.execute(select(func.count(func.distinct(A.c.problem_id))).join(V, V.c.attempt_id == A.c.id)
                                    .join(P, P.c.id == A.c.problem_id).where(V.c.verified.is_(True), *vis_p)).scalar()
            arts = conn.execute(select(func.count(), func.sum(ART.c.n_tokens), func.sum(ART.c.size)).where(*vis_a)).first()
        return {"scope": view, "problems": sum(by_status.values()), "verified": int(verified or 0),
                "artifacts": int(arts[0] or 0), "stored_tokens": int(arts[1] or 0), "bytes": int(arts[2] or 0),
                "by_status": by_status}

    def by_scope(self) -> list[dict[str, Any]]:
        """Per scope: problems, queued (pending or claimed), verified-status problems, artifacts, bytes."""
        out: dict[str, dict[str, Any]] = {}
        with self.engine.connect() as conn:
            for scope, status, n in conn.execute(select(P.c.scope, P.c.status, func.count()).group_by(P.c.scope, P.c.status)):
                d = out.setdefault(scope, {"scope": scope, "problems": 0, "queued": 0, "verified": 0, "artifacts": 0, "bytes": 0})
                d["problems"] += n
                d["queued"] += n if status in ("pending", "claimed") else 0
                d["verified"] += n if status == "verified" else 0
            for scope, n, size in conn.execute(select(ART.c.scope, func.count(), func.sum(ART.c.size)).group_by(ART.c.scope)):
                d = out.setdefault(scope, {"scope": scope, "problems": 0, "queued": 0, "verified": 0, "artifacts": 0, "bytes": 0})
                d["artifacts"], d["bytes"] = int(n), int(size or 0)
        return [out[k] for k in sorted(out)]

    def promote(self, problem_id: str, by: str) -> dict[str, Any]:
        """Move a tenant's verified problem, its attempts, recalls and artifacts into `shared` (its id there:
        its text hash), recording who and when. GalahadError for an unknown, unverified or shared problem,
        or one shared already holds with another gold."""
        with self.write() as conn:
            row = one(conn.execute(select(P).where(P.c.id == problem_id)))
            if row is None:
                raise GalahadError(f"unknown problem {str(problem_id)[:80]!r}")
            if row["scope"] == SHARED:
                raise GalahadError(f"problem {problem_id[:16]} is in shared already")
            if row["status"] != "verified":
                raise GalahadError(f"problem {problem_id[:16]} is {row['status']}: only a verified problem is promoted")
            sid = problem_hash(row["text"])
            there = one(conn.execute(select(P).where(P.c.id == sid)))
            if there is not None and not same_gold(there["answer"], row["answer"]):
                raise GalahadError(f"shared holds problem {sid[:16]} with another gold ({there['answer'][:40]!r})")
            if there is None:
                self.insert_ignore(conn, P, [{**row, "id": sid, "scope": SHARED, "updated_at": now()}])
                self.insert_ignore(conn, KEY, [key_row(sid, row["text"])])
                self.insert_ignore(conn, SHAPE, [dict(problem_id=sid, shape_hash=shape_hash(row["text"]),
                                                      created_at=row["created_at"])])
            elif there["status"] != "verified":
                conn.execute(update(P).where(P.c.id == sid).values(status="verified", claimed_by=None,
                                                                   lease_until=None, updated_at=now()))
            recalls = rows(conn.execute(select(REC).where(REC.c.problem_id == problem_id)))
            arts = set(conn.execute(select(ART.c.id).join(V, V.c.id == ART.c.verification_id)
                                    .join(A, A.c.id == V.c.attempt_id).where(A.c.problem_id == problem_id)).scalars())
            arts |= {r["artifact_id"] for r in recalls}
            conn.execute(update(A).where(A.c.problem_id == problem_id).values(problem_id=sid))
            conn.execute(delete(REC).where(REC.c.problem_id == problem_id))
            self.insert_ignore(conn, REC, [{**r, "problem_id": sid} for r in recalls])
            conn.execute(delete(KEY).where(KEY.c.problem_id == problem_id))
            conn.execute(delete(SHAPE).where(SHAPE.c.problem_id == problem_id))
            conn.execute(delete(P).where(P.c.id == problem_id))
            if arts:
                conn.execute(update(ART).where(ART.c.id.in_(sorted(arts))).values(scope=SHARED))
            rec = dict(id=new_id(), problem_id=sid, from_scope=row["scope"], from_problem_id=problem_id,
                       promoted_by=str(by)[:200], promoted_at=now())
            self.insert_ignore(conn, PROMO, [rec])
        return {**rec, "artifacts": len(arts)}
