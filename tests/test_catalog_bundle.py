"""Bundles: a round trip onto the other backend is byte-identical; a corrupted, incomplete, hostile or
conflicting bundle is refused with nothing written."""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import pytest
from sqlalchemy import select

from galahad.flywheel.artifacts.store import LocalStore, sha256_hex
from galahad.flywheel.catalog import Catalog, bundle_formats
from galahad.flywheel.catalog.bundle import export_bundle, import_bundle
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError

sys.path.insert(0, str(Path(__file__).parent))
import test_catalog_workers as W  # noqa: E402

OTHER = {"sqlite": "postgresql", "postgresql": "sqlite"}


def canonical_rows(cat: Catalog) -> dict[str, set[str]]:
    """Per table, each row as canonical JSON (machine-local `location` left out): equal means identical."""
    out = {}
    with cat.engine.connect() as conn:
        for name, table in TABLES.items():
            rows = [{k: v for k, v in r._mapping.items() if k != "location"} for r in conn.execute(select(table))]
            out[name] = {json.dumps(r, sort_keys=True, default=repr) for r in rows}
    return out


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isreg()}


def write_tar(path: Path, items: list[tuple[str, bytes]], extra: list[tarfile.TarInfo] = ()) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in items:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return path


def resealed(items: dict[str, bytes], manifest: dict) -> dict[str, bytes]:
    """A tampered manifest with a matching checksum: only the content checks can catch it."""
    m = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    return {**items, "manifest.json": m, "MANIFEST.sha256": sha256_hex(m).encode()}


def test_round_trip_to_the_other_backend_is_byte_identical(backend, catalog_url, make_catalog_url, tmp_path):
    src_store = LocalStore(tmp_path / "a" / "store")
    bundle = tmp_path / "out.galahad"
    with Catalog(catalog_url) as src:
        ids = W.populate(src, src_store)
        src.problems.add("never attempted", "0", "unit", "arith")  # not part of any artifact's provenance
        summary = export_bundle(src, src_store, bundle)
        src_rows = canonical_rows(src)
    assert summary["artifacts"] == 4 and summary["problems"] == 2
    dst_store = LocalStore(tmp_path / "b" / "store")
    with Catalog(make_catalog_url(OTHER[backend])) as dst:
        out = import_bundle(dst, dst_store, bundle, trust_unsigned=True)
        assert out["added"]["artifacts"] == 4 and out["added"]["library_entries"] == 4
        all_ids = ids["chain"] + ids["second_chain"]
        assert sorted(dst_store.ids()) == sorted(all_ids)
        assert all(sha256_hex(dst_store.get(a)) == a == sha256_hex(src_store.get(a)) for a in all_ids)
        dst_rows = canonical_rows(dst)
        for t in TABLES:  # every row arrives identical; only provenance rows of artifacts travel
            assert dst_rows[t] <= src_rows[t], t
        for t in ("artifacts", "runs", "libraries", "library_entries"):
            assert dst_rows[t] == src_rows[t], t
        assert [len(dst_rows[t]) for t in ("problems", "attempts", "verifications")] == [2, 2, 2]
        assert dst.artifacts.lineage(ids["chain"][-1])["problem"]["id"] == ids["problems"][0]
        assert W.chains(dst, "arith") == [ids["chain"], ids["second_chain"]]
        again = export_bundle(dst, dst_store, tmp_path / "again.galahad")
        assert again["artifacts"] == 4
        assert sha256_hex((tmp_path / "again.galahad").read_bytes()) == sha256_hex(bundle.read_bytes())
        second = import_bundle(dst, dst_store, bundle, trust_unsigned=True)  # idempotent
        assert set(second["added"].values()) == {0}


def test_library_export_takes_ancestors(catalog_url, make_catalog_url, tmp_path):
    store = LocalStore(tmp_path / "store")
    with Catalog(catalog_url) as cat:
        ids = W.populate(cat, store)
        tip_id, tip = W.make_artifact(parent=ids["chain"][-1], start=12, seed=500)
        cat.artifacts.deposit(store, store.put(tip), library="other")  # a one-entry library whose parent lives elsewhere
        export_bundle(cat, store, tmp_path / "other.galahad", library="other")
        with pytest.raises(GalahadError, match="unknown or empty library"):
            export_bundle(cat, store, tmp_path / "x.galahad", library="missing")
        with pytest.raises(GalahadError, match="already exists"):
            export_bundle(cat, store, tmp_path / "other.galahad", library="other")
    with Catalog(make_catalog_url("sqlite")) as dst:
        import_bundle(dst, LocalStore(tmp_path / "dst"), tmp_path / "other.galahad", trust_unsigned=True)
        assert [p["id"] for p in dst.artifacts.lineage(tip_id)["parents"]] == ids["chain"][::-1]
        assert W.chains(dst, "other") == [[tip_id]] and W.chains(dst, "arith") == []


def test_bad_bundles_are_refused_with_nothing_written(catalog_url, make_catalog_url, tmp_path):
    src_store = LocalStore(tmp_path / "src")
    good = tmp_path / "good.galahad"
    with Catalog(make_catalog_url("sqlite")) as src:
        ids = W.populate(src, src_store)
        export_bundle(src, src_store, good)
    items = members(good)
    manifest = json.loads(items["manifest.json"])
    blob = f"blobs/{ids['chain'][1]}"
    flipped = bytearray(items[blob])
    flipped[-3] ^= 0x40
    lying = json.loads(items["manifest.json"])
    for a in lying["tables"]["artifacts"]:
        if a["id"] == ids["chain"][1]:
            a["model_fingerprint"] = "e" * 64
    orphaned = json.loads(items["manifest.json"])
    orphaned["tables"]["problems"] = []
    link = tarfile.TarInfo("blobs/" + "a" * 64)
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    raw = good.read_bytes()
    cases = {
        "flipped byte in a blob": {**items, blob: bytes(flipped)},
        "missing blob": {k: v for k, v in items.items() if k != blob},
        "no manifest": {k: v for k, v in items.items() if k != "manifest.json"},
        "manifest edited without its checksum": {**items, "manifest.json": items["manifest.json"].replace(b'"5"', b'"6"')},
        "row fingerprint disagrees with the blob": resealed(items, lying),
        "provenance incomplete": resealed(items, orphaned),
        "path traversal": {**items, "../../evil": b"x"},
        "traversal inside blobs": {**items, "blobs/../../evil": b"x"},
        "absolute path": {**items, "/tmp/evil": b"x"},
        "blob named by a wrong hash": {**{k: v for k, v in items.items() if k != blob}, "blobs/" + "b" * 64: items[blob]},
    }
    paths = {name: write_tar(tmp_path / f"case{i}.tar", list(c.items())) for i, (name, c) in enumerate(cases.items())}
    paths["symlink member"] = write_tar(tmp_path / "link.tar", list(items.items()), [link])
    (tmp_path / "truncated.tar").write_bytes(raw[: len(raw) * 2 // 3])
    paths["truncated"] = tmp_path / "truncated.tar"
    (tmp_path / "garbage.tar").write_bytes(b"\x89PNG not a tar at all" * 40)
    paths["not a tar"] = tmp_path / "garbage.tar"
    paths["no such file"] = tmp_path / "missing.tar"
    assert manifest["format"] == bundle_formats.FORMAT

    dst_store = LocalStore(tmp_path / "dst")
    with Catalog(catalog_url) as dst:
        for name, path in paths.items():
            with pytest.raises(GalahadError) as err:
                import_bundle(dst, dst_store, path, trust_unsigned=True)
            assert "\n" not in str(err.value), name
            assert list(dst_store.ids()) == [] and not dst_store.root.exists(), name
            s = dst.stats()
            assert (s["problems"], s["artifacts"], s["attempts"], s["libraries"]) == (0, 0, 0, 0), name
        import_bundle(dst, dst_store, good, trust_unsigned=True)  # and the untampered bundle still goes in
        assert dst.stats()["artifacts"] == 4


def test_bundle_that_conflicts_with_the_catalog_is_refused(catalog_url, make_catalog_url, tmp_path):
    with Catalog(make_catalog_url("sqlite")) as src:
        src_store = LocalStore(tmp_path / "src")
        W.populate(src, src_store)
        export_bundle(src, src_store, tmp_path / "b.galahad")
    with Catalog(catalog_url) as dst:
        dst_store = LocalStore(tmp_path / "dst")
        other_id, other = W.make_artifact(seed=777)
        dst.artifacts.deposit(dst_store, dst_store.put(other), library="arith")  # same library name, different first artifact
        with pytest.raises(GalahadError, match="conflicts"):
            import_bundle(dst, dst_store, tmp_path / "b.galahad", trust_unsigned=True)
        assert list(dst_store.ids()) == [other_id] and dst.stats()["artifacts"] == 1


# --- format 2: the rest of memory travels (recall rows, problem keys, runtime facts) -----------------

FACTS = {"torch": "2.13.0", "cpu": {"model": "167"}, "env": {"MKL_CBWR": "AVX2,STRICT"}}


def _recall_artifact(problem_id: str, verification_id: str, seed: int) -> tuple[str, bytes]:
    """A recall artifact as the learner deposits one: a root whose header names its problem and verdict."""
    import torch

    from galahad.flywheel.artifacts.format import ArtifactMeta, encode

    g = torch.Generator().manual_seed(seed)
    meta = ArtifactMeta(token_ids=(5, 6, 7), start=0, parent=None, model_fingerprint=W.FP_MODEL,
                        runtime_fingerprint=W.FP_RUNTIME, layer_kinds=("full", "full"), dtype="float32",
                        extra={"problem_id": problem_id, "verification_id": verification_id, "role": "recall"})
    return encode(meta, [torch.randn(1, 1, 3, 8, generator=g) for _ in range(2)],
                  [torch.randn(1, 1, 3, 8, generator=g) for _ in range(2)])


def _with_memory(cat: Catalog, store: LocalStore) -> dict:
    """`populate` plus what a learning run also writes: two recall artifacts and the runtime's facts."""
    from galahad.flywheel.catalog.bundle_memory import runtime_hash

    ids = W.populate(cat, store)
    ids["recalls"] = []
    for pid, ver, seed in ((ids["problems"][0], ids["verification"], 11), (ids["problems"][1], ids["verification2"], 12)):
        aid, data = _recall_artifact(pid, ver, seed)
        cat.artifacts.deposit(store, store.put(data), recall=(pid, ver))
        ids["recalls"].append(aid)
    cat.runtimes.record(runtime_hash(FACTS), FACTS)
    return ids


def _as_format_1(items: dict[str, bytes]) -> dict[str, bytes]:
    """The same bundle as the format-1 writer made it: no memory tables, no migration-0004 columns."""
    manifest = json.loads(items["manifest.json"])
    manifest["format"] = "galahad-bundle/1"
    for t in ("problem_keys", "recalls", "runtimes"):
        del manifest["tables"][t]
    for a in manifest["tables"]["artifacts"]:
        del a["recompiled_from"], a["extra"]
    return resealed(items, manifest)


def test_bundle_v2_carries_recall_rows_and_keys(catalog_url, make_catalog_url, tmp_path):
    """A fresh catalog answers a learned problem's recurrence by hash and by key right after the import."""
    src_store, bundle = LocalStore(tmp_path / "a"), tmp_path / "v2.galahad"
    with Catalog(make_catalog_url("sqlite")) as src:
        ids = _with_memory(src, src_store)
        export_bundle(src, src_store, bundle)
        want = canonical_rows(src)
    manifest = json.loads(members(bundle)["manifest.json"])
    assert manifest["format"] == bundle_formats.FORMAT and len(manifest["tables"]["recalls"]) == 2
    assert len(manifest["tables"]["problem_keys"]) == 2 and len(manifest["tables"]["runtimes"]) == 1
    fps = (W.FP_MODEL, W.FP_RUNTIME)
    with Catalog(catalog_url) as dst:
        out = import_bundle(dst, LocalStore(tmp_path / "b"), bundle, trust_unsigned=True)
        assert out["added"]["recalls"] == 2 and out["added"]["problem_keys"] == 2
        got = canonical_rows(dst)
        assert got["recalls"] == {r for r in want["recalls"]} and got["runtimes"] == want["runtimes"]
        assert got["problem_keys"] <= want["problem_keys"]
        assert dst.recalls.get(ids["problems"][0], fps)["artifact_id"] == ids["recalls"][0]  # by hash
        key = dst.problems.key(ids["problems"][1])["canonical_key"]
        assert key and [r["artifact_id"] for r in dst.recalls.by_key(key, fps)] == [ids["recalls"][1]]  # by key
        assert dst.recalls.missing() == []  # nothing left for a run to reconcile
        assert dst.runtimes.facts(manifest["tables"]["runtimes"][0]["fingerprint"]) == FACTS


def test_format_1_bundles_still_import(make_catalog_url, tmp_path):
    src_store, bundle = LocalStore(tmp_path / "a"), tmp_path / "v2.galahad"
    with Catalog(make_catalog_url("sqlite")) as src:
        ids = _with_memory(src, src_store)
        export_bundle(src, src_store, bundle)
    old = write_tar(tmp_path / "v1.galahad", sorted(_as_format_1(members(bundle)).items()))
    with Catalog(make_catalog_url("postgresql")) as dst:
        out = import_bundle(dst, LocalStore(tmp_path / "b"), old, trust_unsigned=True)
        assert out["added"]["artifacts"] == 6
        # keys are computed and recall rows derived from the recall artifacts' own headers
        fps = (W.FP_MODEL, W.FP_RUNTIME)
        assert [dst.recalls.get(p, fps)["artifact_id"] for p in ids["problems"][:2]] == ids["recalls"]
        assert dst.problems.key(ids["problems"][0]) is not None
        assert dst.artifacts.get(ids["recalls"][0])["extra"]["role"] == "recall"  # the header's extra, on the row


def test_bundle_v2_memory_rows_that_lie_are_refused(make_catalog_url, tmp_path):
    src_store, bundle = LocalStore(tmp_path / "a"), tmp_path / "v2.galahad"
    with Catalog(make_catalog_url("sqlite")) as src:
        ids = _with_memory(src, src_store)
        export_bundle(src, src_store, bundle)
    items = members(bundle)
    cases = {}
    m = json.loads(items["manifest.json"])
    for r in m["tables"]["recalls"]:  # problem 0's recall served by problem 1's verdict
        r["verification_id"] = ids["verification2"]
    cases["recall names another problem's verdict"] = (m, "not an accepted solution")
    m = json.loads(items["manifest.json"])
    m["tables"]["problem_keys"][0]["canonical_key"] = "e:+(1,1)"
    cases["key that is not its text's"] = (m, "not the key of its text")
    m = json.loads(items["manifest.json"])
    m["tables"]["runtimes"][0]["facts"]["torch"] = "9.9"
    cases["runtime facts that do not hash to their fingerprint"] = (m, "not the hash of its facts")
    m = json.loads(items["manifest.json"])
    m["tables"]["recalls"][0]["artifact_id"] = ids["chain"][1]
    cases["recall served by a chain segment"] = (m, "not a root")
    m = json.loads(items["manifest.json"])
    m["tables"]["recalls"][0]["artifact_id"], m["tables"]["recalls"][1]["artifact_id"] = (
        m["tables"]["recalls"][1]["artifact_id"], m["tables"]["recalls"][0]["artifact_id"])
    cases["recall whose artifact header names another problem"] = (m, "header names another problem")
    with Catalog(make_catalog_url("sqlite")) as dst:
        dst_store = LocalStore(tmp_path / "dst")
        for i, (name, (manifest, match)) in enumerate(cases.items()):
            path = write_tar(tmp_path / f"lie{i}.tar", list(resealed(items, manifest).items()))
            with pytest.raises(GalahadError, match=match):
                import_bundle(dst, dst_store, path, trust_unsigned=True)
            assert dst.stats()["artifacts"] == 0 and list(dst_store.ids()) == [], name


@pytest.mark.slow
def test_import_into_a_fresh_data_dir_recalls_with_no_run_between(tmp_path, model_cache, monkeypatch):
    """Learn, export, import into a fresh catalog and store: every learned problem is recalled by hash at
    once, with the same output bytes; `import --recompile` under another runtime does the same there."""
    import os
    import subprocess

    from local_depositor import LocalDepositor
    from test_recompile import OTHER_ENV, PROBLEMS, learn, recalled

    from galahad.flywheel.memory.solver import Solver
    from galahad.workers.engine import Engine
    from galahad.workers.runtime import DEFAULT_RUNTIME

    (tmp_path / "a").mkdir()
    dep: LocalDepositor = learn(tmp_path / "a", model_cache)
    try:
        before = recalled(Solver(dep.engine, dep.catalog, dep.store))
        export_bundle(dep.catalog, dep.store, tmp_path / "memory.galahad")
    finally:
        dep.catalog.close()
    assert [p for p, _, _ in before] == ["hash"] * len(PROBLEMS)
    with Catalog(f"sqlite:///{tmp_path / 'fresh.sqlite3'}") as fresh:
        store = LocalStore(tmp_path / "fresh-store")
        import_bundle(fresh, store, tmp_path / "memory.galahad", trust_unsigned=True)
        assert recalled(Solver(dep.engine, fresh, store)) == before  # the same artifacts, the same bytes out
    url = f"sqlite:///{tmp_path / 'moved.sqlite3'}"
    cli = [sys.executable, "-m", "galahad.flywheel.cli.main", "--data", str(tmp_path / "d"), "catalog", "--catalog",
           url, "--store", str(tmp_path / "moved-store"), "import", str(tmp_path / "memory.galahad"), "--recompile", "--trust-unsigned",
           "--model", "tiny", "--json"]
    done = subprocess.run(cli, env={**os.environ, **OTHER_ENV, "GALAHAD_MODEL_CACHE": str(model_cache)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["recompile"]["rebuilt"] == 6
    for k, v in OTHER_ENV.items():
        monkeypatch.setenv(k, v)
    with Catalog(url) as moved:
        after = recalled(Solver(Engine(dep.engine.loaded, DEFAULT_RUNTIME), moved, LocalStore(tmp_path / "moved-store")))
    assert [(p, t) for p, t, _ in after] == [(p, t) for p, t, _ in before]
