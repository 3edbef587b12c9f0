"""fsck finds every kind of damage (flipped byte, dangling row, lying row, orphan, temp file); gc collects
only what is collectable and only past its grace period."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from galahad.flywheel.artifacts.store import LocalStore, sha256_hex
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.fsck import fsck, gc

sys.path.insert(0, str(Path(__file__).parent))
import test_catalog_workers as W  # noqa: E402


@pytest.fixture
def setup(catalog_url, tmp_path):
    store = LocalStore(tmp_path / "store")
    with Catalog(catalog_url) as cat:
        ids = W.populate(cat, store)
        yield cat, store, ids


def test_clean_catalog_is_ok(setup):
    cat, store, ids = setup
    r = fsck(cat, store)
    assert r.ok and not r.damaged
    assert (r.rows, r.blobs) == (4, 4)


def test_flipped_byte_is_corruption(setup):
    cat, store, ids = setup
    victim = ids["chain"][1]
    path = store.path(victim)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    r = fsck(cat, store)
    assert r.corrupted == [victim] and r.damaged and not r.dangling and not r.orphans
    assert gc(cat, store, grace_seconds=0)["removed_orphans"] == []  # gc never touches a blob with a row
    assert store.has(victim)


def test_missing_blob_is_a_dangling_row(setup):
    cat, store, ids = setup
    victim = ids["chain"][0]
    store.delete(victim)
    r = fsck(cat, store)
    assert r.dangling == [victim] and r.damaged and not r.corrupted


def test_row_that_disagrees_with_its_blob_is_reported(setup):
    cat, store, ids = setup
    with cat.engine.begin() as conn:
        conn.execute(text("UPDATE artifacts SET token_end = token_end + 1 WHERE id = :a"), {"a": ids["chain"][2]})
    r = fsck(cat, store)
    assert r.mismatched == [{"id": ids["chain"][2], "column": "token_end"}] and r.damaged


def test_orphans_and_temp_files_are_collectable(setup):
    cat, store, ids = setup
    orphan = store.put(W.make_artifact(seed=999)[1])  # a depositor killed between put and commit
    tmp = store.root / "ab" / "cd" / ".tmp-killed"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(b"partial")
    r = fsck(cat, store)
    assert r.orphans == [orphan] and r.temp_files == [str(tmp)] and not r.damaged and not r.ok
    young = gc(cat, store, grace_seconds=3600)  # just written: could be a live depositor's
    assert young["removed_orphans"] == [] and young["kept_young"] == 1 and store.has(orphan)
    dry = gc(cat, store, grace_seconds=0, dry_run=True)
    assert dry["removed_orphans"] == [orphan] and store.has(orphan) and tmp.exists()
    done = gc(cat, store, grace_seconds=0)
    assert done["removed_orphans"] == [orphan] and done["removed_temp_files"] == [str(tmp)]
    assert done["freed_bytes"] > 0 and not store.has(orphan) and not tmp.exists()
    after = fsck(cat, store)
    assert after.ok and after.blobs == 4
    assert all(sha256_hex(store.get(a)) == a for a in ids["chain"] + ids["second_chain"])


def test_corrupted_orphan_is_corruption(setup):
    cat, store, ids = setup
    fake = "f" * 64
    store.path(fake).parent.mkdir(parents=True, exist_ok=True)
    store.path(fake).write_bytes(b"not what the name says")
    r = fsck(cat, store)
    assert r.corrupted == [fake] and r.orphans == []
