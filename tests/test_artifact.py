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
