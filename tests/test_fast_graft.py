"""The fast graft path: one hashed read into one buffer, tensors built over it, last-position logits, and
never a skipped hash check."""

import hashlib
import os

import pytest
import torch
from decoding import prefill_decode

from galahad.flywheel.artifacts.chain import load_chain
from galahad.flywheel.artifacts.format import _view, decode, decode_checked
from galahad.flywheel.artifacts.store import Checked, LocalStore
from galahad.flywheel.errors import GalahadError, IntegrityError
from galahad.flywheel.memory import recall
from galahad.workers.engine import Engine
from galahad.workers.graft import deposit_span, restore
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import DEFAULT_RUNTIME

RT = DEFAULT_RUNTIME.with_(prefill_chunk=8)


@pytest.fixture(scope="module")
def engine(model_cache):
    return Engine(load_model("tiny", model_cache, RT), RT)


def _tokens(n, seed):
    return torch.randint(10, 250, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _stored(engine, store, toks):
    art_id, data = deposit_span(engine, engine.new_cache(), toks, 0, None)
    assert store.put(data) == art_id
    return art_id, data


def test_checked_read_is_the_blob_and_tensors_are_views_over_it(engine, tmp_path):
    store = LocalStore(tmp_path)
    art_id, data = _stored(engine, store, _tokens(40, 1))
    blob = store.get_checked(art_id)
    assert isinstance(blob.buffer, bytes) and blob.buffer == data  # immutable: what was hashed is what is used
    art = decode_checked(blob)
    lo = _view(blob.buffer, torch.uint8, len(blob.buffer), 0).data_ptr()
    for t in (*art.keys, *art.values):  # no copy: every tensor lies inside the one read buffer
        assert lo <= t.data_ptr() < lo + len(blob.buffer)
    ref = decode(data, art_id)
    assert all(torch.equal(a, b) for a, b in zip(art.keys + art.values, ref.keys + ref.values, strict=True))
    # a one-artifact restore hands the cache those very tensors for the full layers (no concatenation)
    cache = restore(engine, [art])
    full = [i for i, k in enumerate(engine.loaded.layer_kinds) if k == "full"]
    assert full and all(cache.layers[i].keys.data_ptr() == art.keys[i].data_ptr() for i in full)


def test_the_checked_read_refuses_corruption_symlinks_and_missing_blobs(engine, tmp_path):
    store = LocalStore(tmp_path / "s")
    art_id, data = _stored(engine, store, _tokens(20, 2))
    path = store.path(art_id)
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 1
    path.write_bytes(bytes(flipped))
    with pytest.raises(IntegrityError, match="corrupted"):
        store.get_checked(art_id)
    with pytest.raises(IntegrityError, match="corrupted"):
        load_chain(store, art_id)
    path.unlink()
    real = tmp_path / "elsewhere"
    real.write_bytes(data)
    os.symlink(real, path)
    with pytest.raises(GalahadError, match="symlink: refused"):
        store.get_checked(art_id)
    path.unlink()
    with pytest.raises(GalahadError, match="missing"):
        store.get_checked(art_id)


def test_bad_safetensors_headers_are_refused_after_the_hash(engine, tmp_path):
    art_id, data = _stored(engine, LocalStore(tmp_path), _tokens(12, 3))
    n = int.from_bytes(data[:8], "little")
    header = data[8 : 8 + n].decode()
    # same length, offsets pointing past the data section: a well-hashed blob that lies about its tensors
    bad = header.replace('"data_offsets":[0,', '"data_offsets":[9,', 1)
    assert bad != header and len(bad) == len(header)
    evil = data[:8] + bad.encode() + data[8 + n :]
    with pytest.raises(GalahadError, match="not valid safetensors|bad offsets|byte range"):
        decode_checked(Checked(hashlib.sha256(evil).hexdigest(), bytearray(evil)))
    with pytest.raises(IntegrityError):
        decode(evil, art_id)  # the id still names the honest bytes


def test_serving_logits_match_recompute_and_decode_is_unchanged(engine, tmp_path):
    store = LocalStore(tmp_path)
    toks = _tokens(50, 4)  # past tiny's 16-position sliding window
    prefix, query = toks[:41], toks[41:]
    art_id, _ = _stored(engine, store, prefix)
    fresh = engine.new_cache()
    engine.prefill(fresh, prefix, 0)
    ref = engine.prefill(fresh, query, 41, last_only=True)
    cache, start, ids = recall.graft(engine, store, art_id)
    assert start == 41 and ids == [art_id]
    got = engine.prefill(cache, query, start, last_only=True)
    assert got.shape[0] == 1 and torch.equal(ref, got)
    # decoding after the graft equals decoding after a fresh prefill, token for token
    a = prefill_decode(engine, recall.graft(engine, store, art_id)[0], query, 41, 6)
    fresh2 = engine.new_cache()
    engine.prefill(fresh2, prefix, 0)
    assert prefill_decode(engine, fresh2, query, 41, 6).token_ids == a.token_ids
    # one token of budget: the first token, without a wasted forward after it
    one = prefill_decode(engine, recall.graft(engine, store, art_id)[0], query, 41, 1)
    assert one.token_ids == a.token_ids[:1]
