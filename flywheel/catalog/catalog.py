"""`Catalog`: one catalog database, its engine and write transactions, and its parts.

`Catalog(url)` opens SQLite or any SQLAlchemy URL and migrates it to head. Each concept has one owner, a
part sharing the catalog's engine:

- `catalog.problems`  problem rows and their keys (`problems.py`)
- `catalog.runs`      runs, attempts and verdicts (`runs.py`)
- `catalog.artifacts` artifact rows (deposits), lineage, sizes (`artifacts.py`)
- `catalog.libraries` named chains of artifacts (`libraries.py`)
- `catalog.queue`     the durable work queue: claims, leases, unfinished deposits (`queue.py`)
- `catalog.recalls`   which artifact serves a problem's recurrence (`recalls.py`)
- `catalog.recall_answers` a recall's decode, stored where it was first computed (`recall_answers.py`)
- `catalog.runtimes`  the readable facts behind runtime fingerprints (`runtimes.py`)
- `catalog.recompiles` artifacts another runtime made and their rebuilt twins (`recompiles.py`)
- `catalog.evictions` blobs deleted to fit a store budget, and their rebuilds (`evictions.py`)
- `catalog.golds`     problems added with their golds checked atomically (`admission.py`)
- `catalog.tenants`   the service's tenants: hashed tokens, quotas, usage per scope (`tenants.py`)
- `catalog.scopes`    what one memory scope sees; promotion into shared (`scopes.py`)
- `catalog.gates`     where the transfer and similar routes may answer, with the eval evidence (`gates.py`)
- `catalog.activity`  verified problems and attempts over time, the latest verified problems (`activity.py`: `/ui`)

The catalog itself keeps what spans them: `write()`, `insert_ignore`, `resolve` (an id prefix of either
kind) and `stats`. Inserts are idempotent (ON CONFLICT DO NOTHING on content-derived keys): the same
problem text or the same artifact bytes deposited twice, even by racing processes, is one row.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, suppress
from typing import Any

from sqlalchemy import Connection, Table, func, insert, select
from sqlalchemy import exc as sa_exc

from galahad.flywheel.artifacts.store import PUT_THREADS
from galahad.flywheel.catalog.activity import Activity
from galahad.flywheel.catalog.admission import Golds
from galahad.flywheel.catalog.artifacts import Artifacts, store_location
from galahad.flywheel.catalog.db import now, open_engine, reader_engine, redact, write_transaction
from galahad.flywheel.catalog.evictions import Evictions
from galahad.flywheel.catalog.gates import Gates
from galahad.flywheel.catalog.libraries import Libraries
from galahad.flywheel.catalog.part import PREFIX, id_prefix, new_id, visible
from galahad.flywheel.catalog.problems import Problems
from galahad.flywheel.catalog.queue import Queue
from galahad.flywheel.catalog.recall_answers import RecallAnswers
from galahad.flywheel.catalog.recalls import Recalls
from galahad.flywheel.catalog.recompiles import Recompiles
from galahad.flywheel.catalog.runs import Runs
from galahad.flywheel.catalog.runtimes import Runtimes
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.catalog.scopes import Scopes
from galahad.flywheel.catalog.tenants import Tenants
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.records import problem_hash  # one definition of "the same problem"
from galahad.flywheel.problems.scope_ids import check_scope

P, R, A, V, ART = (TABLES[t] for t in ("problems", "runs", "attempts", "verifications", "artifacts"))
__all__ = ["Catalog", "PUT_THREADS", "problem_hash", "now", "new_id", "store_location"]


class Catalog:
    """One catalog database. Thread-safe (pooled engine); open a new one in each process, never fork one."""

    def __init__(self, url: str, *, migrate: bool = True, create: bool = True):
        """`create=False`: refuse a catalog that does not exist or has no Galahad tables (`db.open_engine`)."""
        self.url = url
        self.engine = open_engine(url, migrate=migrate, create=create)  # transactions: every write
        self.reader = reader_engine(self.engine, url)  # single-statement reads (`catalog.<part>` lookups)
        self.dialect = self.engine.dialect.name
        self.problems = Problems(self)
        self.runs = Runs(self)
        self.artifacts = Artifacts(self)
        self.libraries = Libraries(self)
        self.queue = Queue(self)
        self.recalls = Recalls(self)
        self.recall_answers = RecallAnswers(self)
        self.runtimes = Runtimes(self)
        self.recompiles = Recompiles(self)
        self.evictions = Evictions(self)
        self.golds = Golds(self)
        self.tenants = Tenants(self)
        self.scopes = Scopes(self)
        self.gates = Gates(self)
        self.activity = Activity(self)

    def close(self) -> None:
        if self.reader is not self.engine:
            self.reader.dispose()
        self.engine.dispose()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Catalog({redact(self.url)!r})"

    def write(self) -> AbstractContextManager[Connection]:
        """A transaction that will write: use it (not `engine.begin()`) for raw SQL writes, so SQLite takes
        the write lock up front and waits for it instead of failing with 'database is locked'."""
        return write_transaction(self.engine)

    @staticmethod
    def scoped(scope: str) -> dict[str, str]:
        """The scope column's value for a new row of `scope` (checked)."""
        return {"scope": check_scope(scope)}

    visible = staticmethod(visible)

    def insert_ignore(self, conn: Connection, table: Table, rows: list[dict[str, Any]]) -> int:
        """Insert, skipping rows whose primary key exists; returns how many were new. Race-safe."""
        if not rows:
            return 0
        keys = [c.name for c in table.primary_key.columns]
        if self.dialect in ("sqlite", "postgresql"):
            if self.dialect == "sqlite":
                from sqlalchemy.dialects.sqlite import insert as dialect_insert
            else:
                from sqlalchemy.dialects.postgresql import insert as dialect_insert
            # Built once per call but with parameters passed separately, so SQLAlchemy's compiled cache hits.
            stmt = dialect_insert(table).on_conflict_do_nothing(index_elements=keys)
            if len(rows) == 1:  # RETURNING, because drivers need not report an INSERT's rowcount
                return len(conn.execute(stmt.returning(*table.primary_key.columns), rows[0]).all())
            return conn.execution_options(preserve_rowcount=True).execute(stmt, rows).rowcount
        added = 0  # other backends: a savepoint per row so one duplicate does not abort the transaction
        for r in rows:
            with suppress(sa_exc.IntegrityError):
                with conn.begin_nested():
                    conn.execute(insert(table).values(r))
                added += 1
        return added

    def resolve(self, ref: str) -> tuple[str, str]:
        """('artifact' | 'problem', full id) for a full id or a unique prefix of at least 8 hex chars."""
        if not isinstance(ref, str) or not PREFIX.match(ref):
            raise GalahadError(f"not an id or id prefix (8-64 lowercase hex chars): {str(ref)[:80]!r}")
        with self.engine.connect() as conn:
            hits = [("artifact", r.id) for r in conn.execute(select(ART.c.id).where(id_prefix(ART.c.id, ref)).limit(2))]
            hits += [("problem", r.id) for r in conn.execute(select(P.c.id).where(id_prefix(P.c.id, ref)).limit(2))]
        if not hits:
            raise GalahadError(f"unknown id {ref}")
        if len(hits) > 1:
            raise GalahadError(f"ambiguous id prefix {ref}: matches {len(hits)}+ rows; give more characters")
        return hits[0]

    def stats(self) -> dict[str, Any]:
        """problems, verified (problems with an accepted attempt), gold_solutions (of them, by their gold), artifacts, stored_tokens, bytes, and more."""
        with self.engine.connect() as conn:
            def scalar(stmt) -> int:
                return int(conn.execute(stmt).scalar() or 0)

            by_status = {r.status: int(r.n) for r in conn.execute(
                select(P.c.status, func.count().label("n")).group_by(P.c.status))}
            return {
                "problems": sum(by_status.values()),
                "verified": scalar(select(func.count(func.distinct(A.c.problem_id)))
                                   .join(V, V.c.attempt_id == A.c.id).where(V.c.verified.is_(True))),
                # verified problems whose solution is their gold (`learn/gold_solutions.py`): no sample verified
                "gold_solutions": scalar(select(func.count(func.distinct(A.c.problem_id)))
                                         .join(V, V.c.attempt_id == A.c.id)
                                         .where(V.c.verified.is_(True), A.c.provenance == "gold")),
                "artifacts": scalar(select(func.count()).select_from(ART)),
                "stored_tokens": scalar(select(func.sum(ART.c.n_tokens))),
                "bytes": scalar(select(func.sum(ART.c.size))),
                "by_status": by_status,
                "attempts": scalar(select(func.count()).select_from(A)),
                "verifications": scalar(select(func.count()).select_from(V)),
                "libraries": scalar(select(func.count()).select_from(TABLES["libraries"])),
                "runs": scalar(select(func.count()).select_from(R)),
                **self.evictions.figures(),  # evicted, evicted_bytes, resident_bytes, rebuilds
            }
