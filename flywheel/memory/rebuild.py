"""Evicted artifacts come back: a store whose missing blobs are rebuilt exactly from their catalog rows.

`RebuildingStore` wraps the artifact store for whatever grafts (`Solver`, the evals). A read of a blob that
`catalog evict` deleted rebuilds it through `workers.kv_chain.KVChains` (its tokens prefilled after its
parent's chain, itself read through this store) and puts it back only if it hashes to the artifact's own id;
then the row is unmarked and a rebuild counted. Another model's or runtime's artifact is `catalog
recompile`'s. Every successful read stamps the artifact as grafted (at most once a minute per artifact and
process), which is what eviction orders by.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from galahad.flywheel.artifacts.store import BlobMissing, BlobStore, Checked, CorruptBlob
from galahad.flywheel.errors import GalahadError, IntegrityError

TOUCH_EVERY_S = 60.0


class RebuildingStore(BlobStore):
    def __init__(self, inner: BlobStore, catalog, engine):
        self.inner, self.catalog, self.engine = inner, catalog, engine
        self.rebuilds = 0  # in this process
        self._touched: dict[str, float] = {}

    @property
    def root(self):  # where the bytes live (`catalog.store_location`)
        return getattr(self.inner, "root", None)

    def __getattr__(self, name: str):  # path, temp_files, ... of the wrapped backend
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # -- the contract, delegated ---------------------------------------------------------------------

    def put(self, data: bytes) -> str:
        return self.inner.put(data)

    def has(self, blob_id: str) -> bool:
        return self.inner.has(blob_id)

    def delete(self, blob_id: str) -> None:
        self.inner.delete(blob_id)

    def ids(self) -> Iterator[str]:
        return self.inner.ids()

    def size(self, blob_id: str) -> int:
        return self.inner.size(blob_id)

    def get_unchecked(self, blob_id: str, size: int | None = None) -> bytes:
        try:
            data = self.inner.get_unchecked(blob_id, size)
        except BlobMissing:
            data = self._rebuild(blob_id, BlobMissing)
        except CorruptBlob:
            data = self._repair(blob_id)
        self._touch(blob_id)
        return data

    def get_checked(self, blob_id: str, size: int | None = None) -> Checked:
        try:
            checked = self.inner.get_checked(blob_id, size)
        except BlobMissing:
            checked = Checked(blob_id, self._rebuild(blob_id, BlobMissing))
        except CorruptBlob:
            checked = Checked(blob_id, self._repair(blob_id))
        self._touch(blob_id)
        return checked

    # -- rebuilding ------------------------------------------------------------------------------------

    def _touch(self, blob_id: str) -> None:
        t = time.monotonic()
        if t - self._touched.get(blob_id, -TOUCH_EVERY_S) >= TOUCH_EVERY_S:
            self._touched[blob_id] = t
            self.catalog.evictions.touch([blob_id])

    def _rebuild(self, blob_id: str, missing: type[Exception]) -> bytes:
        row = self.catalog.evictions.evicted(blob_id)
        if row is None:
            raise missing(f"blob {blob_id[:16]} is missing from the store and was never evicted (fsck)")
        data = rebuild_bytes(self.engine, self, row)
        self.inner.put(data)
        self.catalog.evictions.rebuilt(blob_id)
        self.rebuilds += 1
        return data

    def _repair(self, blob_id: str) -> bytes:
        """A stored object that failed its hash (`CorruptBlob`, never returned): rebuilt from its catalog
        row as an evicted one is, then handed to the store's `repair` (the bytes must hash to the id)."""
        repair = getattr(self.inner, "repair", None)
        row = self.catalog.artifacts.get(blob_id) if self.catalog.artifacts.has(blob_id) else None
        if repair is None or row is None or row.get("extra") is None:
            raise CorruptBlob(f"blob {blob_id[:16]} is corrupted in the store and cannot be rebuilt here (fsck)", blob_id)
        data = rebuild_bytes(self.engine, self, row)
        repair(blob_id, data)
        self.rebuilds += 1
        return data


def rebuild_bytes(engine, source: BlobStore, row: dict) -> bytes:
    """An evicted artifact's bytes, rebuilt from its row on `engine` (parents read from `source`); refused
    unless the engine is the one it was made with and the rebuild hashes to its id."""
    from galahad.workers.kv_chain import KVChains  # deferred: torch is heavy

    if (row["model_fingerprint"], row["runtime_fingerprint"]) != (engine.model_fingerprint,
                                                                    engine.runtime_fingerprint):
        raise GalahadError(f"artifact {row['id'][:16]} was evicted and was made under another model or runtime: "
                           "run `galahad catalog recompile`")
    if row["extra"] is None:
        raise GalahadError(f"artifact {row['id'][:16]} was evicted without its header extra: cannot rebuild it")
    art_id, data = KVChains(engine, source, live_caches=0).encode(
        list(row["token_ids"]), row["parent_id"], row["token_start"], dict(row["extra"]), keep=False)
    if art_id != row["id"]:
        raise IntegrityError(f"rebuilding evicted artifact {row['id'][:16]} gave other bytes ({art_id[:16]}): "
                             "refused")
    return data


def rebuilding(store: BlobStore, catalog, engine) -> BlobStore:
    """`store`, wrapped once (a store already rebuilding, or no store or engine, is returned as it is)."""
    if store is None or engine is None or isinstance(store, RebuildingStore):
        return store
    return RebuildingStore(store, catalog, engine)
