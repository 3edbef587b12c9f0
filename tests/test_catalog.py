"""Catalog API on SQLite and PostgreSQL: migrations vs models, problems, the work queue, deposits,
provenance/lineage, libraries, views, stats."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, inspect, text

from galahad.flywheel.artifacts.store import LocalStore, sha256_hex
from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.catalog.db import alembic_config
from galahad.flywheel.catalog.fsck import gc
from galahad.flywheel.catalog.schema import NAMING_CONVENTION, Base
from galahad.flywheel.errors import GalahadError

sys.path.insert(0, str(Path(__file__).parent))
import test_catalog_workers as W  # noqa: E402

VIEWS = {"verified_solutions", "artifact_contents", "library_tokens", "problem_progress"}


@pytest.fixture
def cat(catalog_url):
    with Catalog(catalog_url) as c:
        yield c


@pytest.fixture
def store(tmp_path):
    return LocalStore(tmp_path / "store")


def test_migrations_match_models_and_views_exist(cat):
    cfg = alembic_config()
    with cat.engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.check(cfg)  # raises when models and migrations drift apart
        mc = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(mc, Base.metadata) == []
        # The check has teeth: a model column the migrations lack is reported.
        drifted = MetaData(naming_convention=NAMING_CONVENTION)
        for t in Base.metadata.tables.values():
            t.to_metadata(drifted)
        drifted.tables["artifacts"].append_column(Column("not_migrated", Integer))
        diffs = compare_metadata(mc, drifted)
        assert [d[0] for d in diffs] == ["add_column"] and diffs[0][3].name == "not_migrated"
        assert VIEWS <= set(inspect(conn).get_view_names())


def test_migrations_downgrade_and_upgrade_again(cat):
    cfg = alembic_config()
    with cat.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
        assert not (set(inspect(conn).get_table_names()) - {"alembic_version"})
        command.upgrade(cfg, "head")
        assert {"problems", "artifacts", "library_entries"} <= set(inspect(conn).get_table_names())


def test_problems_are_deduplicated_by_normalized_text(cat):
    a = cat.problems.add("What is 2 + 3?", "5", "unit", "arith", "t0")
    b = cat.problems.add("  what IS 2   +\n3? ", "5", "unit", "arith", "t0")
    assert a == b == problem_hash("WHAT is 2 + 3?")
    assert a == hashlib.sha256(b"what is 2 + 3?").hexdigest()
    assert cat.stats()["problems"] == 1
    assert cat.problems.by_hash(a)["text"] == "What is 2 + 3?"  # the first text is kept
    assert cat.problems.by_hash("0" * 64) is None
    with pytest.raises(GalahadError, match="unknown problem"):
        cat.problems.get("0" * 64)
    with pytest.raises(GalahadError, match="non-empty"):
        cat.problems.add("   ", "1", "unit", "arith")


def test_find_problems(cat):
    ids = cat.problems.add_many([
        dict(text=f"What is {i} + {i}?", answer=str(2 * i), source="unit", topic="add" if i % 2 else "mul",
             template=f"tpl{i % 3}") for i in range(6)
    ])
    assert [p["id"] for p in cat.problems.find(text="what is 3 + 3?")] == [ids[3]]  # same normalized text
    assert {p["id"] for p in cat.problems.find(text="+ 1")} == {ids[1]}  # substring
    assert [p["id"] for p in cat.problems.find(hash=ids[4][:10])] == [ids[4]]
    assert {p["id"] for p in cat.problems.find(topic="add")} == {ids[1], ids[3], ids[5]}
    assert {p["id"] for p in cat.problems.find(topic="tpl0")} == {ids[0], ids[3]}
    assert cat.problems.find(text="nothing like it") == []
    with pytest.raises(GalahadError):
        cat.problems.find(hash="../../etc")


def test_claim_hands_each_problem_out_once_and_leases_expire(cat):
    ids = cat.problems.add_many([dict(text=f"q{i}", answer="1", source="u", topic="t") for i in range(10)])
    first = cat.queue.claim(4, "a", lease_seconds=600)
    second = cat.queue.claim(10, "b", lease_seconds=600)
    assert len(first) == 4 and len(second) == 6
    assert {p["id"] for p in first} | {p["id"] for p in second} == set(ids)
    assert all(p["status"] == "claimed" and p["claimed_by"] == "a" for p in first)
    assert cat.queue.claim(5, "c", lease_seconds=600) == []
    # A worker that died holds its problems only until the lease runs out.
    dead = cat.problems.add_many([dict(text=f"r{i}", answer="1", source="u", topic="t") for i in range(3)])
    assert {p["id"] for p in cat.queue.claim(3, "dead", lease_seconds=0)} == set(dead)
    resumed = cat.queue.claim(10, "alive", lease_seconds=600)
    assert {p["id"] for p in resumed} == set(dead) and all(p["claims"] == 2 for p in resumed)
    assert cat.queue.extend_lease([p["id"] for p in first], "a", 900) == 4
    assert cat.queue.extend_lease([p["id"] for p in first], "b", 900) == 0
    cat.queue.mark(ids[0], "pending")
    assert [p["id"] for p in cat.queue.claim(5, "d", 600)] == [ids[0]]
    cat.queue.mark(ids[0], "failed")
    cat.queue.mark(ids[1], "verified")
    assert cat.stats()["by_status"] == {"claimed": 11, "failed": 1, "verified": 1}
    with pytest.raises(GalahadError, match="cannot mark"):
        cat.queue.mark(ids[2], "claimed")
    with pytest.raises(GalahadError, match="unknown problem"):
        cat.queue.mark("f" * 64, "failed")


def test_deposit_provenance_lineage_and_verified_solution(cat, store):
    ids = W.populate(cat, store)
    last = ids["chain"][-1]
    lin = cat.artifacts.lineage(last)
    assert lin["artifact"]["id"] == last and "token_ids" not in lin["artifact"]
    assert lin["verification"]["id"] == ids["verification"] and lin["verification"]["verified"] is True
    assert lin["attempt"]["id"] == ids["attempt"] and lin["attempt"]["output_text"] == "5"
    assert lin["problem"]["id"] == ids["problems"][0]
    assert lin["run"]["id"] == ids["run"] and lin["run"]["summary"] == {"verified": 2}
    assert [p["id"] for p in lin["parents"]] == ids["chain"][1::-1]
    assert lin["libraries"] == [{"library": "arith", "chain_index": 0, "position": 2}]
    root = cat.artifacts.lineage(ids["chain"][0])
    assert root["verification"] is None and root["parents"] == []
    best = cat.runs.verified_solution(ids["problems"][0])
    assert best["id"] == ids["attempt"] and best["artifact_id"] == last
    assert cat.runs.verified_solution(ids["problems"][2]) is None
    row = cat.artifacts.get(last)
    assert (row["token_start"], row["token_end"], row["n_tokens"]) == (8, 12, 4)
    assert row["model_fingerprint"] == W.FP_MODEL and len(row["token_ids"]) == 4
    assert sha256_hex(store.get(last)) == last and store.size(last) == row["size"]
    p0 = [a for a in cat.runs.attempts(ids["problems"][0])]
    assert [[v["verified"] for v in a["verifications"]] for a in p0] == [[False], [True]]


def test_same_content_is_one_row_and_bad_deposits_record_nothing(cat, store):
    aid, data = W.make_artifact(seed=1)
    assert cat.artifacts.deposit(store, store.put(data)) == aid  # the depositor puts the blob; the catalog records its row
    assert cat.artifacts.deposit(store, aid) == aid
    assert cat.stats()["artifacts"] == 1
    orphan_parent, _ = W.make_artifact(seed=2)
    child_id, child = W.make_artifact(parent=orphan_parent, start=4, seed=3)
    with pytest.raises(GalahadError, match="unknown parent artifact"):
        cat.artifacts.deposit(store, store.put(child))
    junk = store.put(b"\x00" * 64)
    with pytest.raises(GalahadError, match="not a Galahad artifact"):
        cat.artifacts.deposit(store, junk)
    unverified = store.put(W.make_artifact(seed=4)[1])
    with pytest.raises(GalahadError, match="unknown verification"):
        cat.artifacts.deposit(store, unverified, verification_id="0" * 32)
    never_put, _ = W.make_artifact(seed=5)
    with pytest.raises(GalahadError, match="missing"):  # no row may point at nothing
        cat.artifacts.deposit(store, never_put)
    rotten_id, rotten = W.make_artifact(seed=6)
    store.put(rotten)
    store.path(rotten_id).write_bytes(rotten[:-1] + bytes([rotten[-1] ^ 1]))
    with pytest.raises(GalahadError, match="corrupted"):  # the row must be what the stored bytes say
        cat.artifacts.deposit(store, rotten_id)
    assert cat.stats()["artifacts"] == 1
    # What the refused deposits put is garbage without a row: gc's to collect (it refuses a mass delete
    # unless forced), never a row.
    assert sorted(gc(cat, store, grace_seconds=0, force=True)["removed_orphans"]) == sorted(
        [child_id, junk, unverified, rotten_id])
    assert list(store.ids()) == [aid]
    with pytest.raises(GalahadError, match="unknown artifact"):
        cat.artifacts.get("a" * 64)
    with pytest.raises(GalahadError, match="not a valid artifact id"):
        cat.artifacts.get("../" + "a" * 61)


def test_library_chains(cat, store):
    ids = W.populate(cat, store)
    assert cat.libraries.chain("arith", 0) == ids["chain"]
    assert cat.libraries.chain("arith") == ids["second_chain"]  # default: the current chain
    assert W.chains(cat, "arith") == [ids["chain"], ids["second_chain"]]
    tail = cat.libraries.tail("arith")
    assert tail["id"] == ids["second_chain"][0] and (tail["chain_index"], tail["position"]) == (1, 0)
    assert cat.libraries.tail("arith", 0)["id"] == ids["chain"][-1]
    assert cat.libraries.tail("nope") is None and cat.libraries.chain("nope") == []
    # routing's one statement over several libraries: the first with a chain made under the fingerprints
    fps = (W.FP_MODEL, W.FP_RUNTIME)
    assert cat.libraries.first_chain(["nope", "arith"], fps) == ("arith", cat.libraries.chain("arith", fingerprints=fps))
    assert cat.libraries.first_chain(["nope"], fps) is None and cat.libraries.first_chain([], fps) is None
    assert cat.libraries.first_chain(["arith"], ("0" * 64, W.FP_RUNTIME)) is None  # another model's chains
    # Appending must extend the tail; the same artifact again is a no-op.
    stray_id, stray = W.make_artifact(seed=300)
    cat.artifacts.deposit(store, store.put(stray))
    with pytest.raises(GalahadError, match="does not extend library"):
        cat.artifacts.deposit(store, stray_id, library="arith")

    def place(aid: str) -> list[tuple[int, int]]:
        return [(r["chain_index"], r["position"]) for r in cat.artifacts.lineage(aid)["libraries"]]

    assert place(stray_id) == []
    nxt_id, nxt = W.make_artifact(parent=ids["second_chain"][0], start=6, seed=301)
    cat.artifacts.deposit(store, store.put(nxt))
    cat.artifacts.deposit(store, nxt_id, library="arith")
    assert place(nxt_id) == [(1, 1)]
    cat.artifacts.deposit(store, nxt_id, library="arith")
    assert place(nxt_id) == [(1, 1)]
    cat.artifacts.deposit(store, stray_id, library="arith", new_chain=True)
    assert place(stray_id) == [(2, 0)]
    libs = cat.libraries.all()
    assert len(libs) == 1 and libs[0]["library"] == "arith"
    assert (libs[0]["chains"], libs[0]["artifacts"], libs[0]["stored_tokens"]) == (3, 6, 4 * 3 + 6 + 4 + 4)
    with pytest.raises(GalahadError, match="library name"):
        cat.libraries.ensure("")


def test_views_answer_common_questions(cat, store):
    ids = W.populate(cat, store)
    with cat.engine.connect() as conn:
        verified = conn.execute(text("SELECT problem_id, artifact_id, verifier_version FROM verified_solutions "
                                     "ORDER BY problem_id")).all()
        assert {(r.problem_id, r.artifact_id) for r in verified} == {
            (ids["problems"][0], ids["chain"][-1]), (ids["problems"][1], ids["second_chain"][0])}
        held = conn.execute(text("SELECT * FROM artifact_contents WHERE artifact_id = :a"),
                            {"a": ids["chain"][-1]}).one()
        assert (held.n_tokens, held.library, held.position, held.problem_id, held.solution_text) == (
            4, "arith", 2, ids["problems"][0], "5")
        lib = conn.execute(text("SELECT * FROM library_tokens")).one()
        assert (lib.library, lib.chains, lib.artifacts, lib.stored_tokens) == ("arith", 2, 4, 18)
        assert lib.bytes == sum(store.size(a) for a in ids["chain"] + ids["second_chain"])
        progress = {(r.status, r.problems) for r in conn.execute(text("SELECT status, SUM(problems) AS problems "
                                                                       "FROM problem_progress GROUP BY status"))}
        assert progress == {("verified", 2), ("pending", 1)}


def test_stats_and_runs(cat, store):
    ids = W.populate(cat, store)
    s = cat.stats()
    all_ids = ids["chain"] + ids["second_chain"]
    assert {k: s[k] for k in ("problems", "verified", "artifacts", "stored_tokens", "bytes")} == {
        "problems": 3, "verified": 2, "artifacts": 4, "stored_tokens": 18,
        "bytes": sum(store.size(a) for a in all_ids)}
    assert (s["attempts"], s["verifications"], s["libraries"], s["runs"]) == (3, 3, 1, 1)
    run = cat.runs.get(ids["run"])
    assert run["config"] == {"model": "tiny", "seed": 1} and run["finished_at"] >= run["started_at"]
    assert [r["id"] for r in cat.runs.recent()] == [ids["run"]]
    with pytest.raises(GalahadError, match="unknown run"):
        cat.runs.finish("0" * 32, {})
    with pytest.raises(GalahadError, match="unknown problem"):
        cat.runs.add_attempt("0" * 64, None, W.FP_MODEL, {}, "", 0, 0.0, 0.0)
    with pytest.raises(GalahadError, match="unknown attempt"):
        cat.runs.add_verification("0" * 32, "v1", True, "")
    assert cat.resolve(ids["chain"][0][:12]) == ("artifact", ids["chain"][0])
    assert cat.resolve(ids["problems"][1]) == ("problem", ids["problems"][1])
    with pytest.raises(GalahadError, match="unknown id"):
        cat.resolve("0" * 64)


def test_catalog_from_a_newer_galahad_is_refused(catalog_url):
    with Catalog(catalog_url) as cat, cat.write() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    with pytest.raises(GalahadError, match="not one this Galahad knows") as err:
        Catalog(catalog_url)
    assert "\n" not in str(err.value)


def test_deposit_many(cat, store):
    chain = W.make_chain(5, seed=900)
    blobs = [d for _, d in chain]
    ids = store.put_many(blobs + blobs[:1])
    assert cat.artifacts.deposit_many(store, ids, library="bulk") == [a for a, _ in chain] + [chain[0][0]]
    assert cat.libraries.chain("bulk") == [a for a, _ in chain] and cat.stats()["artifacts"] == 5
    assert all(sha256_hex(store.get(a)) == a for a, _ in chain)
    orphan_parent, _ = W.make_artifact(seed=901)
    child_id, child = W.make_artifact(parent=orphan_parent, start=4, seed=902)
    loose_id, loose = W.make_artifact(seed=903)
    with pytest.raises(GalahadError, match="unknown parent artifact"):
        cat.artifacts.deposit_many(store, store.put_many([loose, child]))
    assert cat.stats()["artifacts"] == 5 and not cat.artifacts.has(loose_id)  # no row, not even the loose one's
    with pytest.raises(GalahadError, match="missing"):
        cat.artifacts.deposit_many(store, [W.make_artifact(seed=904)[0]])  # never put
    assert cat.stats()["artifacts"] == 5


def test_model_output_with_nul_bytes_is_stored_on_both_backends(catalog_url):
    from galahad.flywheel.catalog import Catalog

    with Catalog(catalog_url) as cat:
        pid = cat.problems.add("What is 1 + 1?", "2", "test", "t")
        aid = cat.runs.add_attempt(pid, None, "fp", {}, "2\x00junk", 3, 0.0, 0.0)
        cat.runs.add_verification(aid, "v", False, "not verified: bad\x00answer")
        (row,) = cat.runs.attempts(pid)
        assert row["output_text"] == "2\ufffdjunk"
        assert row["verifications"][0]["reason"] == "not verified: bad\ufffdanswer"
