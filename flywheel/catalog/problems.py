"""`catalog.problems`: the problem rows and their keys.

A problem is deduplicated by normalized text (its id is `problems.records.problem_hash`). Its key row
(`problem_keys`: canonical key and numbers) and shape row (`problem_shapes`: the text's hash with numbers
masked) are written with it; `ensure_keys` and `ensure_shapes` fill in those of rows written without one
(or, for keys, under an older key version). The status and lease columns are the work queue's
(`catalog.queue`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, delete, func, or_, select

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import PREFIX, Part, id_prefix, one, rows
from galahad.flywheel.catalog.schema import PROBLEM_STATUSES, TABLES
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems import canonical
from galahad.flywheel.problems.records import problem_hash  # one definition of "the same problem"
from galahad.flywheel.problems.scope_ids import SHARED
from galahad.flywheel.problems.shapes import shape_hash

P, KEY, SHAPE = TABLES["problems"], TABLES["problem_keys"], TABLES["problem_shapes"]


def oldest_of_shape(shape_hash, scope: str | None = None):
    """The id of the oldest problem of a shape (a value or a bind parameter): one seek on its index,
    `ix_problem_shapes_shape_hash` (what `classify` and `recalls.matches` ask). `scope`: only among the
    problems that scope sees (its own and shared's: a tenant's view; None: every problem)."""
    stmt = select(SHAPE.c.problem_id).where(SHAPE.c.shape_hash == shape_hash)
    if scope is not None:
        seen = [SHARED] if scope == SHARED else [scope, SHARED]
        stmt = stmt.join(P, P.c.id == SHAPE.c.problem_id).where(P.c.scope.in_(seen))
    return stmt.order_by(SHAPE.c.created_at, SHAPE.c.problem_id).limit(1).scalar_subquery()


CLASSIFY = select(P.c.template, P.c.topic).where(P.c.id == oldest_of_shape(bindparam("shape_hash")))  # built once


def key_row(problem_id: str, text: str) -> dict[str, Any]:
    return {"problem_id": problem_id, "key_version": canonical.KEY_VERSION,
            "canonical_key": canonical.canonical_key(text), "numbers": canonical.numbers(text)[:500]}



def new_row(it: dict[str, Any], t, pid: str | None = None, **extra: Any) -> dict[str, Any]:
    """A pending problem row for item `it` (text, answer, source, topic[, template, external_id, gold_source]),
    its id `pid` or else the hash of its normalized text; `extra`: more columns (its scope)."""
    if not isinstance(it.get("text"), str) or not it["text"].strip():
        raise GalahadError("a problem needs non-empty text")
    return dict(id=pid or problem_hash(it["text"]), text=it["text"], answer=str(it["answer"]), source=it["source"],
                topic=it["topic"], template=it.get("template"), external_id=it.get("external_id"),
                gold_source=it.get("gold_source"), status="pending", claimed_by=None, lease_until=None, claims=0,
                created_at=t, updated_at=t, **extra)

class Problems(Part):
    def add(
        self, text: str, answer: str, source: str, topic: str, template: str | None = None,
        external_id: str | None = None,
    ) -> str:
        """Idempotent by normalized-text hash; returns the problem id (= that hash)."""
        return self.add_many([dict(text=text, answer=answer, source=source, topic=topic,
                                   template=template, external_id=external_id)])[0]

    def add_many(self, items: list[dict[str, Any]]) -> list[str]:
        """Bulk `add` in one transaction: dicts with text, answer, source, topic[, template, external_id]."""
        t = now()
        new = [new_row(it, t) for it in items]
        unique = {r["id"]: r for r in new}.values()
        keys = [key_row(r["id"], r["text"]) for r in unique]  # parsed outside the transaction
        with self.write() as conn:
            self.insert_ignore(conn, P, new)
            self.insert_ignore(conn, KEY, keys)
            # the stored row's created_at (an existing problem keeps its own), so the oldest of a shape wins
            self._add_shapes(conn, [r["id"] for r in unique])
        return [r["id"] for r in new]

    def _add_shapes(self, conn, ids: list[str]) -> int:
        """In `conn`'s write transaction: the shape rows of those problems that have none."""
        n = 0
        for i in range(0, len(ids), 500):
            stmt = (select(P.c.id, P.c.text, P.c.created_at).outerjoin(SHAPE, SHAPE.c.problem_id == P.c.id)
                    .where(P.c.id.in_(ids[i:i + 500]), SHAPE.c.problem_id.is_(None)))
            found = rows(conn.execute(stmt))
            n += self.insert_ignore(conn, SHAPE, [dict(problem_id=r["id"], shape_hash=shape_hash(r["text"]),
                                                       created_at=r["created_at"]) for r in found]) or 0
        return n

    def ensure_shapes(self) -> int:
        """Shape every problem that has no shape row (rows written before migration 0005, or by an import);
        returns how many. One anti-join; callers (`Solver`) run it once per process."""
        stale = select(P.c.id).outerjoin(SHAPE, SHAPE.c.problem_id == P.c.id).where(SHAPE.c.problem_id.is_(None))
        ids = self.column(stale)
        if not ids:
            return 0
        with self.write() as conn:
            self._add_shapes(conn, ids)
        return len(ids)

    def ensure_keys(self) -> int:
        """Key every problem that has no key of the current version; returns how many were (re)keyed."""
        stale = (select(P.c.id, P.c.text).outerjoin(KEY, KEY.c.problem_id == P.c.id)
                 .where(or_(KEY.c.problem_id.is_(None), KEY.c.key_version != canonical.KEY_VERSION)))
        found = self.read(stale)
        if not found:
            return 0
        keys = [key_row(r["id"], r["text"]) for r in found]  # user text is parsed outside any transaction
        with self.write() as conn:
            conn.execute(delete(KEY).where(KEY.c.problem_id.in_([r["id"] for r in found])))
            self.insert_ignore(conn, KEY, keys)
        return len(found)

    def by_hash(self, h: str) -> dict[str, Any] | None:
        return self.read_one(select(P).where(P.c.id == h))

    def get(self, problem_id: str) -> dict[str, Any]:
        """Like `by_hash`, but an unknown id raises."""
        row = self.by_hash(problem_id)
        if row is None:
            raise GalahadError(f"unknown problem {str(problem_id)[:80]!r}")
        return row

    def by_ids(self, ids: list[str]) -> list[dict[str, Any]]:
        """The rows of those problem ids that exist here (bundle import checks conflicts with them)."""
        out: list[dict[str, Any]] = []
        with self.engine.connect() as conn:
            for i in range(0, len(ids), 500):
                out += rows(conn.execute(select(P).where(P.c.id.in_(ids[i:i + 500]))))
        return out

    def find(
        self, text: str | None = None, hash: str | None = None, topic: str | None = None, limit: int | None = 100,
        status: str | None = None,
    ) -> list[dict[str, Any]]:
        """Problems matching all given filters: text (same normalized hash, or substring), hash (or a
        prefix of at least 8 hex chars), topic (topic or template name), status (the queue's: pending,
        claimed, verified, failed); `limit` None: every match."""
        stmt = select(P).where(*self._matching(text, hash, topic, status)).order_by(P.c.created_at, P.c.id)
        if limit is not None:
            stmt = stmt.limit(int(limit))
        return self.read(stmt)

    def count(self, text: str | None = None, hash: str | None = None, topic: str | None = None,
              status: str | None = None) -> int:
        """How many problems `find` with these filters has in all."""
        stmt = select(func.count()).select_from(P).where(*self._matching(text, hash, topic, status))
        return int(self.scalar(stmt) or 0)

    @staticmethod
    def _matching(text: str | None, hash: str | None, topic: str | None, status: str | None = None) -> list:
        conds = []
        if text is not None:
            conds.append(or_(P.c.id == problem_hash(text),
                             func.lower(P.c.text).contains(text.lower(), autoescape=True)))
        if hash is not None:
            if not PREFIX.match(hash):
                raise GalahadError(f"not a problem hash or prefix (8-64 lowercase hex chars): {hash[:80]!r}")
            conds.append(id_prefix(P.c.id, hash))
        if topic is not None:
            conds.append(or_(P.c.topic == topic, P.c.template == topic))
        if status is not None:
            if status not in PROBLEM_STATUSES:
                raise GalahadError(f"unknown status {status[:40]!r}; known: {', '.join(PROBLEM_STATUSES)}")
            conds.append(P.c.status == status)
        return conds

    def classify(self, text: str, scope: str | None = None) -> dict[str, Any] | None:
        """The template and topic of the oldest catalog problem with `text`'s shape (numbers masked), or
        None: one seek on the shape index, whatever the catalog's size. `scope`: among what it sees only."""
        with self.engine.connect() as conn:
            if scope is not None:
                return one(conn.execute(select(P.c.template, P.c.topic)
                                        .where(P.c.id == oldest_of_shape(shape_hash(text), scope))))
            return one(conn.execute(CLASSIFY, {"shape_hash": shape_hash(text)}))

    def groups(self) -> list[dict[str, Any]]:
        """One example text per (template, topic) among the catalog's problems: a scan of every group (for
        listings; classifying uses `classify`)."""
        stmt = select(P.c.template, P.c.topic, func.min(P.c.text).label("text")).group_by(P.c.template, P.c.topic)
        return self.read(stmt)

    def by_keys(self, keys: list[str]) -> list[dict[str, Any]]:
        """Problems (any status) whose canonical key is one of `keys`: the golds a new one must agree with."""
        if not keys:
            return []
        stmt = (select(P.c.id, P.c.text, P.c.answer, P.c.source, P.c.gold_source, KEY.c.canonical_key)
                .join(KEY, KEY.c.problem_id == P.c.id).where(KEY.c.canonical_key.in_(sorted(set(keys))))
                .order_by(P.c.created_at, P.c.id))
        return self.read(stmt)

    def key(self, problem_id: str) -> dict[str, Any] | None:
        """The problem's key row (key_version, canonical_key, numbers), or None."""
        return self.read_one(select(KEY).where(KEY.c.problem_id == problem_id))
