"""`catalog.golds` (`Golds`): adding problems whose golds must agree with the catalog's, atomically.

Two golds for the same problem (text hash or canonical key) within a scope must agree (`app.intake`); a
read then an insert in another transaction would race. `add_checked` makes check and insert one
transaction holding a lock on every gold it compares: on SQLite the `BEGIN IMMEDIATE` write transaction
(`db.write_transaction`) serializes writers; on PostgreSQL a transaction-level advisory lock per (scope,
text hash) and per (scope, key), taken in sorted order before the read. Of two conflicting concurrent
submits, one commits and the other gets the conflict error, every time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import Part, rows
from galahad.flywheel.catalog.problems import key_row, new_row
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.problems.records import problem_hash
from galahad.flywheel.problems.scope_ids import SHARED

P, KEY = TABLES["problems"], TABLES["problem_keys"]
GOLD_COLS = (P.c.id, P.c.text, P.c.answer, P.c.source, P.c.gold_source)

# check(by_hash: {problem id: row}, by_key: {canonical key: [rows]}) raises on a conflict
Check = Callable[[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]], None]


class Golds(Part):
    def add_checked(self, items: list[dict[str, Any]], check: Check, scope: str = "shared") -> list[str]:
        """Like `problems.add_many`, but `check` is called inside the write transaction, with every stored
        problem of `scope` (or shared) that has one of the items' ids or canonical keys, after their locks
        are held: whatever it raises rolls the batch back. Returns the ids."""
        t = now()
        new = [new_row(it, t, it["id"], **self._catalog.scoped(scope)) for it in items]
        unique = list({r["id"]: r for r in new}.values())
        keys = [key_row(r["id"], r["text"]) for r in unique]  # user text parsed outside the transaction
        ids = sorted(r["id"] for r in unique)
        # a tenant's text is compared with shared's copy of it too (what the tenant's routing would recall)
        looked = sorted(set(ids) | ({problem_hash(r["text"]) for r in unique} if scope != SHARED else set()))
        canon = sorted({k["canonical_key"] for k in keys if k["canonical_key"]})
        visible = self._catalog.visible(P, scope)
        with self.write() as conn:
            if self._catalog.dialect == "postgresql":
                for name in [f"gold h {scope} {i}" for i in ids] + [f"gold k {scope} {k}" for k in canon]:
                    conn.exec_driver_sql("SELECT pg_advisory_xact_lock(hashtextextended(%(k)s, 0))", {"k": name})
            by_hash: dict[str, dict[str, Any]] = {}
            for i in range(0, len(looked), 500):
                for r in rows(conn.execute(select(*GOLD_COLS).where(P.c.id.in_(looked[i:i + 500]), *visible))):
                    by_hash[r["id"]] = r
            by_key: dict[str, list[dict[str, Any]]] = {}
            for i in range(0, len(canon), 500):
                stmt = (select(*GOLD_COLS, KEY.c.canonical_key).join(KEY, KEY.c.problem_id == P.c.id)
                        .where(KEY.c.canonical_key.in_(canon[i:i + 500]), *visible).order_by(P.c.created_at, P.c.id))
                for r in rows(conn.execute(stmt)):
                    by_key.setdefault(r["canonical_key"], []).append(r)
            check(by_hash, by_key)
            self.insert_ignore(conn, P, new)
            self.insert_ignore(conn, KEY, keys)
            self._catalog.problems._add_shapes(conn, [r["id"] for r in unique])
        return [r["id"] for r in new]
