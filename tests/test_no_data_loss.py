"""Data loss and poisoning (issue 14): a mistyped catalog never becomes an empty one that gc reads as
"every blob is an orphan"; a corrupt same-size blob is repaired, not trusted; import recomputes every
content-derived key."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.bundle import export_bundle, import_bundle
from galahad.flywheel.catalog.fsck import fsck, gc
from galahad.flywheel.cli.main import main
from galahad.flywheel.errors import GalahadError

sys.path.insert(0, str(Path(__file__).parent))
import test_catalog_bundle as B  # noqa: E402
import test_catalog_workers as W  # noqa: E402


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code: int, err: str) -> bool:
    return code == 2 and err.startswith("galahad: error: ") and err.count("\n") == 1


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "data"
    url = f"sqlite:///{root / 'catalog.sqlite3'}"
    root.mkdir()
    with Catalog(url) as cat:
        ids = W.populate(cat, LocalStore(root / "store"))
    return root, url, ids


# -- 1. only run/serve/import create a catalog; gc refuses mass deletion ------------------------------------

def test_mistyped_catalog_is_refused_and_the_store_survives(data, tmp_path, capsys, monkeypatch):
    root, url, ids = data
    store = LocalStore(root / "store")
    blobs = sorted(store.ids())
    typo = tmp_path / "typo.sqlite3"
    for action in (["gc", "--grace", "0"], ["fsck"], ["stats"], ["ls"], ["export", str(tmp_path / "b.tar")]):
        code, _, err = run(capsys, "--data", str(root), "catalog", "--catalog", f"sqlite:///{typo}", *action)
        assert one_line(code, err) and "no catalog at sqlite:///" in err and str(typo) in err, (action, err)
        assert not typo.exists()
    code, _, err = run(capsys, "--data", str(root), "catalog", "--catalog", "sqlite://", "gc", "--grace", "0")
    assert one_line(code, err) and "in-memory" in err
    monkeypatch.setenv("GALAHAD_CATALOG", f"sqlite:///{typo}")
    code, _, err = run(capsys, "--data", str(root), "catalog", "gc", "--grace", "0")
    assert one_line(code, err) and str(typo) in err and not typo.exists()
    # A database that exists but holds no Galahad tables is refused too (and left untouched).
    import sqlite3

    sqlite3.connect(typo).execute("CREATE TABLE unrelated (x)").connection.commit()
    code, _, err = run(capsys, "--data", str(root), "catalog", "gc", "--grace", "0")
    assert one_line(code, err) and "no Galahad tables" in err
    assert sorted(store.ids()) == blobs  # nothing was deleted


def test_password_is_redacted_in_the_refusal(capsys, make_catalog_url, tmp_path):
    from sqlalchemy.engine import make_url

    url = make_url(make_catalog_url("postgresql")).set(password="s3cret").render_as_string(hide_password=False)
    code, _, err = run(capsys, "--data", str(tmp_path), "catalog", "--catalog", url, "stats")
    assert one_line(code, err) and "no Galahad tables" in err and "s3cret" not in err and "***" in err


def test_solve_and_eval_refuse_a_missing_catalog_without_creating_anything(tmp_path, capsys):
    data = tmp_path / "nothing-here"
    for argv in (["solve", "What is 2 + 2?", "--model", "tiny"], ["eval", "recurrence", "--model", "tiny"]):
        code, _, err = run(capsys, "--data", str(data), *argv)
        assert one_line(code, err) and "no catalog at" in err, err
        assert not data.exists()


def test_import_still_creates_a_catalog(data, tmp_path, capsys):
    root, url, ids = data
    bundle = tmp_path / "b.tar"
    with Catalog(url) as cat:
        export_bundle(cat, LocalStore(root / "store"), bundle)
    fresh = tmp_path / "fresh"
    code, out, err = run(capsys, "--data", str(fresh), "catalog", "import", str(bundle), "--trust-unsigned", "--json")
    assert code == 0, err
    assert json.loads(out)["added"]["artifacts"] == 4 and (fresh / "catalog.sqlite3").is_file()


def test_gc_refuses_to_delete_most_of_the_store_without_force(data, capsys):
    root, url, ids = data
    store = LocalStore(root / "store")
    orphans = [store.put(W.make_artifact(seed=7000 + i)[1]) for i in range(5)]  # 5 of 9 blobs
    code, _, err = run(capsys, "--data", str(root), "catalog", "--catalog", url, "gc", "--grace", "0")
    assert one_line(code, err) and "5 of 9 blobs" in err and "--force" in err
    assert all(store.has(o) for o in orphans)
    code, out, _ = run(capsys, "--data", str(root), "catalog", "--catalog", url, "gc", "--grace", "0", "--dry-run",
                       "--json")
    assert code == 0 and sorted(json.loads(out)["removed_orphans"]) == sorted(orphans)
    code, out, _ = run(capsys, "--data", str(root), "catalog", "--catalog", url, "gc", "--grace", "0", "--force",
                       "--json")
    assert code == 0 and sorted(json.loads(out)["removed_orphans"]) == sorted(orphans)
    assert sorted(store.ids()) == sorted(ids["chain"] + ids["second_chain"])


def test_gc_on_a_catalog_without_artifacts_deletes_nothing(tmp_path):
    store = LocalStore(tmp_path / "store")
    blob = store.put(W.make_artifact(seed=1)[1])
    with Catalog(f"sqlite:///{tmp_path / 'empty.sqlite3'}") as cat:
        with pytest.raises(GalahadError, match="has no artifacts"):
            gc(cat, store, grace_seconds=0)
        assert store.has(blob)
        assert gc(cat, store, grace_seconds=0, force=True)["removed_orphans"] == [blob]


# -- 2. deduplication checks the hash, not the size ----------------------------------------------------------

def test_corrupt_same_size_blob_is_repaired_by_put(tmp_path):
    store = LocalStore(tmp_path / "store")
    aid, good = W.make_artifact(seed=3)
    store.put(good)
    path = store.path(aid)
    rotten = bytearray(good)
    rotten[-5] ^= 0x01
    path.write_bytes(bytes(rotten))
    assert path.stat().st_size == len(good)
    with Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}") as cat:
        assert cat.artifacts.deposit(store, store.put(good)) == aid  # a new row for those bytes...
        assert path.read_bytes() == good  # ...points at good bytes: the corrupt file was replaced
        assert store.get(aid) == good and fsck(cat, store).ok
    assert not list(store.temp_files())


# -- 3. import recomputes derived keys -------------------------------------------------------------------

def _poisonable(tmp_path) -> tuple[Path, dict]:
    store = LocalStore(tmp_path / "src" / "store")
    with Catalog(f"sqlite:///{tmp_path / 'src.sqlite3'}") as cat:
        pid = cat.problems.add("What is 4 + 3?", "7", source="unit", topic="arith", template="add")
        att = cat.runs.add_attempt(pid, None, W.FP_MODEL, {}, "7", 1, 0.1, 0.1)
        ver = cat.runs.add_verification(att, "v1", True, "numeric match")
        aid, data = W.make_artifact(seed=5)
        cat.artifacts.deposit(store, store.put(data), verification_id=ver, library="template:add")
        bundle = tmp_path / "good.tar"
        export_bundle(cat, store, bundle)
    return bundle, {"problem": pid, "artifact": aid, "verification": ver, "attempt": att}


def _import_refused(tmp_path, items: dict, name: str, match: str) -> None:
    path = B.write_tar(tmp_path / f"{name}.tar", list(items.items()))
    store = LocalStore(tmp_path / f"{name}-store")
    with Catalog(f"sqlite:///{tmp_path / f'{name}.sqlite3'}") as cat:
        with pytest.raises(GalahadError, match=match):
            import_bundle(cat, store, path, trust_unsigned=True)
        assert cat.stats()["problems"] == 0 and cat.stats()["artifacts"] == 0
    assert not list(store.ids())


def test_problem_id_that_is_not_the_hash_of_its_text_is_refused(tmp_path):
    bundle, ids = _poisonable(tmp_path)
    items = B.members(bundle)
    manifest = json.loads(items["manifest.json"])
    (p,) = manifest["tables"]["problems"]
    assert p["id"] == ids["problem"] and p["text"] == "What is 4 + 3?"
    p["text"] = "What is 3 + 9?"  # the 4 + 3 id (and its gold 7) on another question
    _import_refused(tmp_path, B.resealed(items, manifest), "poisoned", "not the hash of its text")


def test_artifact_links_that_disagree_are_refused(tmp_path):
    bundle, ids = _poisonable(tmp_path)
    items = B.members(bundle)
    rejected = json.loads(items["manifest.json"])
    rejected["tables"]["verifications"][0]["verified"] = False
    _import_refused(tmp_path, B.resealed(items, rejected), "rejected", "not a positive verdict")
    other_model = json.loads(items["manifest.json"])
    other_model["tables"]["attempts"][0]["model_fingerprint"] = "e" * 64
    _import_refused(tmp_path, B.resealed(items, other_model), "othermodel", "name different models")


def test_bundle_problem_with_another_gold_answer_than_here_is_refused(tmp_path):
    bundle, ids = _poisonable(tmp_path)
    store = LocalStore(tmp_path / "dst-store")
    with Catalog(f"sqlite:///{tmp_path / 'dst.sqlite3'}") as cat:
        cat.problems.add("What is 4 + 3?", "8", source="unit", topic="arith")
        with pytest.raises(GalahadError, match="gold answer"):
            import_bundle(cat, store, bundle, trust_unsigned=True)
        assert cat.stats()["artifacts"] == 0
    assert not list(store.ids())
