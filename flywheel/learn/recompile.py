"""`catalog recompile`: rebuild, under the running engine, every artifact another runtime made.

An artifact of another runtime fingerprint never grafts here, so each one of this model is rebuilt from its
row: its tokens prefilled after its parent's twin (parents first) through the one KV-chain owner, encoded
with the row's header `extra`. `catalog.recompiles.record` links the new artifact, in one transaction, to the
same verification, chains and recall rows, `recompiled_from` naming the original (kept until `gc`). The
blob is durable before its row, so `kill -9` leaves an artifact recompiled completely or not at all and a
rerun is idempotent. Artifacts of another *model* are counted, not rebuilt (their tokens are its tokenizer's).
`hook(event, artifact_id)` ("put", "recorded") lets a caller watch progress.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from galahad.flywheel.artifacts.format import read_meta
from galahad.flywheel.artifacts.store import BlobMissing, BlobStore
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.foreign import record_runtime
from galahad.flywheel.memory.rebuild import rebuilding

Hook = Callable[[str, str], None]


@dataclass
class Recompiled:
    pending: int = 0  # artifacts of this model made under another runtime, with no twin here yet
    rebuilt: list[str] = field(default_factory=list)  # new artifact ids
    skipped: list[dict] = field(default_factory=list)  # {"id", "reason"}: cannot be rebuilt here
    other_model: int = 0  # artifacts of another model: not rebuilt
    restored: int = 0  # evicted blobs of this runtime rebuilt (`--evicted`)

    def to_dict(self) -> dict:
        return {**asdict(self), "rebuilt": len(self.rebuilt), "rebuilt_ids": self.rebuilt}


def _extra(row: dict, store: BlobStore) -> dict | None:
    """The header extra of a row (rows from before migration 0004 have none: read from the blob)."""
    if row["extra"] is not None:
        return dict(row["extra"])
    try:
        return dict(read_meta(store.get(row["id"], row["size"])).extra)
    except BlobMissing:
        return None


def recompile(catalog, store: BlobStore, engine, hook: Hook | None = None, evicted: bool = False,
              total: Callable[[int], None] | None = None) -> Recompiled:
    """Rebuild every artifact of the engine's model made under another runtime; with `evicted`, also
    rebuild this runtime's evicted blobs. `total(n)` is told how many will be rebuilt, before the first."""
    from galahad.workers.kv_chain import KVChains  # deferred: torch is heavy

    fps = (engine.model_fingerprint, engine.runtime_fingerprint)
    record_runtime(catalog, engine)
    source = rebuilding(store, catalog, engine)
    out = Recompiled(other_model=catalog.recompiles.other_models(fps))
    pending = catalog.recompiles.pending(fps)
    out.pending = len(pending)
    restore = catalog.evictions.evicted_ids() if evicted else []
    if total:
        total(len(pending) + len(restore))
    chains = KVChains(engine, source, live_caches=4)
    for row in pending:
        parent = catalog.recompiles.twin(row["parent_id"], fps) if row["parent_id"] else None
        extra = _extra(row, source)
        if row["parent_id"] and parent is None:
            out.skipped.append({"id": row["id"], "reason": "its parent could not be rebuilt here"})
        elif extra is None:
            out.skipped.append({"id": row["id"], "reason": "its blob is gone and its row has no header extra"})
        else:
            try:
                art_id, data = chains.encode(list(row["token_ids"]), parent, row["token_start"], extra)
            except (GalahadError, ValueError) as exc:
                out.skipped.append({"id": row["id"], "reason": str(exc)[:200]})
                continue
            if store.put(data) != art_id:
                raise GalahadError(f"store returned another id than the hash of artifact {art_id[:16]}")
            if hook:
                hook("put", art_id)
            catalog.recompiles.record(store, art_id, {**row, "extra": extra}, fps)
            out.rebuilt.append(art_id)
            if hook:
                hook("recorded", art_id)
    for aid in restore:
        row = catalog.evictions.evicted(aid)
        if row is None or (row["model_fingerprint"], row["runtime_fingerprint"]) != fps:
            continue  # rebuilt meanwhile, or another runtime's (recompiled above instead)
        source.get_checked(aid)
        out.restored += 1
        if hook:
            hook("recorded", aid)
    return out

