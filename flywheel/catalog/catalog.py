"""The catalog's public API (writes); read-side queries live in `queries.py`, the work queue in `queue.py`.

`Catalog(url)` opens SQLite or any SQLAlchemy URL and migrates it to head. The catalog is also the durable
work queue: problems are claimed with a lease, so a killed worker's problems become claimable again.

Invariant: an artifact row is committed only after its blob is durable in the store. The depositor puts the
blob itself; `deposit` never receives bytes: it reads the stored blob back, hash-checked, and records the
row its header determines. So a crash anywhere leaves at most an orphan blob (gc's), never a row without
bytes.
Inserts are idempotent (ON CONFLICT DO NOTHING on content-derived keys): the same problem text or the same
artifact bytes deposited twice, even by racing processes, is one row.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, Table, exists, func, insert, select, update
from sqlalchemy import exc as sa_exc

from galahad.flywheel.artifacts.store import PUT_THREADS, BlobStore, check_id
from galahad.flywheel.catalog.db import now, open_engine, redact, write_transaction
from galahad.flywheel.catalog.queries import Queries
from galahad.flywheel.catalog.queue import WorkQueue
from galahad.flywheel.catalog.recalls import KEY, Recalls, key_row
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import ChainConflict, GalahadError
from galahad.flywheel.problems.records import problem_hash  # one definition of "the same problem"

P, R, A, V, ART, LIB, ENT = (
    TABLES[t]
    for t in ("problems", "runs", "attempts", "verifications", "artifacts", "libraries", "library_entries")
)
__all__ = ["Catalog", "PUT_THREADS", "problem_hash", "now", "new_id", "store_location"]


def storable(text: str) -> str:
    """PostgreSQL text cannot hold NUL; a sampled model output can. Replaced, so both backends agree."""
    return text.replace("\x00", "\ufffd")


def new_id() -> str:
    return uuid.uuid4().hex


def store_location(store: BlobStore) -> str:
    root = getattr(store, "root", None)
    return f"file://{root}" if root is not None else type(store).__name__


def _stored_header(store: BlobStore, artifact_id: str):
    """(header, size) of a blob in the store, read back and hash-checked (a missing or corrupted blob, or
    bytes that are no artifact, raise)."""
    from galahad.flywheel.artifacts.format import read_meta  # off the catalog's import path

    data = store.get_checked(artifact_id).buffer
    return read_meta(data), len(data)


def _artifact_row(artifact_id: str, meta, size: int, verification_id: str | None, location: str,
                  created_at) -> dict[str, Any]:
    """An artifact row: every column but the links is its blob's header."""
    return dict(
        id=artifact_id, parent_id=meta.parent, verification_id=verification_id, token_start=meta.start,
        token_end=meta.end, n_tokens=len(meta.token_ids), size=size, model_fingerprint=meta.model_fingerprint,
        runtime_fingerprint=meta.runtime_fingerprint, dtype=meta.dtype, layer_kinds=list(meta.layer_kinds),
        token_ids=list(meta.token_ids), location=location, created_at=created_at,
    )


class Catalog(Queries, WorkQueue, Recalls):
    """One catalog database. Thread-safe (pooled engine); open a new one in each process, never fork one."""

    def __init__(self, url: str, *, migrate: bool = True, create: bool = True):
        """`create=False`: refuse a catalog that does not exist or has no Galahad tables (`db.open_engine`)."""
        self.url = url
        self.engine = open_engine(url, migrate=migrate, create=create)
        self.dialect = self.engine.dialect.name

    def close(self) -> None:
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
            try:
                with conn.begin_nested():
                    conn.execute(insert(table).values(r))
                added += 1
            except sa_exc.IntegrityError:
                pass
        return added

    # -- problems (the work queue itself: `queue.py`) ----------------------------------------------

    def add_problem(
        self, text: str, answer: str, source: str, topic: str, template: str | None = None,
        external_id: str | None = None,
    ) -> str:
        """Idempotent by normalized-text hash; returns the problem id (= that hash)."""
        return self.add_problems([dict(text=text, answer=answer, source=source, topic=topic,
                                       template=template, external_id=external_id)])[0]

    def add_problems(self, items: list[dict[str, Any]]) -> list[str]:
        """Bulk `add_problem` in one transaction: dicts with text, answer, source, topic[, template, external_id]."""
        t = now()
        rows = []
        for it in items:
            if not isinstance(it.get("text"), str) or not it["text"].strip():
                raise GalahadError("a problem needs non-empty text")
            rows.append(dict(
                id=problem_hash(it["text"]), text=it["text"], answer=str(it["answer"]), source=it["source"],
                topic=it["topic"], template=it.get("template"), external_id=it.get("external_id"),
                gold_source=it.get("gold_source"),
                status="pending", claimed_by=None, lease_until=None, claims=0, created_at=t, updated_at=t,
            ))
        keys = [key_row(r["id"], r["text"]) for r in {r["id"]: r for r in rows}.values()]  # parsed outside the transaction
        with self.write() as conn:
            self.insert_ignore(conn, P, rows)
            self.insert_ignore(conn, KEY, keys)
        return [r["id"] for r in rows]

    # -- runs, attempts, verifications ---------------------------------------------------------------

    def start_run(self, config: dict[str, Any]) -> str:
        run_id = new_id()
        with self.write() as conn:
            conn.execute(insert(R).values(id=run_id, config=config, summary=None, started_at=now(),
                                          finished_at=None))
        return run_id

    def finish_run(self, run_id: str, summary: dict[str, Any]) -> None:
        with self.write() as conn:
            if conn.execute(update(R).where(R.c.id == run_id).values(summary=summary, finished_at=now())).rowcount == 0:
                raise GalahadError(f"unknown run {str(run_id)[:80]!r}")

    def add_attempt(
        self, problem_id: str, run_id: str | None, model_fingerprint: str, sampling: dict[str, Any],
        output_text: str, tokens: int, seconds: float, cpu_seconds: float, energy_joules: float | None = None,
    ) -> str:
        attempt_id = new_id()
        with self.write() as conn:
            self._require(conn, P, problem_id, "problem")
            if run_id is not None:
                self._require(conn, R, run_id, "run")
            conn.execute(insert(A).values(
                id=attempt_id, problem_id=problem_id, run_id=run_id, model_fingerprint=model_fingerprint,
                sampling=sampling, output_text=storable(output_text), tokens=int(tokens), seconds=float(seconds),
                cpu_seconds=float(cpu_seconds), energy_joules=None if energy_joules is None else float(energy_joules),
                created_at=now(),
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

    @staticmethod
    def _require(conn: Connection, table: Table, key: str, what: str) -> None:
        pk = next(iter(table.primary_key.columns))
        if not conn.execute(select(exists().where(pk == key))).scalar():
            raise GalahadError(f"unknown {what} {str(key)[:80]!r}")

    # -- artifacts and libraries ----------------------------------------------------------------------

    def deposit(
        self, store: BlobStore, artifact_id: str, *, verification_id: str | None = None, library: str | None = None,
        new_chain: bool = False, location: str | None = None, recall: tuple[str, str] | None = None,
    ) -> str:
        """Record the row of an artifact its depositor already put in `store`; returns its id.

        The catalog never receives or writes the bytes: it reads the blob back, hash-checked, and parses the
        row from the blob's own header, so a missing blob, or one whose bytes do not hash to `artifact_id`,
        gets no row. Idempotent: recording the same artifact again returns its id and adds no row. With
        `library`, the artifact is appended to that library's current chain (its parent must be the chain's
        tail) or, with `new_chain`, starts the next chain. With `recall=(problem_id, verification_id)`, the
        artifact is recorded as the one that serves that problem's recurrence, in the same transaction.
        """
        meta, size = _stored_header(store, check_id(artifact_id))
        if meta.parent is not None or verification_id is not None:
            with self.engine.connect() as conn:  # refuse early, before taking the write lock
                if meta.parent is not None:
                    self._require(conn, ART, check_id(meta.parent), "parent artifact")
                if verification_id is not None:
                    self._require(conn, V, verification_id, "verification")
        row = _artifact_row(artifact_id, meta, size, verification_id, location or store_location(store), now())
        with self.write() as conn:  # the blob is durable and is what its id says: only now may a row point at it
            if not self.insert_ignore(conn, ART, [row]) and verification_id is not None:
                conn.execute(update(ART).where(ART.c.id == artifact_id, ART.c.verification_id.is_(None))
                             .values(verification_id=verification_id))
            if library is not None:
                self._append(conn, library, artifact_id, new_chain)
            if recall is not None:
                self._set_recall(conn, recall[0], artifact_id, recall[1])
        return artifact_id

    def deposit_many(self, store: BlobStore, artifact_ids: list[str], *, library: str | None = None,
                     location: str | None = None) -> list[str]:
        """Bulk `deposit` (bundles, backfills) of artifacts already put in `store` (`BlobStore.put_many`):
        every blob read back hash-checked, then all rows in one transaction.

        A parent must come earlier in `artifact_ids` or already be in the catalog; with `library`, the
        artifacts are appended in order to its current chain.
        """
        ids = [check_id(a) for a in artifact_ids]
        # Read back in parallel: on a shared filesystem each read waits on the network.
        with ThreadPoolExecutor(max_workers=max(1, min(PUT_THREADS, len(ids)))) as pool:
            headers = list(pool.map(lambda aid: _stored_header(store, aid), ids))
        earlier: set[str] = set()
        outside = set()
        for aid, (meta, _size) in zip(ids, headers, strict=True):
            if meta.parent is not None and meta.parent not in earlier:
                outside.add(check_id(meta.parent))
            earlier.add(aid)
        with self.engine.connect() as conn:
            found = set(conn.execute(select(ART.c.id).where(ART.c.id.in_(outside))).scalars()) if outside else set()
        if outside - found:
            raise GalahadError(f"unknown parent artifact {sorted(outside - found)[0][:16]} (not in the catalog or "
                               "earlier in the batch)")
        t, where = now(), location or store_location(store)
        rows = [_artifact_row(aid, m, size, None, where, t) for aid, (m, size) in zip(ids, headers, strict=True)]
        with self.write() as conn:  # all blobs are durable
            self.insert_ignore(conn, ART, list({r["id"]: r for r in rows}.values()))
            if library is not None:
                for aid in ids:
                    self._append(conn, library, aid, False)
        return ids

    def ensure_library(self, name: str, topic: str | None = None, template: str | None = None) -> str:
        with self.write() as conn:
            self._ensure_library(conn, name, topic, template)
        return name

    def _ensure_library(self, conn: Connection, name: str, topic: str | None, template: str | None) -> None:
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise GalahadError("a library name must be 1 to 200 characters")
        self.insert_ignore(conn, LIB, [dict(name=name, topic=topic, template=template, created_at=now())])

    def append_to_library(self, name: str, artifact_id: str, *, new_chain: bool = False) -> tuple[int, int]:
        """Append to the library's current chain (or start a new one); returns (chain_index, position)."""
        with self.write() as conn:
            return self._append(conn, name, check_id(artifact_id), new_chain)

    def _append(self, conn: Connection, name: str, artifact_id: str, new_chain: bool) -> tuple[int, int]:
        self._ensure_library(conn, name, None, None)
        # Serialize appends per library (PostgreSQL row lock; SQLite already holds the write lock).
        conn.execute(select(LIB.c.name).where(LIB.c.name == name).with_for_update())
        parent = conn.execute(select(ART.c.parent_id, ART.c.model_fingerprint, ART.c.runtime_fingerprint)
                              .where(ART.c.id == artifact_id)).first()
        if parent is None:
            raise GalahadError(f"unknown artifact {artifact_id[:16]}")
        here = conn.execute(select(ENT.c.chain_index, ENT.c.position)
                            .where(ENT.c.library == name, ENT.c.artifact_id == artifact_id)).first()
        if here is not None:
            return (here.chain_index, here.position)  # idempotent
        # Each model/runtime sees its own chains of a library: another fingerprint's chains (an imported
        # bundle's) never become the tail a deposit must extend.
        last = conn.execute(select(ENT.c.chain_index, ENT.c.position, ENT.c.artifact_id)
                            .join(ART, ART.c.id == ENT.c.artifact_id)
                            .where(ENT.c.library == name, ART.c.model_fingerprint == parent.model_fingerprint,
                                   ART.c.runtime_fingerprint == parent.runtime_fingerprint)
                            .order_by(ENT.c.chain_index.desc(), ENT.c.position.desc()).limit(1)).first()
        top = conn.execute(select(func.max(ENT.c.chain_index)).where(ENT.c.library == name)).scalar()
        if last is None:
            chain, pos = (0 if top is None else top + 1), 0
        elif new_chain:
            chain, pos = top + 1, 0
        elif parent.parent_id != last.artifact_id:
            # A chain is graftable only if each artifact extends the previous one's KV.
            raise ChainConflict(
                f"artifact {artifact_id[:16]} does not extend library {name!r}: its parent is "
                f"{(parent.parent_id or 'none')[:16]}, the tail is {last.artifact_id[:16]}"
            )
        else:
            chain, pos = last.chain_index, last.position + 1
        conn.execute(insert(ENT).values(library=name, chain_index=chain, position=pos,
                                        artifact_id=artifact_id, added_at=now()))
        return (chain, pos)
