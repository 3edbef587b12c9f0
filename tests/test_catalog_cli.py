"""`galahad catalog ...` through the real entry point: tables, --json, exit codes, one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.cli.main import main

sys.path.insert(0, str(Path(__file__).parent))
import test_catalog_workers as W  # noqa: E402


@pytest.fixture
def data(catalog_url, tmp_path):
    """A data dir whose store is populated, with the catalog at `catalog_url`."""
    root = tmp_path / "data"
    with Catalog(catalog_url) as cat:
        ids = W.populate(cat, LocalStore(root / "store"))
    return root, catalog_url, ids


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cat_args(root: Path, url: str, *rest: str) -> list[str]:
    return ["--data", str(root), "catalog", "--catalog", url, *rest]


def one_line_error(code: int, err: str) -> bool:
    return code == 2 and err.startswith("galahad: error: ") and err.count("\n") == 1


def test_stats_json_and_table(data, capsys):
    root, url, ids = data
    code, out, _ = run(capsys, *cat_args(root, url, "stats", "--json"))
    s = json.loads(out)
    assert code == 0 and (s["problems"], s["verified"], s["artifacts"], s["stored_tokens"]) == (3, 2, 4, 18)
    assert s["bytes"] == sum(LocalStore(root / "store").size(a) for a in ids["chain"] + ids["second_chain"])
    code, out, _ = run(capsys, *cat_args(root, url, "stats"))
    assert code == 0 and "stored_tokens" in out and "18" in out


def test_ls_show_find_libraries(data, capsys):
    root, url, ids = data
    code, out, _ = run(capsys, *cat_args(root, url, "ls", "--json"))
    assert code == 0 and {r["id"] for r in json.loads(out)} == set(ids["chain"] + ids["second_chain"])
    code, out, _ = run(capsys, *cat_args(root, url, "ls", "--library", "arith"))
    assert code == 0 and out.count("\n") == 5 and ids["chain"][0][:15] in out
    code, out, _ = run(capsys, *cat_args(root, url, "show", ids["chain"][-1][:12], "--json"))
    shown = json.loads(out)
    assert code == 0 and shown["kind"] == "artifact" and shown["problem"]["id"] == ids["problems"][0]
    assert [p["id"] for p in shown["parents"]] == ids["chain"][1::-1]
    code, out, _ = run(capsys, *cat_args(root, url, "show", ids["chain"][-1]))
    assert code == 0 and "verification:" in out and "numeric match" in out and "What is 2 + 3?" in out
    code, out, _ = run(capsys, *cat_args(root, url, "show", ids["problems"][0]))
    assert code == 0 and "expected 5, got 6" in out and ids["chain"][-1] in out
    code, out, _ = run(capsys, *cat_args(root, url, "find", "7 * 6", "--json"))
    assert code == 0 and [p["id"] for p in json.loads(out)] == [ids["problems"][1]]
    code, out, _ = run(capsys, *cat_args(root, url, "find", "--topic", "t0", "--json"))
    assert code == 0 and {p["id"] for p in json.loads(out)} == {ids["problems"][0], ids["problems"][2]}
    code, out, _ = run(capsys, *cat_args(root, url, "find", "--hash", ids["problems"][2][:9]))
    assert code == 0 and "Solve x + 1 = 4" in out
    code, out, _ = run(capsys, *cat_args(root, url, "libraries", "--json"))
    assert code == 0 and json.loads(out)[0]["stored_tokens"] == 18
    code, out, _ = run(capsys, *cat_args(root, url, "runs", "--json"))
    assert code == 0 and [r["id"] for r in json.loads(out)] == [ids["run"]]
    code, out, _ = run(capsys, *cat_args(root, url, "runs", "--limit", "1"))
    assert code == 0 and ids["run"][:11] in out and out.splitlines()[0].split()[:3] == ["id", "started_at",
                                                                                          "finished_at"]


def test_fsck_exit_codes_and_gc(data, capsys):
    root, url, ids = data
    code, out, _ = run(capsys, *cat_args(root, url, "fsck"))
    assert code == 0 and out.strip().endswith("ok")
    LocalStore(root / "store").put(W.make_artifact(seed=4242)[1])
    code, out, _ = run(capsys, *cat_args(root, url, "fsck", "--json"))
    report = json.loads(out)
    assert code == 1 and len(report["orphans"]) == 1 and not report["damaged"]
    code, out, _ = run(capsys, *cat_args(root, url, "gc", "--grace", "0", "--json"))
    assert code == 0 and json.loads(out)["removed_orphans"] == report["orphans"]
    assert run(capsys, *cat_args(root, url, "fsck"))[0] == 0


def test_export_import_via_cli(data, make_catalog_url, capsys, tmp_path):
    root, url, ids = data
    bundle = tmp_path / "b.galahad"
    assert run(capsys, *cat_args(root, url, "export", str(bundle)))[0] == 0
    code, _, err = run(capsys, *cat_args(root, url, "export", str(bundle)))
    assert one_line_error(code, err) and "already exists" in err
    other = tmp_path / "other"
    code, out, _ = run(capsys, "--data", str(other), "catalog", "import", str(bundle), "--trust-unsigned", "--json")
    assert code == 0 and json.loads(out)["added"]["artifacts"] == 4
    code, out, _ = run(capsys, "--data", str(other), "catalog", "stats", "--json")
    assert json.loads(out)["artifacts"] == 4 and (other / "catalog.sqlite3").is_file()


def test_unknown_ids_and_traversal_are_one_line_errors(data, capsys):
    root, url, ids = data
    for ref in ("ab" * 32, "../../etc/passwd", "zz", "0123abcd"):
        code, out, err = run(capsys, *cat_args(root, url, "show", ref))
        assert one_line_error(code, err) and out == "", ref
    code, _, err = run(capsys, *cat_args(root, url, "find"))
    assert one_line_error(code, err)
    code, _, err = run(capsys, *cat_args(root, url, "ls", "--library", "../nope"))
    assert one_line_error(code, err) and "unknown library" in err


def test_bad_bundle_via_cli_writes_nothing(catalog_url, tmp_path, capsys):
    bad = tmp_path / "bad.galahad"
    bad.write_bytes(b"definitely not a bundle" * 100)
    root = tmp_path / "data"
    for path in (bad, tmp_path / "missing.galahad"):
        code, _, err = run(capsys, *cat_args(root, catalog_url, "import", str(path)))
        assert one_line_error(code, err)
    assert not (root / "store").exists()
    with Catalog(catalog_url) as cat:
        assert cat.stats()["artifacts"] == 0


@pytest.mark.parametrize("url", [
    "postgresql://postgres@127.0.0.1:1/galahad",  # nothing listens on port 1
    "sqlite:////nonexistent-galahad-dir/catalog.sqlite3",
    "nosuchdialect://x/y",
    "not a url at all",
])
def test_unreachable_or_bad_database_url(url, tmp_path, capsys):
    code, out, err = run(capsys, "--data", str(tmp_path / "d"), "catalog", "--catalog", url, "stats")
    assert one_line_error(code, err) and out == ""
    assert not (tmp_path / "d").exists() and not Path("/nonexistent-galahad-dir").exists()


def test_read_only_commands_never_create_a_catalog(tmp_path, capsys):
    code, _, err = run(capsys, "--data", str(tmp_path / "fresh"), "catalog", "stats")
    assert one_line_error(code, err) and "no catalog" in err
    assert not (tmp_path / "fresh").exists()


def test_truncated_listings_say_so_and_how_to_see_more(data, capsys):
    root, url, ids = data
    note = "2 of 4 shown; --limit N or --all for more"
    code, out, err = run(capsys, *cat_args(root, url, "ls", "--limit", "2"))
    assert code == 0 and out.strip().splitlines()[-1] == note and out.count("\n") == 4  # header, 2 rows, note
    code, out, err = run(capsys, *cat_args(root, url, "ls", "--limit", "2", "--json"))
    assert code == 0 and len(json.loads(out)) == 2 and err.strip() == note  # stdout stays one JSON document
    code, out, _ = run(capsys, *cat_args(root, url, "ls", "--all"))
    assert code == 0 and out.count("\n") == 5 and "shown" not in out  # every row, no note
    code, out, _ = run(capsys, *cat_args(root, url, "ls", "--limit", "4"))
    assert code == 0 and "shown" not in out  # exactly all of them: nothing left out
    code, out, _ = run(capsys, *cat_args(root, url, "find", "--topic", "t0", "--limit", "1"))
    assert code == 0 and out.strip().endswith("1 of 2 shown; --limit N or --all for more")
    code, out, _ = run(capsys, *cat_args(root, url, "find", "--status", "verified", "--json"))
    assert code == 0 and len(json.loads(out)) == 2 and {p["status"] for p in json.loads(out)} == {"verified"}
    code, out, _ = run(capsys, *cat_args(root, url, "runs", "--limit", "1"))
    assert code == 0 and "shown" not in out  # one run, one shown
    code, _, err = run(capsys, *cat_args(root, url, "ls", "--limit", "2", "--all"))
    assert one_line_error(code, err)
    code, _, err = run(capsys, *cat_args(root, url, "find", "--status", "finished"))
    assert one_line_error(code, err) and "unknown status" in err
