"""`catalog.artifacts`: artifact rows (deposits), their lineage, sizes and the artifact graph.

Invariant: an artifact row is committed only after its blob is durable in the store. The depositor puts the
blob itself; `deposit` never receives bytes: it reads the stored blob back, hash-checked, and records the
row its header determines. So a crash anywhere leaves at most an orphan blob (gc's), never a row without
bytes. Inserts are idempotent (ON CONFLICT DO NOTHING on the content hash): the same artifact bytes
deposited twice, even by racing processes, is one row. A deposit may also append the artifact to a library
(`catalog.libraries`) or record it as a problem's recall artifact (`catalog.recalls`), in its transaction.
Listings leave out `token_ids` (up to tens of KB per row); `get(id)` returns the full row.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import func, select, update

from galahad.flywheel.artifacts.chain import walk
from galahad.flywheel.artifacts.format import read_meta
from galahad.flywheel.artifacts.store import PUT_THREADS, BlobStore, check_id
from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import ART_LIGHT, Part, one, require, rows
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError

P, R, A, V, ART, ENT = (TABLES[t] for t in ("problems", "runs", "attempts", "verifications", "artifacts",
                                             "library_entries"))


def store_location(store: BlobStore) -> str:
    location = getattr(store, "location", None)  # an object store: s3://bucket/prefix/
    if location is not None:
        return str(location)
    root = getattr(store, "root", None)
    return f"file://{root}" if root is not None else type(store).__name__


def _stored_header(store: BlobStore, artifact_id: str):
    """(header, size) of a blob in the store, read back and hash-checked (a missing or corrupted blob, or
    bytes that are no artifact, raise)."""
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
        extra=dict(meta.extra),  # the rest of the header: the row alone rebuilds the blob (migration 0004)
    )


class Artifacts(Part):
    def deposit(
        self, store: BlobStore, artifact_id: str, *, verification_id: str | None = None, library: str | None = None,
        new_chain: bool = False, location: str | None = None, recall: tuple[str, str] | None = None,
    ) -> str:
        """Record the row of an artifact its depositor already put in `store`; returns its id. The row is
        parsed from the blob's own header, read back hash-checked, so a missing or corrupt blob gets no row.
        Idempotent. With `library`, the artifact is appended to that library's current chain (its parent must
        be the tail) or, with `new_chain`, starts the next chain; with `recall=(problem_id, verification_id)`
        it is recorded, in the same transaction, as the artifact that serves that problem's recurrence."""
        meta, size = _stored_header(store, check_id(artifact_id))
        if meta.parent is not None or verification_id is not None:
            with self.engine.connect() as conn:  # refuse early, before taking the write lock
                if meta.parent is not None:
                    require(conn, ART, check_id(meta.parent), "parent artifact")
                if verification_id is not None:
                    require(conn, V, verification_id, "verification")
        row = _artifact_row(artifact_id, meta, size, verification_id, location or store_location(store), now())
        with self.write() as conn:  # the blob is durable and is what its id says: only now may a row point at it
            # whose memory it is: the scope of the problem it answers (or of its library's name)
            row["scope"] = self._catalog.scopes.of_deposit(conn, verification_id or (recall[1] if recall else None),
                                                           library)
            if not self.insert_ignore(conn, ART, [row]) and verification_id is not None:
                conn.execute(update(ART).where(ART.c.id == artifact_id, ART.c.verification_id.is_(None))
                             .values(verification_id=verification_id))
            if library is not None:
                self._catalog.libraries.append(conn, library, artifact_id, new_chain)
            if recall is not None:
                self._catalog.recalls.record(conn, recall[0], artifact_id, recall[1])
        return artifact_id

    def deposit_many(self, store: BlobStore, artifact_ids: list[str], *, library: str | None = None,
                     location: str | None = None) -> list[str]:
        """Bulk `deposit` of artifacts already put in `store` (`BlobStore.put_many`): every blob read back
        hash-checked, then all rows in one transaction. A parent must come earlier in `artifact_ids` or
        already be in the catalog; with `library`, the artifacts are appended in order to its current
        chain."""
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
        found = set(self.column(select(ART.c.id).where(ART.c.id.in_(outside)))) if outside else set()
        if outside - found:
            raise GalahadError(f"unknown parent artifact {sorted(outside - found)[0][:16]} (not in the catalog or "
                               "earlier in the batch)")
        t, where = now(), location or store_location(store)
        new = [_artifact_row(aid, m, size, None, where, t) for aid, (m, size) in zip(ids, headers, strict=True)]
        with self.write() as conn:  # all blobs are durable
            self.insert_ignore(conn, ART, list({r["id"]: r for r in new}.values()))
            if library is not None:
                for aid in ids:
                    self._catalog.libraries.append(conn, library, aid, False)
        return ids

    def get(self, artifact_id: str) -> dict[str, Any]:
        """The full row (token_ids included); an unknown id raises."""
        row = self.read_one(select(ART).where(ART.c.id == check_id(artifact_id)))
        if row is None:
            raise GalahadError(f"unknown artifact {artifact_id}")
        return row

    def has(self, artifact_id: str) -> bool:
        return self.read_one(select(ART.c.id).where(ART.c.id == artifact_id)) is not None

    def listing(self, limit: int | None = 100, library: str | None = None) -> list[dict[str, Any]]:
        """Newest first (or a library's chains in order, with chain_index and position), without token_ids;
        `limit` None: every row."""
        if library is None:
            stmt = select(*ART_LIGHT).order_by(ART.c.created_at.desc(), ART.c.id)
        else:
            stmt = (select(*ART_LIGHT, ENT.c.chain_index, ENT.c.position).join(ENT, ENT.c.artifact_id == ART.c.id)
                    .where(ENT.c.library == library).order_by(ENT.c.chain_index, ENT.c.position))
        if limit is not None:
            stmt = stmt.limit(int(limit))
        return self.read(stmt)

    def count(self, library: str | None = None) -> int:
        """How many rows `listing` has in all (every artifact, or one library's entries)."""
        stmt = (select(func.count()).select_from(ART) if library is None
                else select(func.count()).select_from(ENT).where(ENT.c.library == library))
        return int(self.scalar(stmt) or 0)

    def sizes(self) -> dict[str, int]:
        """Every artifact id with its recorded size (fsck, gc, export)."""
        return {r["id"]: r["size"] for r in self.read(select(ART.c.id, ART.c.size))}

    def graph(self) -> list[dict[str, Any]]:
        """Every artifact's id, parent, token counts, size and fingerprints (no token ids, no bytes)."""
        cols = (ART.c.id, ART.c.parent_id, ART.c.n_tokens, ART.c.token_end, ART.c.size, ART.c.model_fingerprint,
                ART.c.runtime_fingerprint)
        return self.read(select(*cols))

    def lineage(self, artifact_id: str) -> dict[str, Any]:
        """artifact -> verification -> attempt -> problem (and run), its parent chain up to the root, and the
        libraries that hold it. Missing links are None (e.g. an artifact deposited without a verification)."""
        art = self.get(artifact_id)
        art_light = {k: v for k, v in art.items() if k != "token_ids"}
        out: dict[str, Any] = {"artifact": art_light, "verification": None, "attempt": None, "problem": None,
                               "run": None, "parents": [], "libraries": []}
        with self.engine.connect() as conn:
            if art["verification_id"]:
                out["verification"] = one(conn.execute(select(V).where(V.c.id == art["verification_id"])))
                out["attempt"] = one(conn.execute(select(A).where(A.c.id == out["verification"]["attempt_id"])))
                out["problem"] = one(conn.execute(select(P).where(P.c.id == out["attempt"]["problem_id"])))
                if out["attempt"]["run_id"]:
                    out["run"] = one(conn.execute(select(R).where(R.c.id == out["attempt"]["run_id"])))
            if art["parent_id"] is not None:  # the one bounded parent walk: a cycle or an endless chain is refused
                out["parents"] = walk(art["parent_id"], lambda cur: one(conn.execute(
                    select(*ART_LIGHT).where(ART.c.id == cur))), lambda row: row["parent_id"])[::-1]  # nearest first
            out["libraries"] = rows(conn.execute(select(ENT.c.library, ENT.c.chain_index, ENT.c.position)
                                                 .where(ENT.c.artifact_id == art["id"])))
        return out
