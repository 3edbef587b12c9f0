"""Catalog/store consistency: `fsck` (re-hash everything, report) and `gc` (collect orphans safely).

fsck findings, worst first: dangling rows (blob missing: must never happen), corrupted blobs, mismatched
rows (row disagrees with its blob's header), orphan blobs (a crash between `put` and commit; collectable)
and temp files (a killed writer; collectable). gc deletes only orphans and temp files older than a grace
period (a live depositor's blob is an orphan until its commit); without `--force` never more than
`max_fraction` of the blobs, nor any when the catalog has no artifacts. A blob whose row appears while gc
deletes it is put back.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.exc import SQLAlchemyError

from galahad.flywheel.artifacts.format import read_meta, verify_tensors
from galahad.flywheel.artifacts.store import BlobMissing, BlobStore, sha256_hex
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.db import redact
from galahad.flywheel.catalog.evictions import evict_one
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.config import GcConfig
from galahad.flywheel.errors import GalahadError

ART = TABLES["artifacts"]
DEFAULT_GRACE_SECONDS = GcConfig.grace_seconds


@dataclass
class FsckReport:
    rows: int = 0
    blobs: int = 0
    dangling: list[str] = field(default_factory=list)
    corrupted: list[str] = field(default_factory=list)
    mismatched: list[dict[str, str]] = field(default_factory=list)
    # Entries that cannot be read as a blob: permission denied, a symlink, a FIFO or device, a wrong size.
    unreadable: list[dict[str, str]] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    temp_files: list[str] = field(default_factory=list)
    database: str = "ok"  # the database's own integrity check (SQLite `PRAGMA integrity_check`)
    # --verify only: re-derived on the local engine and the bytes differ; or not re-derivable here (another
    # model/runtime, reported, not damage); None when not checked.
    forged: list[str] | None = None
    unverifiable: list[str] | None = None
    evicted: int = 0  # rows whose blob `catalog evict` deleted (rebuilt on their next graft): not damage

    @property
    def damaged(self) -> bool:
        """Something gc cannot fix: a row without bytes, bytes that changed, a row that lies, forged KV,
        a broken database file."""
        return bool(self.dangling or self.corrupted or self.mismatched or self.unreadable or self.forged
                    or self.database != "ok")

    @property
    def ok(self) -> bool:
        return not (self.damaged or self.orphans or self.temp_files)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "damaged": self.damaged}


def header_columns(data: bytes, size: int | None = None) -> dict[str, Any]:
    """The artifact-row columns a blob's own header determines (raises GalahadError if unparsable).
    `data` may be only the blob's first bytes (its header) when `size` gives the whole blob's size."""
    meta = read_meta(data)
    return {
        "parent_id": meta.parent, "token_start": meta.start, "token_end": meta.end,
        "n_tokens": len(meta.token_ids), "size": len(data) if size is None else size, "model_fingerprint": meta.model_fingerprint,
        "runtime_fingerprint": meta.runtime_fingerprint, "dtype": meta.dtype,
        "layer_kinds": list(meta.layer_kinds), "token_ids": list(meta.token_ids),
    }


def row_mismatch(row: dict[str, Any], header: dict[str, Any]) -> str | None:
    """The first column where a row disagrees with its blob's header, or None."""
    return next((col for col, want in header.items() if row.get(col) != want), None)


def _row_vs_blob(row: dict[str, Any], data: bytes) -> str | None:
    try:
        bad = row_mismatch(row, header_columns(data))
    except GalahadError as exc:
        return f"header: {exc}"
    if bad:
        return bad
    try:
        verify_tensors(data)  # the tensors themselves: layout, dtype and spans vs the header; finite values
    except GalahadError as exc:
        return f"tensors: {exc}"
    return None


def database_check(catalog: Catalog) -> str:
    """"ok", or the first problem the database reports about its own file (SQLite only)."""
    if catalog.dialect != "sqlite":
        return "ok"
    try:
        with catalog.engine.connect() as conn:
            rows = [str(r[0]) for r in conn.execute(text("PRAGMA integrity_check"))]
    except SQLAlchemyError as exc:
        return f"integrity check failed: {str(exc.orig if getattr(exc, 'orig', None) else exc)[:200]}"
    return "ok" if rows == ["ok"] else " ".join("; ".join(rows[:3]).split())[:300]


def _read(store: BlobStore, blob_id: str, size: int | None, report: FsckReport) -> bytes | None:
    """The blob's bytes, or None with the reason recorded (never an abort on one bad entry)."""
    try:
        return store.get_unchecked(blob_id, size)
    except BlobMissing:
        report.dangling.append(blob_id)
    except GalahadError as exc:
        report.unreadable.append({"id": blob_id, "reason": str(exc)[:200]})
    return None


def fsck(catalog: Catalog, store: BlobStore, rederive=None) -> FsckReport:
    """Re-hash every blob in the store and check every artifact row against its blob (header and tensors).
    With `rederive` (`learn.rebuild_check.RebuildCheck`, `fsck --verify`) every intact artifact is also re-derived
    from its tokens and parent on the local engine."""
    report = FsckReport()
    report.database = database_check(catalog)
    if report.database != "ok":
        return report  # rows read from a broken file prove nothing; the database must be repaired first
    row_ids: set[str] = set()
    intact: list[tuple[int, str]] = []
    with catalog.engine.connect() as conn:
        for r in conn.execution_options(yield_per=500).execute(select(ART)):
            row = dict(r._mapping)
            row_ids.add(row["id"])
            report.rows += 1
            if row["evicted_at"] is not None and not store.has(row["id"]):
                report.evicted += 1
                continue
            data = _read(store, row["id"], row["size"], report)
            if data is None:
                continue
            if sha256_hex(data) != row["id"]:
                report.corrupted.append(row["id"])
                continue
            bad = _row_vs_blob(row, data)
            if bad:
                report.mismatched.append({"id": row["id"], "column": bad})
            else:
                intact.append((row["token_start"], row["id"]))
    for blob_id in store.ids():
        report.blobs += 1
        if blob_id in row_ids:
            continue
        data = _read(store, blob_id, None, report)
        if data is None:
            continue
        if sha256_hex(data) != blob_id:
            report.corrupted.append(blob_id)
        else:
            report.orphans.append(blob_id)
    temp_files = getattr(store, "temp_files", None)
    if temp_files is not None:
        report.temp_files = sorted(str(p) for p in temp_files())
    if rederive is not None:  # parents start before their children: sorting by start puts them first
        result = rederive.check([aid for _start, aid in sorted(intact)], store.get)
        report.forged, report.unverifiable = result.forged, result.unverifiable
    return report


def _age(store: BlobStore, blob_id: str) -> float:
    age = getattr(store, "age", None)  # an object store: its objects' LastModified
    if age is not None:
        return age(blob_id)
    path = getattr(store, "path", None)
    if path is None:
        return 0.0  # no timestamps on this backend: only grace 0 collects
    try:
        return time.time() - path(blob_id).stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _refuse_mass_delete(rows: set[str], blobs: int, doomed: int, max_fraction: float, catalog: Catalog) -> None:
    """A catalog that knows none (or few) of the store's blobs is far likelier the wrong catalog than a
    store full of garbage: refuse before deleting anything."""
    if doomed and not rows:
        raise GalahadError(f"gc refused: catalog {redact(catalog.url)} has no artifacts, so all {doomed:,} of the "
                           "store's blobs would be deleted (wrong --catalog or --store?); --force to delete anyway")
    if blobs and doomed / blobs > max_fraction:
        raise GalahadError(f"gc refused: {doomed:,} of {blobs:,} blobs ({100 * doomed / blobs:.0f}%) would be deleted, "
                           f"more than {100 * max_fraction:.0f}% of the store; --force to delete anyway")


def gc(catalog: Catalog, store: BlobStore, grace_seconds: float = DEFAULT_GRACE_SECONDS,
       dry_run: bool = False, force: bool = False, max_fraction: float = GcConfig.max_fraction) -> dict[str, Any]:
    """Delete orphan blobs and temp files older than `grace_seconds`, and evict the blobs of originals a
    recompile has rebuilt under another runtime (rows kept, rebuildable); never deletes a row. Without
    `force`, refuses to delete more than `max_fraction` of the store's blobs, or any when the catalog has no
    artifacts."""
    rows = set(catalog.artifacts.sizes())
    out: dict[str, Any] = {"removed_orphans": [], "removed_temp_files": [], "freed_bytes": 0,
                           "kept_young": 0, "restored": [], "dry_run": dry_run}
    blobs = list(store.ids())
    doomed = [b for b in blobs if b not in rows and store.has(b) and _age(store, b) >= grace_seconds]
    if not force and not dry_run:
        _refuse_mass_delete(rows, len(blobs), len(doomed), max_fraction, catalog)
    for blob_id in [b for b in blobs if b not in rows]:
        if not store.has(blob_id):
            continue  # not a regular file (a symlink, a FIFO): fsck reports it; gc never follows or reads it
        if blob_id not in doomed:
            out["kept_young"] += 1
            continue
        size = store.size(blob_id)
        if not dry_run:
            data = store.get_unchecked(blob_id)
            store.delete(blob_id)
            if catalog.artifacts.has(blob_id):  # a depositor committed a row meanwhile: put it back
                if sha256_hex(data) == blob_id:
                    store.put(data)
                    out["restored"].append(blob_id)
                    continue
        out["removed_orphans"].append(blob_id)
        out["freed_bytes"] += size
    # Originals a recompile has rebuilt under another runtime are kept until now: their blobs go (the rows
    # stay, evicted, rebuildable on their own runtime), sparing each library's current chain as `evict` does.
    keep = catalog.evictions.protected()
    out["evicted_superseded"], out["superseded_bytes"] = [], 0
    for r in catalog.evictions.superseded():
        if r["id"] in keep or not store.has(r["id"]):
            continue
        if dry_run or evict_one(catalog, store, r):
            out["evicted_superseded"].append(r["id"])
            out["superseded_bytes"] += r["size"]
    temp_files = getattr(store, "temp_files", None)
    for p in (list(temp_files()) if temp_files else []):
        try:
            age = time.time() - Path(p).stat().st_mtime
            if age >= grace_seconds:
                if not dry_run:
                    os.unlink(p)
                out["removed_temp_files"].append(str(p))
        except FileNotFoundError:
            pass  # its writer finished (renamed) or another gc got it
    return out
