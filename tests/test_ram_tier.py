"""The store's RAM tier: a blob read and hash-checked once is served from memory (no read, no hash) while
its file is unchanged, and never once the file changed, was replaced or deleted: the bytes it serves are
always the store's."""

from __future__ import annotations

import os
import time

import pytest
import torch

from galahad.flywheel.artifacts.chain import load_chain
from galahad.flywheel.artifacts.format import ArtifactMeta, encode
from galahad.flywheel.artifacts.ram_tier import RamTier
from galahad.flywheel.artifacts.store import BlobMissing, LocalStore
from galahad.flywheel.config import DEFAULTS
from galahad.flywheel.errors import IntegrityError


def _blob(i: int, tokens: int = 16) -> tuple[str, bytes]:
    meta = ArtifactMeta(token_ids=tuple(range(i, i + tokens)), start=0, parent=None, model_fingerprint="m" * 64,
                        runtime_fingerprint="r" * 64, layer_kinds=("full",) * 2, dtype="float32", extra={"i": i})
    kv = [torch.full((1, 1, tokens, 8), float(i))] * 2
    return encode(meta, kv, kv)


def _settled(store: LocalStore, blob_id: str) -> None:
    """Date the file back, as a blob deposited a while ago is (a file younger than the file-time tick is
    never kept: a rewrite in the same tick could keep its identity)."""
    past = time.time_ns() - 60 * 10**9
    os.utime(store.path(blob_id), ns=(past, past))


@pytest.fixture
def store(tmp_path):
    return LocalStore(tmp_path / "store", ram_tier_bytes=1 << 20)


def test_default_budget_comes_from_the_config(tmp_path):
    assert LocalStore(tmp_path).ram.capacity == DEFAULTS.store.ram_tier_bytes > 0
    assert LocalStore(tmp_path, ram_tier_bytes=0).ram.capacity == 0


def test_a_repeated_read_of_an_unchanged_blob_is_served_from_memory(store):
    art_id, data = _blob(1)
    store.put(data)
    _settled(store, art_id)
    first = store.get_checked(art_id)
    again = store.get_checked(art_id, size=len(data))
    assert again is first and again.buffer == data  # the same object: nothing was read or hashed again
    assert store.ram.stats()["hits"] == 1
    chain = load_chain(store, art_id)  # what a graft reads through
    assert store.ram.stats()["hits"] == 2 and chain[0].id == art_id


def test_a_just_written_blob_is_not_kept(store):
    art_id, data = _blob(2)
    store.put(data)
    assert store.get_checked(art_id).buffer == data
    assert store.ram.stats()["entries"] == 0  # its time may not tick on a rewrite within the same tick


def test_a_changed_file_is_read_again_and_refused(store):
    art_id, data = _blob(3)
    store.put(data)
    _settled(store, art_id)
    assert store.get_checked(art_id).buffer == data
    path = store.path(art_id)
    flipped = bytearray(data)
    flipped[-5] ^= 1
    with open(path, "r+b") as f:  # in place: same inode, same size
        f.write(bytes(flipped))
    with pytest.raises(IntegrityError, match="corrupted"):
        store.get_checked(art_id)
    with pytest.raises(IntegrityError, match="corrupted"):
        load_chain(store, art_id)
    assert store.ram.stats()["entries"] == 0 and store.ram.stats()["stale"] == 1
    # even with its mtime set back to what it was, the write changed its ctime: still read, still refused
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))
    with pytest.raises(IntegrityError, match="corrupted"):
        store.get_checked(art_id)
    store.put(data)  # the store repaired (a rebuild puts the same bytes): served again, read afresh
    assert store.get_checked(art_id).buffer == data


def test_a_replaced_truncated_or_deleted_file_is_never_served(store):
    art_id, data = _blob(4)
    store.put(data)
    _settled(store, art_id)
    store.get_checked(art_id)
    path = store.path(art_id)
    path.write_bytes(data[:-10])
    with pytest.raises(IntegrityError):
        store.get_checked(art_id, size=len(data))
    path.write_bytes(data)
    _settled(store, art_id)
    store.get_checked(art_id)
    path.unlink()  # evicted or deleted behind the store's back
    with pytest.raises(BlobMissing):
        store.get_checked(art_id)
    store.put(data)
    _settled(store, art_id)
    store.get_checked(art_id)
    store.delete(art_id)
    assert store.ram.stats()["entries"] == 0
    with pytest.raises(BlobMissing):
        store.get_checked(art_id)


def test_the_tier_is_bounded_by_bytes_least_recently_used_out_first(tmp_path):
    blobs = [_blob(10 + i, tokens=64) for i in range(6)]
    size = len(blobs[0][1])
    store = LocalStore(tmp_path, ram_tier_bytes=3 * size + 100)
    for art_id, data in blobs:
        store.put(data)
        _settled(store, art_id)
    for art_id, _ in blobs[:3]:
        store.get_checked(art_id)
    store.get_checked(blobs[0][0])  # blob 0 used last: blob 1 goes first
    store.get_checked(blobs[3][0])
    stats = store.ram.stats()
    assert stats["entries"] == 3 and stats["bytes"] <= stats["capacity"]
    hits = stats["hits"]
    store.get_checked(blobs[0][0])
    store.get_checked(blobs[1][0])  # evicted: read again
    assert store.ram.stats()["hits"] == hits + 1
    tier = RamTier(10)
    tier.put("x", (0, 0, 0, 0, 0), b"0123456789ab", 12)  # larger than the whole budget: not kept
    assert tier.stats()["entries"] == 0
