"""End to end on the real default model: learn, answer by graft, evaluate with evidence, and survive faults.

One learning run (module fixture) feeds the solve/eval tests; the kill-and-resume test has its own data dir.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from galahad.flywheel.catalog import Catalog

pytestmark = pytest.mark.slow  # every test runs `galahad run`/`eval` on the real default model (a minute or more)

GALAHAD = [sys.executable, "-m", "galahad.flywheel.cli.main"]
RUN = ["run", "--families", "add1,lin1", "--per-family", "10", "--k", "8", "--no-progress"]


def galahad(data: Path, *args: str, env=None, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([*GALAHAD, "--data", str(data), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture(scope="module")
def env(model_cache):
    return {**os.environ, "GALAHAD_MODEL_CACHE": str(model_cache)}


@pytest.fixture(scope="module")
def learned(tmp_path_factory, env):
    data = tmp_path_factory.mktemp("learned")
    proc = galahad(data, *RUN, "--limit", "8", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return data, json.loads(proc.stdout.strip().splitlines()[-1])


def _catalog(data: Path) -> Catalog:
    return Catalog(f"sqlite:///{data / 'catalog.sqlite3'}")


def test_run_verifies_deposits_and_catalog_is_consistent(learned, env):
    data, summary = learned
    assert summary["problems"] == 8 and summary["attempted"] >= 8
    solved = summary["verified"] + summary["gold_solutions"]  # sampled, or the computed gold (gold solutions)
    assert summary["verified"] >= 1 and summary["deposited"] == solved
    assert solved + summary["failed"] == 8
    # the generators' own time (what bench/bench_flywheel.py's sampling figures divide by) is inside the loop's
    assert 0 < summary["sampling_seconds"] <= summary["seconds"]
    assert set(summary["nodes"]["generators"]) == {"127.0.0.1"}  # a local cluster stays on loopback
    with _catalog(data) as cat:
        stats = cat.stats()
        # one library artifact and one recall artifact (the solution alone) per verified problem
        assert stats["artifacts"] == 2 * stats["verified"] == 2 * solved
        for p in cat.problems.find(limit=1000):
            sol = cat.runs.verified_solution(p["id"])
            assert (p["status"] == "verified") == (sol is not None and sol["artifact_id"] is not None)
            recall = cat.recalls.get(p["id"])
            assert (p["status"] == "verified") == (recall is not None)
            if recall:
                assert recall["artifact_id"] != sol["artifact_id"]
                assert cat.artifacts.get(recall["artifact_id"])["parent_id"] is None  # a root: alone in context
    fsck = galahad(data, "catalog", "fsck", env=env)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def test_recurrence_is_answered_by_graft_in_a_handful_of_tokens(learned, env):
    data, _ = learned
    with _catalog(data) as cat:
        verified = [p for p in cat.problems.find(limit=1000) if p["status"] == "verified"][:2]
    assert verified
    for p in verified:
        proc = galahad(data, "solve", p["text"], "--json", env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        ans = json.loads(proc.stdout)
        assert {"answer", "path", "decode_tokens", "seconds"} <= ans.keys()
        assert ans["path"] == "hash" and ans["verified"] is True
        assert ans["answer"] == p["answer"] and ans["decode_tokens"] <= 8


@pytest.mark.slow
def test_recurrence_is_correct_for_every_verified_problem_of_the_run(learned, env, tmp_path):
    """The default `eval recurrence` covers every verified problem (no --limit): each is answered from its
    recall artifact, correctly, in at most 8 decode tokens, on the real default model."""
    data, summary = learned
    proc = galahad(data, "eval", "recurrence", "--k", "1", "--json", "--out", str(tmp_path / "r.json"), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    everyone = json.loads(proc.stdout)["all_problems"]
    # every verified problem: sampled, or a gold solution (its computed gold), recalled alike
    assert everyone["problems"] == summary["verified"] + summary["gold_solutions"] >= 1
    assert everyone["graft_accuracy"] == 1.0 and everyone["graft_max_decode_tokens"] <= 8
    records = json.loads((tmp_path / "r.json").read_text())["records"]
    with _catalog(data) as cat:
        for r in (r for r in records if r["condition"] == "graft"):
            assert r["grafted_artifacts"] == [cat.recalls.get(r["id"])["artifact_id"]]  # its solution alone
            assert r["verified"] and r["decode_tokens"] <= 8
    # The same problem in other words is recalled by its canonical key, from the same artifact.
    with _catalog(data) as cat:
        added = [p for p in cat.problems.find(limit=1000) if p["status"] == "verified"
                 and p["template"].startswith("add1/")][:1]
    for p in added:
        a, b = p["external_id"].rsplit("/", 1)[-1].split("-")  # builtin/add1/t<k>/<a>-<b>
        proc = galahad(data, "solve", f"What is the sum of {b} and {a}?", "--json", env=env)
        ans = json.loads(proc.stdout)
        assert ans["path"] in ("hash", "key") and ans["verified"] is True and ans["answer"] == p["answer"]


def test_unknown_problem_falls_back_to_the_base_model(learned, env):
    data, _ = learned
    proc = galahad(data, "solve", "Name the capital city of the country Freedonia.", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["path"] == "base"


@pytest.fixture(scope="module")
def recurrence(learned, env, tmp_path_factory):
    """One `eval recurrence` manifest of the learned data dir (3 problems, base budget k=2) and its --json
    scores: rescored, replayed and tampered with here, replayed on another data dir after a bundle move."""
    data, _ = learned
    manifest = tmp_path_factory.mktemp("recurrence") / "recurrence.json"
    proc = galahad(data, "eval", "recurrence", "--limit", "3", "--k", "2", "--json", "--out", str(manifest), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return manifest, json.loads(proc.stdout)


def test_eval_recurrence_rescore_replay_and_tamper(learned, recurrence, env, tmp_path):
    data, _ = learned
    manifest, scores = recurrence
    everyone = scores["all_problems"]
    assert everyone["problems"] >= 1 and everyone["graft_accuracy"] == 1.0
    assert everyone["graft_max_decode_tokens"] <= 8
    # The top level is the problems the base fails within its budget: check that set independently.
    per_problem = json.loads(manifest.read_text())["scores"]["per_problem"]  # in the manifest, not in --json
    unsolved = [p for p in per_problem if not p["base_solved"]]
    assert scores["problems"] == len(unsolved) and everyone["problems"] == len(per_problem)
    assert all(p["graft_verified"] for p in per_problem)
    assert scores["graft_accuracy"] == (1.0 if unsolved else 0.0)  # the scorer's value for an empty set is 0
    assert galahad(data, "rescore", str(manifest), env=env).returncode == 0
    replay = galahad(data, "replay", str(manifest), "--json", env=env)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert json.loads(replay.stdout)["checked"] >= 2
    original = json.loads(manifest.read_text())
    edited_output = json.loads(json.dumps(original))
    edited_output["records"][0]["output_text"] += " 42"
    bad = tmp_path / "edited-output.json"
    bad.write_text(json.dumps(edited_output))
    proc = galahad(data, "rescore", str(bad), "--json", env=env)
    assert proc.returncode == 1 and "output does not match its hash" in proc.stdout
    edited_score = json.loads(json.dumps(original))
    edited_score["scores"]["graft_decode_tokens"] += 1
    bad.write_text(json.dumps(edited_score))
    proc = galahad(data, "rescore", str(bad), "--json", env=env)
    assert proc.returncode == 1 and "graft_decode_tokens" in proc.stdout


def _wait_verified(data: Path, proc: subprocess.Popen, at_least: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return -1
        if (data / "catalog.sqlite3").exists():
            with _catalog(data) as cat:
                n = cat.stats()["verified"]
            if n >= at_least:
                return n
        time.sleep(0.5)
    return 0


def test_sigkill_mid_run_then_resume_loses_nothing(tmp_path, env):
    data = tmp_path / "killed"
    args = [*GALAHAD, "--data", str(data), *RUN, "--model", "tiny", "--limit", "10", "--seed", "3"]  # the job's safety, not the model's
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        seen = _wait_verified(data, proc, 1, timeout=600)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert seen >= 1, "the job ended or stalled before verifying anything"
    with _catalog(data) as cat:
        before = {p["id"] for p in cat.problems.find(limit=1000) if p["status"] == "verified"}
    resumed = galahad(data, *RUN, "--model", "tiny", "--limit", "10", "--seed", "3", "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    with _catalog(data) as cat:
        after = {p["id"] for p in cat.problems.find(limit=1000) if p["status"] == "verified"}
        stats = cat.stats()
        assert before <= after
        assert stats["artifacts"] == 2 * len(after)  # library + recall artifact per verified problem: none lost, none twice
        assert not cat.recalls.missing() and not cat.queue.unfinished_deposits()
        assert stats["by_status"].get("claimed", 0) == 0
    fsck = galahad(data, "catalog", "fsck", "--json", env=env)
    report = json.loads(fsck.stdout)
    assert not report.get("dangling") and not report.get("corrupted"), report


def test_replay_on_another_data_dir_after_a_bundle_move(learned, recurrence, env, tmp_path):
    """What moving to another machine of the same architecture looks like: export the artifacts as a
    bundle, import them into a fresh data dir, and replay an eval manifest there (the module's recurrence
    manifest, made on the learned data dir)."""
    data, _ = learned
    manifest, _ = recurrence
    bundle = tmp_path / "memory.bundle"
    assert galahad(data, "catalog", "export", str(bundle), env=env).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    imported = galahad(elsewhere, "catalog", "import", str(bundle), "--trust-unsigned", env=env)
    assert imported.returncode == 0, imported.stderr[-2000:]
    replay = galahad(elsewhere, "replay", str(manifest), "--json", env=env)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert json.loads(replay.stdout)["ok"] is True


def test_run_on_postgresql_catalog_and_shared_store(tmp_path, env, make_catalog_url):
    url = make_catalog_url("postgresql")
    store = tmp_path / "shared-store"
    proc = galahad(tmp_path / "data", "run", "--model", "tiny", "--catalog", url, "--store", str(store),
                   "--families", "add1", "--per-family", "6", "--limit", "2", "--k", "2", "--no-gold-solutions",
                   "--no-progress", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    with Catalog(url) as cat:
        stats = cat.stats()
        assert stats["attempts"] == summary["attempted"] >= 2 and stats["verifications"] == stats["attempts"]
        assert stats["runs"] == 1 and stats["artifacts"] == 2 * summary["deposited"]  # library + recall
    assert not (tmp_path / "data" / "catalog.sqlite3").exists()


def test_eval_transfer_conditions_stats_plots_and_rescore(learned, env, tmp_path):
    data, _ = learned
    manifest = tmp_path / "transfer.json"
    proc = galahad(data, "eval", "transfer", "--families", "add1,lin1", "--per-split", "2", "--max-solutions", "1",
                   "--json", "--out", str(manifest), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    conditions = {r["condition"] for r in out["table"]}
    assert {"base", "empty"} <= conditions and any(c.startswith("library") for c in conditions)
    for row in out["table"]:
        assert 0 <= row["ci95"][0] <= row["accuracy"] <= row["ci95"][1] <= 1
    assert all(0 <= c["p_value"] <= 1 for c in out["comparisons"]) and out["comparisons"]
    for png in out["plots"]:
        assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = json.loads(manifest.read_text())["records"]
    with _catalog(data) as cat:
        known = {p["id"] for p in cat.problems.find(limit=1000)}
    assert not {r["id"] for r in records} & known  # held out: never a problem the catalog learned
    assert galahad(data, "rescore", str(manifest), env=env).returncode == 0


def _attempts(data: Path) -> dict:
    with _catalog(data) as cat:
        return {(p["id"], a["sampling"]["sample"]): (a["output_text"], a["sampling"]["group"])
                for p in cat.problems.find(limit=1000) for a in cat.runs.attempts(p["id"])
                if a["sampling"].get("provenance") != "gold"}  # a gold solution is no sample


def test_batches_are_formed_by_the_queue_not_by_timing(env, tmp_path):
    # Problems are claimed in groups and a group's unfinished problems go on together, so which samples share
    # a batch (and so every draw) does not depend on how many generators run or when their calls return.
    # The property is the queue's, not the model's: the tiny model, 1 generator against 2.
    runs = {}
    for generators in (1, 2):
        data = tmp_path / f"g{generators}"
        proc = galahad(data, *RUN, "--model", "tiny", "--limit", "8", "--generators", str(generators), "--json",
                       env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[generators] = data, json.loads(proc.stdout.strip().splitlines()[-1])
    (one, summary), (two, other) = runs[1], runs[2]
    mine, theirs = _attempts(one), _attempts(two)
    assert mine == theirs and len(mine) == summary["attempted"] == other["attempted"]
    assert other["verified"] == summary["verified"] and other["tokens_spent"] == summary["tokens_spent"]
    with _catalog(one) as cat:
        sizes = {a["sampling"]["group_size"] for p in cat.problems.find(limit=1000) for a in cat.runs.attempts(p["id"])
                 if a["sampling"].get("provenance") != "gold"}
    assert max(sizes) > 1  # several problems did share calls
