"""Forged artifacts (issue 14, item 4): consistent ids and headers over tensors that lie. Shapes, dtypes and
span lengths are checked against the metadata on import and fsck, and against the running model's layer
layout on graft; `--verify` re-derives every artifact on the local engine and refuses different bytes."""

from __future__ import annotations

import json

import pytest
import torch

from galahad.flywheel.artifacts.format import decode, encode
from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.bundle import export_bundle, import_bundle
from galahad.flywheel.catalog.fsck import fsck
from galahad.flywheel.cli.main import main
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.recall import graft_decode
from galahad.workers.engine import Engine
from galahad.workers.graft import deposit_span
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import DEFAULT_RUNTIME


@pytest.fixture(scope="module")
def engine(model_cache):
    return Engine(load_model("tiny", model_cache, DEFAULT_RUNTIME), DEFAULT_RUNTIME)


def _genuine(engine, text="Question: What is 2 + 2?\nAnswer: 4\n"):
    aid, data = deposit_span(engine, engine.new_cache(), engine.encode(text, bos=True), 0, None)
    return decode(data, aid)


def _forge(art, fn) -> tuple[str, bytes]:
    keys, values = zip(*(fn(k, v) for k, v in zip(art.keys, art.values, strict=True)), strict=True)
    return encode(art.meta, list(keys), list(values))


FORGERIES = {
    "one position": (lambda k, v: (k[:, :, -1:], v[:, :, -1:]), "shape"),
    "all NaN": (lambda k, v: (torch.full_like(k, float("nan")), torch.full_like(v, float("nan"))), "non-finite"),
    "float16 under a float32 header": (lambda k, v: (k.half(), v.half()), "F16"),
}


def _catalog_with(tmp_path, name: str, blobs: list[bytes]) -> tuple[Catalog, LocalStore]:
    """A catalog holding `blobs` as rows (catalog.artifacts.deposit trusts its depositor; import and fsck must not)."""
    store = LocalStore(tmp_path / f"{name}-store")
    cat = Catalog(f"sqlite:///{tmp_path / f'{name}.sqlite3'}")
    for data in blobs:
        cat.artifacts.deposit(store, store.put(data))
    return cat, store


@pytest.mark.parametrize("name", list(FORGERIES))
def test_forged_tensors_are_refused_on_import_fsck_and_graft(engine, tmp_path, name):
    fn, why = FORGERIES[name]
    genuine = _genuine(engine)
    fid, forged = _forge(genuine, fn)
    src, src_store = _catalog_with(tmp_path, "src", [forged])
    with src:
        report = fsck(src, src_store)
        assert report.damaged and [m["id"] for m in report.mismatched] == [fid]
        assert report.mismatched[0]["column"].startswith("tensors:") and why in report.mismatched[0]["column"]
        with pytest.raises(GalahadError, match=why):  # graft: refused before any tensor reaches a cache
            graft_decode(engine, src_store, fid, "Question: What is 2 + 2?\nAnswer:", 2)
        bundle = tmp_path / "forged.tar"
        export_bundle(src, src_store, bundle)
    dst_store = LocalStore(tmp_path / "dst-store")
    with Catalog(f"sqlite:///{tmp_path / 'dst.sqlite3'}") as dst:
        with pytest.raises(GalahadError, match=why):
            import_bundle(dst, dst_store, bundle, trust_unsigned=True)
        assert dst.stats()["artifacts"] == 0 and not list(dst_store.ids())


def test_graft_checks_the_running_models_layer_layout(engine, tmp_path):
    """Consistent with its own header (so import and fsck accept it), but head_dim 16 where tiny has 32."""
    genuine = _genuine(engine)
    fid, forged = _forge(genuine, lambda k, v: (k[..., :16].contiguous(), v[..., :16].contiguous()))
    cat, store = _catalog_with(tmp_path, "c", [forged])
    with cat:
        assert fsck(cat, store).ok
        with pytest.raises(GalahadError, match="running model holds"):
            graft_decode(engine, store, fid, "Question: What is 2 + 2?\nAnswer:", 2)


def test_verify_rederives_and_refuses_plausible_forged_kv(engine, tmp_path, capsys, monkeypatch, model_cache):
    from galahad.flywheel.learn.rebuild_check import RebuildCheck

    root = _genuine(engine)
    child_ids = engine.encode("Question: What is 3 + 3?\nAnswer: 6\n", bos=False)
    cache = engine.new_cache()
    engine.prefill(cache, list(root.meta.token_ids), 0)
    cid, child = deposit_span(engine, cache, child_ids, root.meta.end, root.id)
    # Finite, right shapes, right dtype, a consistent id: only re-derivation can tell it from the real one.
    fid, forged = _forge(decode(child, cid), lambda k, v: (k + 1e-3, v))
    store = LocalStore(tmp_path / "store")
    with Catalog(f"sqlite:///{tmp_path / 'src.sqlite3'}") as src:
        for data in (_bytes(root), child, forged):
            src.artifacts.deposit(store, store.put(data))
        plain = fsck(src, store)
        assert plain.ok and plain.forged is None  # intact: only --verify can see it
        checked = fsck(src, store, rederive=RebuildCheck(engine))
        assert checked.forged == [fid] and checked.unverifiable == [] and checked.damaged
        bundle = tmp_path / "b.tar"
        export_bundle(src, store, bundle)
        src_url = src.url
    with Catalog(f"sqlite:///{tmp_path / 'plain.sqlite3'}") as dst:
        assert import_bundle(dst, LocalStore(tmp_path / "plain-store"), bundle, trust_unsigned=True)["added"]["artifacts"] == 3
    with Catalog(f"sqlite:///{tmp_path / 'verified.sqlite3'}") as dst:
        with pytest.raises(GalahadError, match="re-derived bytes differ"):
            import_bundle(dst, LocalStore(tmp_path / "v-store"), bundle, rederive=RebuildCheck(engine))
        assert dst.stats()["artifacts"] == 0 and not list(LocalStore(tmp_path / "v-store").ids())
    # The same through the CLI flags.
    monkeypatch.setenv("GALAHAD_MODEL_CACHE", str(model_cache))
    data = tmp_path / "data"
    code = main(["--data", str(data), "catalog", "import", str(bundle), "--verify", "--model", "tiny"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "re-derived bytes differ" in err
    code = main(["--data", str(data), "catalog", "--catalog", src_url, "--store", str(store.root), "fsck", "--verify",
                 "--model", "tiny", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["forged"] == [fid] and report["damaged"]


def _bytes(art) -> bytes:
    aid, data = encode(art.meta, list(art.keys), list(art.values))
    assert aid == art.id  # canonical: the same tensors and metadata give the same bytes
    return data
