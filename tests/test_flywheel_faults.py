"""Bad input and faults around the learning job: clear one-line errors, non-zero exits, consistent catalog."""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from local_depositor import LocalDepositor as Depositor

from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog import problem_hash as phash
from galahad.flywheel.errors import GalahadError
from galahad.workers.runtime import DEFAULT_RUNTIME

GALAHAD = [sys.executable, "-m", "galahad.flywheel.cli.main"]


def galahad(data: Path, *args, env=None, timeout=600):
    return subprocess.run([*GALAHAD, "--data", str(data), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.fixture(scope="module")
def env(model_cache):
    return {**os.environ, "GALAHAD_MODEL_CACHE": str(model_cache)}


def _one_line_error(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("galahad: error: "), proc.stderr[-2000:]
    for n in needles:
        assert n in lines[0], lines[0]




def test_model_that_does_not_exist(tmp_path, env):
    proc = galahad(tmp_path, "run", "--model", str(tmp_path / "nope"), "--limit", "1", env=env)
    _one_line_error(proc, "neither gemma3-270m, tiny nor a local model folder")
    assert not (tmp_path / "catalog.sqlite3").exists()


def test_model_that_does_not_load(tmp_path, env):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    proc = galahad(tmp_path / "data", "run", "--model", str(broken), "--limit", "1", env=env)
    # an architecture with no adapter (workers/arch/) is refused from its config.json, before any state
    _one_line_error(proc, "failed to load", "no-such-architecture", "is not supported; supported: ")
    assert not (tmp_path / "data" / "catalog.sqlite3").exists()


def test_problem_file_with_a_bad_line(tmp_path, env):
    good = {"id": "a", "problem": "What is 1 + 1?", "answer": "2", "topic": "t", "template": "x", "source": "s"}
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps(good) + "\n" + "{not json\n")
    proc = galahad(tmp_path / "data", "run", "--model", "tiny", "--problems", str(path), env=env)
    _one_line_error(proc, "problems.jsonl:2:")
    assert not (tmp_path / "data" / "catalog.sqlite3").exists()  # nothing half-loaded


def test_bad_numbers_are_refused(tmp_path, env):
    proc = galahad(tmp_path, "run", "--model", "tiny", "--k", "0", env=env)
    _one_line_error(proc, "argument --k: must be at least 1")


@pytest.fixture()
def tiny_disk(tmp_path):
    """A 256 KiB filesystem: the store's disk fills on the first real artifact."""
    mnt = tmp_path / f"small-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_refuses_the_deposit_and_leaves_catalog_consistent(tmp_path, tiny_disk, model_cache):
    url = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    dep = Depositor("tiny", model_cache, DEFAULT_RUNTIME, url, tiny_disk / "store")
    text = "Please " * 300 + "what is 2 + 2?"  # a long segment: its KV does not fit in 256 KiB
    cat = dep.catalog
    cat.problems.add(text, "4", "test", "arith", "t")
    attempt = cat.runs.add_attempt(phash(text), None, "fp", {}, "4", 1, 0.0, 0.0)
    vid = cat.runs.add_verification(attempt, "test", True, "ok")
    problem = {"id": phash(text), "text": text, "answer": "4", "template": "t", "topic": "arith"}
    with pytest.raises(GalahadError, match="No space left on device"):
        dep.deposit(problem, "4", vid)
    assert cat.stats()["artifacts"] == 0 and cat.libraries.chain("template:t") == []
    assert not list((tiny_disk / "store").rglob(".tmp-*"))  # no partial blob left behind
    cat.close()


@pytest.mark.slow  # a 2-node netns Ray cluster, the default model on both
def test_two_node_cluster_runs_the_loop(netns_ray_cluster, tmp_path, model_cache):
    cluster = netns_ray_cluster
    data = tmp_path / "cluster-data"
    proc = cluster.run([*GALAHAD, "--data", str(data), "run", "--address", cluster.address, "--generators", "2",
                        "--families", "add1", "--per-family", "8", "--limit", "3", "--k", "4", "--no-progress",
                        "--json"], env={"GALAHAD_MODEL_CACHE": str(model_cache)}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(summary["nodes"]["generators"]) == {cluster.head_ip, cluster.worker_ip}
    assert summary["problems"] == 3 and summary["attempted"] >= 3
    with Catalog(f"sqlite:///{data / 'catalog.sqlite3'}") as cat:
        # library + recall for each solved problem (sampled, or its computed gold: a gold solution)
        assert cat.stats()["artifacts"] == 2 * summary["deposited"] == 2 * (summary["verified"] + summary["gold_solutions"])


@pytest.mark.slow  # needs the netns Ray cluster
def test_unreachable_ray_address(netns_ray_cluster, tmp_path, model_cache):
    # Inside the test namespace, where 10.213.7.99 is an address nobody holds: no traffic leaves it.
    proc = netns_ray_cluster.run([*GALAHAD, "--data", str(tmp_path), "run", "--model", "tiny", "--limit", "1",
                                  "--address", "10.213.7.99:6379"], env={"GALAHAD_MODEL_CACHE": str(model_cache)},
                                 timeout=300)
    _one_line_error(proc, "cannot reach the Ray cluster at 10.213.7.99:6379")
