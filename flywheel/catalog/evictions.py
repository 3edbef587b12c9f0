"""`catalog.evictions` and `evict`: a disk budget for the store, the catalog's rows never touched.

An artifact row keeps all its blob is made from, so the blob can be deleted and rebuilt exactly
(`memory/rebuild.py`). `evict` deletes the least recently grafted blobs (never grafted first, then oldest)
until the rows' blobs fit `to_bytes`, sparing each library's current chain; each row is marked
(`evicted_at`) *before* its blob is deleted, so a kill never leaves an unmarked row without bytes. A rebuild
clears the mark and counts in `rebuilds`; grafts stamp `last_grafted_at` (`touch`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import exists, func, select, update

from galahad.flywheel.artifacts.format import read_meta
from galahad.flywheel.artifacts.store import BlobMissing, BlobStore
from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import Part
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError

ART, ENT = TABLES["artifacts"], TABLES["library_entries"]


class Evictions(Part):
    def touch(self, artifact_ids: list[str]) -> None:
        """Stamp artifacts as grafted now (what eviction orders by)."""
        if artifact_ids:
            with self.write() as conn:
                conn.execute(update(ART).where(ART.c.id.in_(sorted(set(artifact_ids)))).values(last_grafted_at=now()))

    def resident(self) -> list[dict[str, Any]]:
        """(id, size, extra) of every artifact whose blob is not evicted, least recently grafted first."""
        stmt = (select(ART.c.id, ART.c.size, ART.c.extra).where(ART.c.evicted_at.is_(None))
                .order_by(ART.c.last_grafted_at.is_not(None), ART.c.last_grafted_at, ART.c.created_at, ART.c.id))
        return self.read(stmt)

    def protected(self) -> set[str]:
        """The artifacts of each library's current chain (per model and runtime): what the next deposit
        extends, restored by a depositor that reads the store directly. Never evicted."""
        stmt = (select(ENT.c.library, ENT.c.chain_index, ENT.c.artifact_id, ART.c.model_fingerprint,
                       ART.c.runtime_fingerprint).join(ART, ART.c.id == ENT.c.artifact_id))
        with self.engine.connect() as conn:
            entries = list(conn.execute(stmt))
        top: dict[tuple, int] = {}
        for e in entries:
            key = (e.library, e.model_fingerprint, e.runtime_fingerprint)
            top[key] = max(top.get(key, -1), e.chain_index)
        return {e.artifact_id for e in entries
                if e.chain_index == top[(e.library, e.model_fingerprint, e.runtime_fingerprint)]}

    def superseded(self) -> list[dict[str, Any]]:
        """(id, size, extra) of resident artifacts a later recompile has rebuilt under another runtime (a
        younger artifact of the same lineage with another runtime fingerprint): `gc` evicts their blobs,
        keeping the rows (tokens, verdicts, lineage), so they rebuild exactly on their own runtime."""
        t = ART.alias("t")
        twin = exists().where(func.coalesce(t.c.recompiled_from, t.c.id) == func.coalesce(ART.c.recompiled_from, ART.c.id),
                              t.c.runtime_fingerprint != ART.c.runtime_fingerprint,
                              t.c.model_fingerprint == ART.c.model_fingerprint, t.c.created_at > ART.c.created_at)
        stmt = (select(ART.c.id, ART.c.size, ART.c.extra).where(ART.c.evicted_at.is_(None), twin)
                .order_by(ART.c.token_start, ART.c.id))
        return self.read(stmt)

    def mark(self, artifact_id: str, extra: dict[str, Any]) -> None:
        """Before its blob is deleted: the row is evicted, and keeps the header's `extra` to rebuild from."""
        with self.write() as conn:
            conn.execute(update(ART).where(ART.c.id == artifact_id).values(evicted_at=now(), extra=extra))

    def evicted(self, artifact_id: str) -> dict[str, Any] | None:
        """The full row of an evicted artifact (what its rebuild needs), or None if it is not evicted."""
        return self.read_one(select(ART).where(ART.c.id == artifact_id, ART.c.evicted_at.is_not(None)))

    def evicted_ids(self) -> list[str]:
        return self.column(select(ART.c.id).where(ART.c.evicted_at.is_not(None))
                           .order_by(ART.c.token_start, ART.c.id))

    def rebuilt(self, artifact_id: str) -> None:
        """Its blob is durable again: clear the mark and count the rebuild."""
        with self.write() as conn:
            conn.execute(update(ART).where(ART.c.id == artifact_id, ART.c.evicted_at.is_not(None))
                         .values(evicted_at=None, rebuilds=ART.c.rebuilds + 1, last_grafted_at=now()))

    def figures(self) -> dict[str, int]:
        """evicted artifacts, their bytes, resident bytes and rebuilds so far."""
        with self.engine.connect() as conn:
            ev = conn.execute(select(func.count(), func.sum(ART.c.size)).where(ART.c.evicted_at.is_not(None))).one()
            res = conn.execute(select(func.sum(ART.c.size)).where(ART.c.evicted_at.is_(None))).scalar()
            rebuilds = conn.execute(select(func.sum(ART.c.rebuilds))).scalar()
        return {"evicted": int(ev[0] or 0), "evicted_bytes": int(ev[1] or 0), "resident_bytes": int(res or 0),
                "rebuilds": int(rebuilds or 0)}


def evict_one(catalog, store: BlobStore, row: dict[str, Any]) -> bool:
    """Mark `row` (id, size, extra) evicted, then delete its blob; False when it cannot be rebuilt later
    (a dangling row from before extras were recorded: fsck's to report)."""
    try:
        extra = dict(read_meta(store.get(row["id"], row["size"])).extra)  # hash-checked: the source of truth
    except BlobMissing:
        extra = row["extra"]
        if extra is None:
            return False
    catalog.evictions.mark(row["id"], extra)
    store.delete(row["id"])
    return True


def evict(catalog, store: BlobStore, to_bytes: int, dry_run: bool = False, spare_current: bool = True
          ) -> dict[str, Any]:
    """Delete least recently grafted blobs until the catalog's resident blobs total at most `to_bytes`.
    `spare_current=False` also evicts the libraries' current chains: only while no learner deposits (its
    depositor restores a chain from the store directly, and a deposit onto an evicted tail fails)."""
    if not isinstance(to_bytes, int) or to_bytes < 0:
        raise GalahadError("an eviction target must be a non-negative number of bytes")
    if getattr(store, "evict_local", None) is not None:
        return _evict_local(catalog, store, to_bytes, dry_run)
    resident = catalog.evictions.resident()
    keep = catalog.evictions.protected() if spare_current else set()
    total = sum(r["size"] for r in resident)
    out: dict[str, Any] = {"before_bytes": total, "target_bytes": to_bytes, "evicted": [], "freed_bytes": 0,
                           "protected": len(keep), "dry_run": dry_run}
    for r in resident:
        if total <= to_bytes:
            break
        if r["id"] in keep:
            continue
        if not dry_run and not evict_one(catalog, store, r):
            continue
        out["evicted"].append(r["id"])
        out["freed_bytes"] += r["size"]
        total -= r["size"]
    out["after_bytes"] = total
    return out


def _evict_local(catalog, store, to_bytes: int, dry_run: bool) -> dict[str, Any]:
    """A tiered store (`S3Store`: the bucket is the source of truth): only the local copies go, least
    recently grafted first (copies of no row first), until the local cache holds at most `to_bytes`; the
    bucket and the rows are untouched (nothing is marked evicted: a read fetches the object again)."""
    local = {i: store.local_size(i) for i in store.local_ids()}
    order = [r["id"] for r in catalog.evictions.resident() if r["id"] in local]
    order = [i for i in local if i not in set(order)] + order
    total = sum(local.values())
    out: dict[str, Any] = {"before_bytes": total, "target_bytes": to_bytes, "evicted": [], "freed_bytes": 0,
                           "protected": 0, "dry_run": dry_run, "local_only": True}
    for blob_id in order:
        if total <= to_bytes:
            break
        if not dry_run:
            store.evict_local(blob_id)
        out["evicted"].append(blob_id)
        out["freed_bytes"] += local[blob_id]
        total -= local[blob_id]
    out["after_bytes"] = total
    return out
