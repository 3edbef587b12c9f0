"""Bundles exported by earlier releases (tests/data/bundles/, each made by the commit its name gives; see the
README there) import into today's catalog on both backends: the columns added since are defaulted as their
migrations did, the import says so in one line, and every learned problem is recalled by hash (catalog
lookup, then the artifact's bytes hash-checked from the store). The fixtures' artifacts are made under a
synthetic model fingerprint (the old commits' `test_catalog_workers.populate`), so no model grafts them.
A bundle newer than this Galahad is refused in one line naming both versions; an old bundle that lies is
refused for its lie, never for its age."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from galahad.flywheel.artifacts.store import LocalStore, sha256_hex
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.bundle import import_bundle
from galahad.flywheel.catalog.bundle_formats import FORMAT, VERSION
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.cli.main import main
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.solver import Solver
from galahad.flywheel.problems.records import problem_hash

sys.path.insert(0, str(Path(__file__).parent))
from test_catalog_bundle import members, resealed, write_tar  # noqa: E402

DATA = Path(__file__).parent / "data" / "bundles"
FP = ("m0del" + "0" * 59, "runt" + "1" * 60)  # the fixtures' model and runtime fingerprints


class FixtureModel:
    """What routing reads of an engine: its fingerprints (the fixtures' synthetic model answers nothing)."""

    model_fingerprint, runtime_fingerprint = FP
PROBLEMS = {"What is 2 + 3?": "5", "What is 7 * 6?": "42"}  # what each fixture learned (with a recall artifact)
# fixture -> (format version, columns defaulted on import)
FIXTURES = {
    "v1-f182e85.galahad": (1, 7),  # 2026-12-01 18:31, before migration 0003 (no gold_source)
    "v1-c9a616e.galahad": (1, 6),  # main at the end of 2026-12-01: the release the issue names
    "v2-e7980d6.galahad": (2, 4),  # 2026-12-06, format 2 before migration 0006 (no scopes)
    "v2-4bd2053.galahad": (2, 1),  # 2026-12-07, format 2 with scopes (the tables of format 3); + provenance
}  # each count includes attempts.provenance (format 4), defaulted to `sampled`


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_old_bundle_imports_and_is_recalled(name, catalog_url, tmp_path):
    version, n_defaulted = FIXTURES[name]
    store = LocalStore(tmp_path / "store")
    with Catalog(catalog_url) as cat:
        out = import_bundle(cat, store, DATA / name, trust_unsigned=True)
        assert out["format"] == f"galahad-bundle/{version}" and len(out["defaulted"]) == n_defaulted
        line = out["upgraded"]
        assert "\n" not in line and line.startswith(f"bundle from an older catalog (galahad-bundle/{version}, ")
        assert f": {n_defaulted} columns defaulted" in line and FORMAT in line
        assert out["added"]["artifacts"] == 6 and out["added"]["recalls"] == 2
        with cat.engine.connect() as conn:
            scopes = {r.scope for t in ("problems", "artifacts", "libraries") for r in conn.execute(select(TABLES[t]))}
        assert scopes == {"shared"}
        for text, answer in PROBLEMS.items():
            pid = problem_hash(text)
            (row,) = cat.problems.by_ids([pid])
            assert row["answer"] == answer and row["status"] in ("pending", "verified")
            recall = cat.recalls.get(pid, FP)  # recall by hash: the row, then the bytes, hash-checked
            assert recall is not None and sha256_hex(store.get(recall["artifact_id"])) == recall["artifact_id"]
            assert cat.artifacts.get(recall["artifact_id"])["extra"]["problem_id"] == pid
            route = next(iter(Solver(FixtureModel(), cat, store).routes(text)))  # the solver's first route
            assert (route.path, route.tail, route.gold) == ("hash", recall["artifact_id"], answer)
        again = import_bundle(cat, store, DATA / name, trust_unsigned=True)  # idempotent
        assert set(again["added"].values()) == {0}


def test_cli_says_so_in_one_line(tmp_path, capsys):
    """`galahad catalog import` of the 2026-12-01 release's bundle: the defaulted columns, then the import."""
    (tmp_path / "c").mkdir()
    argv = ["--data", str(tmp_path / "d"), "catalog", "--catalog", f"sqlite:///{tmp_path / 'c' / 'c.sqlite3'}",
            "--store", str(tmp_path / "s"), "import", str(DATA / "v1-c9a616e.galahad"), "--trust-unsigned"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"bundle from an older catalog (galahad-bundle/1, this is {FORMAT}): 6 columns defaulted "
                        "(artifacts.extra, artifacts.recompiled_from, artifacts.scope, attempts.provenance, libraries.scope, "
                        "problems.scope); its rows are in scope shared")
    assert lines[1].startswith("imported ") and len(lines) == 2


def test_newer_bundle_is_refused_naming_both_versions(make_catalog_url, tmp_path):
    items = members(DATA / "v2-4bd2053.galahad")
    manifest = json.loads(items["manifest.json"])
    manifest["format"] = f"galahad-bundle/{VERSION + 1}"
    path = write_tar(tmp_path / "newer.galahad", sorted(resealed(items, manifest).items()))
    store = LocalStore(tmp_path / "store")
    with Catalog(make_catalog_url("sqlite")) as cat:
        with pytest.raises(GalahadError) as err:
            import_bundle(cat, store, path)  # refused for its version before its (missing) signature
        msg = str(err.value)
        assert "\n" not in msg and f"galahad-bundle/{VERSION + 1}" in msg and FORMAT in msg and "newer" in msg
        assert cat.stats()["artifacts"] == 0 and list(store.ids()) == []


def _lies(manifest: dict) -> dict[str, tuple[dict, str]]:
    """Ways an old bundle can be wrong, each with what its refusal must say."""
    cases = {}
    m = json.loads(json.dumps(manifest))
    m["tables"]["problems"][0]["text"] = "What is 9 + 9?"
    cases["problem text that is not its id's"] = (m, "not the hash of its text")
    m = json.loads(json.dumps(manifest))
    del m["tables"]["problems"][0]["answer"]
    cases["a column it always had, missing"] = (m, "does not have the expected columns")
    m = json.loads(json.dumps(manifest))
    m["tables"]["problems"][0]["colour"] = "red"
    cases["a column no version has"] = (m, "does not have the expected columns")
    m = json.loads(json.dumps(manifest))
    m["tables"]["artifacts"][0]["token_end"] += 1
    cases["artifact row that disagrees with its bytes"] = (m, "disagrees with its bytes")
    m = json.loads(json.dumps(manifest))
    m["format"] = FORMAT
    for t in ("problem_keys", "recalls", "runtimes"):
        m["tables"].setdefault(t, [])
    if "scope" not in m["tables"]["problems"][0]:  # a current-format bundle must carry every column
        cases["current format without its scopes"] = (m, "does not have the expected columns")
    return cases


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_old_bundles_that_lie_are_refused_for_the_lie(name, make_catalog_url, tmp_path):
    items = members(DATA / name)
    manifest = json.loads(items["manifest.json"])
    store = LocalStore(tmp_path / "store")
    with Catalog(make_catalog_url("sqlite")) as cat:
        for i, (case, (m, match)) in enumerate(_lies(manifest).items()):
            path = write_tar(tmp_path / f"lie{i}.galahad", sorted(resealed(items, m).items()))
            with pytest.raises(GalahadError, match=match):
                import_bundle(cat, store, path, trust_unsigned=True)
            assert cat.stats()["artifacts"] == 0 and list(store.ids()) == [], case
