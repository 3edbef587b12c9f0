"""The artifact format and store: canonical bytes, hash-checked loads, atomic writes, refusals."""

import subprocess
import sys

import pytest
import torch

from galahad.flywheel.artifacts.format import ArtifactMeta, check_compatible, decode, encode, read_meta
from galahad.flywheel.artifacts.store import LocalStore, sha256_hex
from galahad.flywheel.errors import GalahadError, IntegrityError

MAKE = """
import sys, torch
from galahad.flywheel.artifacts.format import ArtifactMeta, encode
g = torch.Generator().manual_seed(7)
m = ArtifactMeta((5, 6, 7), 0, None, 'a' * 64, 'b' * 64, ('full', 'sliding:4'), 'float32', extra={'z': 1, 'a': [2]})
ks = [torch.randn(1, 1, 3, 8, generator=g) for _ in range(2)]
vs = [torch.randn(1, 1, 3, 8, generator=g) for _ in range(2)]
i, d = encode(m, ks, vs)
sys.stdout.write(i)
"""


def _artifact():
    g = torch.Generator().manual_seed(7)
    m = ArtifactMeta((5, 6, 7), 0, None, "a" * 64, "b" * 64, ("full", "sliding:4"), "float32", extra={"z": 1, "a": [2]})
    ks = [torch.randn(1, 1, 3, 8, generator=g) for _ in range(2)]
    vs = [torch.randn(1, 1, 3, 8, generator=g) for _ in range(2)]
    return m, ks, vs


def test_same_inputs_same_id_in_any_process():
    ids = {
        subprocess.run([sys.executable, "-c", MAKE], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin"}).stdout
        for seed in (1, 2, 3)
    }
    m, ks, vs = _artifact()
    art_id, data = encode(m, ks, vs)
    assert ids == {art_id}
    assert art_id == sha256_hex(data)


def test_roundtrip_is_bitwise():
    m, ks, vs = _artifact()
    art_id, data = encode(m, ks, vs)
    art = decode(data, art_id)
    assert art.meta == m and read_meta(data) == m
    for a, b in zip(art.keys + art.values, ks + vs, strict=True):
        assert torch.equal(a, b)


def test_every_flipped_byte_is_refused():
    m, ks, vs = _artifact()
    art_id, data = encode(m, ks, vs)
    for pos in range(0, len(data), max(1, len(data) // 97)):
        bad = bytearray(data)
        bad[pos] ^= 0x01
        with pytest.raises(IntegrityError):
            decode(bytes(bad), art_id)


def test_fingerprint_mismatch_names_the_difference():
    m, _, _ = _artifact()
    with pytest.raises(IntegrityError, match="model fingerprint mismatch"):
        check_compatible(m, "c" * 64, "b" * 64)
    with pytest.raises(IntegrityError, match="runtime fingerprint mismatch"):
        check_compatible(m, "a" * 64, "c" * 64)
    check_compatible(m, "a" * 64, "b" * 64)


def test_store_is_content_addressed_and_checked(tmp_path):
    store = LocalStore(tmp_path)
    m, ks, vs = _artifact()
    art_id, data = encode(m, ks, vs)
    assert store.put(data) == art_id and store.put(data) == art_id
    assert list(store.ids()) == [art_id]
    assert store.get(art_id) == data
    p = store.path(art_id)
    raw = bytearray(p.read_bytes())
    raw[-1] ^= 0xFF
    p.write_bytes(bytes(raw))
    with pytest.raises(IntegrityError):
        store.get(art_id)
    assert not list(tmp_path.rglob(".tmp-*"))


@pytest.mark.parametrize("bad", ["../../etc/passwd", "ABC", "a" * 63, "g" * 64, ""])
def test_store_refuses_bad_ids(tmp_path, bad):
    with pytest.raises(GalahadError):
        LocalStore(tmp_path).get(bad)


def test_not_an_artifact_is_refused():
    with pytest.raises(GalahadError):
        read_meta(b"\x00" * 4)
    with pytest.raises(GalahadError):
        read_meta(b"\xff" * 64)


def test_the_chain_walk_is_bounded_and_refuses_cycles(tmp_path):
    """The one parent walk (`artifacts/chain.py`): a cycle or a chain past the bound is refused with a clear
    error, over the store, over any reader (a bundle's blobs) and over the catalog's rows (`lineage`)."""
    from pathlib import Path

    from sqlalchemy import update

    from galahad.flywheel.artifacts.chain import chain_headers, load_chain, walk
    from galahad.flywheel.catalog import Catalog
    from galahad.flywheel.catalog.schema import TABLES

    sys.path.insert(0, str(Path(__file__).parent))
    import test_catalog_workers as W

    parents = {"a": "b", "b": "c", "c": "a"}  # a forged reader: honest bytes cannot form a cycle
    with pytest.raises(GalahadError, match="refusing a cycle"):
        walk("a", lambda i: i, parents.get)
    line = {str(i): str(i - 1) if i else None for i in range(10)}
    assert walk("9", lambda i: i, line.get) == [str(i) for i in range(10)]  # root first
    with pytest.raises(GalahadError, match="longer than 5 artifacts"):
        walk("9", lambda i: i, line.get, max_len=5)
    assert walk("9", lambda i: None if i == "4" else i, line.get) == ["5", "6", "7", "8", "9"]  # a missing link

    store = LocalStore(tmp_path / "store")
    chain = W.make_chain(4, seed=40)
    ids = store.put_many([d for _, d in chain])
    assert [a.id for a in load_chain(store, ids[-1])] == ids
    assert [a.id for a in load_chain(store.get, ids[-1])] == ids  # any id -> bytes reader
    assert [i for i, _meta in chain_headers(store, ids[-1])] == ids
    for load in (load_chain, chain_headers):
        with pytest.raises(GalahadError, match="longer than 3 artifacts"):
            load(store, ids[-1], max_len=3)

    with Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}") as cat:
        cat.artifacts.deposit_many(store, ids)
        assert [p["id"] for p in cat.artifacts.lineage(ids[-1])["parents"]] == ids[-2::-1]
        with cat.write() as conn:  # a forged row: the root claims the tail as its parent
            conn.execute(update(TABLES["artifacts"]).where(TABLES["artifacts"].c.id == ids[0])
                         .values(parent_id=ids[-1]))
        with pytest.raises(GalahadError, match="refusing a cycle"):
            cat.artifacts.lineage(ids[-1])
