"""The object-store tier across nodes and through outages (slow tier; real Ray, SeaweedFS, PostgreSQL, SQLite).

- Two nodes, no shared filesystem: a two-namespace Ray cluster (`netns_cluster`), SeaweedFS and a private
  PostgreSQL catalog bound to the head namespace's address (both nodes reach it over their veth; the host's
  PostgreSQL is on the host's loopback, which no namespace reaches). Node A (head) runs `galahad run
  --store s3://...` with its own data dir; node B (worker), its own data dir and an empty cache, runs `galahad
  eval recurrence`: every verified problem is grafted from the object A deposited, fetched from the bucket
  (nothing rebuilt), with the same output as A's graft.
- The object store killed mid-run (SeaweedFS SIGKILLed while `galahad run` deposits, started again after a
  few seconds): the job waits, retries and loses nothing; every object seen in the bucket, while it runs
  and after, hashes to its name. Kept down past the bounded wait: one line, non-zero exit, and the next
  run resumes with nothing lost. On SQLite and PostgreSQL.
- A corrupted object (refused on fetch, rebuilt, recall unchanged) is `test_s3_store.py`'s
  `test_a_corrupted_object_is_rebuilt_from_the_catalog_on_graft`; a store killed mid-multipart-upload is its
  `test_a_store_stopped_mid_upload_...`.

The tiny random-init model verifies nothing by itself, so verified problems are seeded as committed positive
verdicts with no deposit behind them (what a kill between verdict and deposit leaves); the run's reconcile
deposits each (a library and a recall artifact). Population: SEEDED problems 'What is i + 7?'.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from seaweed import Seaweed

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parent
GALAHAD = [sys.executable, "-m", "galahad.flywheel.cli.main"]
SEEDED = 6
BUCKET = "galahad-cluster"
RUN = ["--model", "tiny", "--families", "add1", "--per-family", "1", "--limit", "1", "--k", "1", "--max-tokens", "2",
       "--generators", "1", "--no-gold-solutions", "--no-progress", "--json"]  # the seeded problems alone are learned
_ID = re.compile(r"[0-9a-f]{64}")

# Inside a namespace (argv: catalog URL, n): n verified problems whose deposit the next run's reconcile makes.
SEED = """
import sys
from galahad.flywheel.catalog import Catalog
with Catalog(sys.argv[1]) as cat:
    for i in range(int(sys.argv[2])):
        text, answer = f"What is {i} + 7?", str(i + 7)
        pid = cat.problems.add(text, answer, "unit", "arith", "t-add")
        att = cat.runs.add_attempt(pid, None, "fp", {}, f" {answer}", 1, 0.0, 0.0)
        cat.runs.add_verification(att, "test", True, "ok")
        cat.queue.mark(pid, "verified")
"""
# (argv: catalog URL, store URL): the catalog's artifacts and recalls, the bucket's objects (each hash-checked).
FACTS = """
import hashlib, json, sys, tempfile
from galahad.flywheel.artifacts.s3_store import S3Store
from galahad.flywheel.catalog import Catalog
store = S3Store(sys.argv[2], tempfile.mkdtemp())  # reads the bucket itself (get_unchecked), never a cache
with Catalog(sys.argv[1]) as cat:
    rows = sorted(cat.artifacts.sizes())
    recalls = {p["id"]: p["artifact_id"] for p in cat.recalls.all()}
    stats = cat.stats()
objects = {i: hashlib.sha256(store.get_unchecked(i)).hexdigest() == i for i in store.ids()}
print(json.dumps({"rows": rows, "recalls": recalls, "stats": stats, "objects": objects,
                  "locations": sorted({store.location})}))
"""


def seed(url: str, env: dict | None = None) -> None:
    done = subprocess.run([sys.executable, "-c", SEED, url, str(SEEDED)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def cached(data: Path) -> set[str]:
    return {p.name for p in (data / "store-cache").glob("??/??/*") if _ID.fullmatch(p.name)}


def graft_outputs(manifest: str) -> dict[str, str]:
    records = json.loads(Path(manifest).read_text())["records"]
    return {r["id"]: r["output_text"] for r in records if r["condition"] == "graft"}


@pytest.mark.slow  # a 2-node netns Ray cluster, SeaweedFS and PostgreSQL in its head namespace, three galahad runs
def test_node_b_grafts_what_node_a_deposited_with_no_shared_filesystem(netns_ray_cluster, tmp_path, model_cache):
    from netns_postgres import NetnsPostgres

    c = netns_ray_cluster
    with NetnsPostgres(c.head_ns, c.head_ip) as pg, Seaweed(tmp_path / "weed", c.head_ip, c.head_ns) as weed:
        catalog, url = pg.url(), f"s3://{BUCKET}/learned"
        env = {**weed.env(), "GALAHAD_MODEL_CACHE": str(model_cache), "PYTHONPATH": str(TESTS)}
        a, b = tmp_path / "node-a", tmp_path / "node-b"  # each node's own data dir and cache
        done = c.run([sys.executable, "-c", SEED, catalog, str(SEEDED)], env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        # node A learns: its run joins the cluster, its deposits go to the bucket
        done = c.run([*GALAHAD, "--data", str(a), "run", "--address", c.address, "--catalog", catalog,
                      "--store", url, *RUN], env=env, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert summary["reconciled"] >= SEEDED and summary["store"].startswith(f"s3://{BUCKET}/learned/")
        done = c.run([sys.executable, "-c", FACTS, catalog, url], env=env, timeout=120, node="worker")
        assert done.returncode == 0, done.stderr[-2000:]
        facts = json.loads(done.stdout.strip().splitlines()[-1])
        assert len(facts["recalls"]) >= SEEDED and set(facts["recalls"].values()) <= set(facts["rows"])
        assert sorted(facts["objects"]) == facts["rows"] and all(facts["objects"].values())  # all in, all intact
        assert not b.exists()
        # node B, its own empty cache: recurrence on every verified problem, then node A's for comparison
        outputs = {}
        for node, data in (("worker", b), ("head", a)):
            done = c.run([*GALAHAD, "--data", str(data), "eval", "recurrence", "--model", "tiny", "--k", "1",
                          "--max-tokens", "2", "--catalog", catalog, "--store", url, "--json"], env=env, timeout=600,
                         node=node)
            assert done.returncode == 0, done.stderr[-3000:]
            outputs[node] = graft_outputs(json.loads(done.stdout.strip().splitlines()[-1])["manifest"])
        assert set(outputs["worker"]) == set(facts["recalls"])  # recurrence: 100% of the verified problems
        assert outputs["worker"] == outputs["head"]  # the same bytes grafted: the same answers
        assert cached(b) == set(facts["recalls"].values())  # fetched from the bucket into B's own cache
        done = c.run([sys.executable, "-c", FACTS, catalog, url], env=env, timeout=120, node="worker")
        after = json.loads(done.stdout.strip().splitlines()[-1])
        assert after["stats"]["rebuilds"] == 0 and after["objects"] == facts["objects"]  # nothing rebuilt


# --- the object store stopped mid-run (loopback SeaweedFS; SQLite and PostgreSQL) ---


class Watcher:
    """Lists the bucket every few ms while a run deposits; every object it sees is fetched and hashed once
    (a half-written object would show as a name its bytes do not hash to). Once `kill_at` objects are listed
    the store is SIGKILLed at once, then (restart=True) started again after `down_s`."""

    def __init__(self, weed: Seaweed, prefix: str, kill_at: int, restart: bool, down_s: float = 2.0):
        self.weed, self.prefix, self.kill_at, self.restart, self.down_s = weed, prefix, kill_at, restart, down_s
        self.seen: dict[str, bool] = {}
        self.killed_with: int | None = None
        self.stop = threading.Event()
        self.client = weed.client()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def listed(self) -> list[str]:
        try:
            return [o["Key"] for o in self.client.list_objects_v2(Bucket=BUCKET, Prefix=self.prefix).get("Contents", [])]
        except self.client.exceptions.NoSuchBucket:
            return []  # the run creates the bucket with its first put

    def check(self, keys: list[str]) -> None:
        for key in keys:
            name = key[len(self.prefix):]
            if name not in self.seen:
                body = self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
                self.seen[name] = bool(_ID.fullmatch(name)) and hashlib.sha256(body).hexdigest() == name

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                keys = self.listed()
                if self.killed_with is None and len(keys) >= self.kill_at:
                    self.killed_with = len(keys)
                    self.weed.kill()
                    if self.restart:
                        time.sleep(self.down_s)
                        self.weed.start()
                    continue
                self.check(keys)
            except Exception:
                if self.killed_with is None:
                    raise
                time.sleep(0.2)  # the store is down (we killed it)
            time.sleep(0.02)

    def __enter__(self) -> Watcher:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(120)


def _run(data: Path, catalog: str, url: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*GALAHAD, "--data", str(data), "run", "--catalog", catalog, "--store", url, *RUN],
                          capture_output=True, text=True, env=env, timeout=900)


def _whole(data: Path, catalog: str, url: str, env: dict, weed: Seaweed, watcher: Watcher) -> None:
    """Every verified problem's recall artifact, every catalog row's object in the bucket, intact; fsck clean."""
    from galahad.flywheel.artifacts.s3_store import S3Store
    from galahad.flywheel.catalog import Catalog

    os.environ.update(weed.env())
    store = S3Store(url, data / "check-cache")
    with Catalog(catalog) as cat:
        recalls = {p["id"]: p["artifact_id"] for p in cat.recalls.all()}
        rows = set(cat.artifacts.sizes())
    assert len(recalls) == SEEDED and set(recalls.values()) <= rows == set(store.ids())
    watcher.check(watcher.listed())  # after the run: every object there hashes to its name
    assert watcher.seen and all(watcher.seen.values()), {k: v for k, v in watcher.seen.items() if not v}
    assert watcher.killed_with is not None and watcher.killed_with < len(rows)  # killed while it deposited
    done = subprocess.run([*GALAHAD, "--data", str(data), "catalog", "--catalog", catalog, "--store", url, "fsck"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


@pytest.fixture
def weed(tmp_path):
    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                            "AWS_DEFAULT_REGION")}
    server = Seaweed(tmp_path / "weed")
    try:
        yield server.start()
    finally:
        server.stop()  # SIGKILL to its process group: never outlives the test
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def test_store_killed_mid_run_and_restarted_loses_nothing(weed, catalog_url, tmp_path, model_cache):
    env = {**os.environ, **weed.env(), "GALAHAD_MODEL_CACHE": str(model_cache)}
    seed(catalog_url)
    data, url = tmp_path / "data", f"s3://{BUCKET}/outage"
    with Watcher(weed, "outage/", kill_at=2, restart=True) as watcher:
        done = _run(data, catalog_url, url, env)
    assert done.returncode == 0, done.stderr[-3000:]  # it waited and retried through the outage
    assert json.loads(done.stdout.strip().splitlines()[-1])["reconciled"] == SEEDED
    _whole(data, catalog_url, url, env, weed, watcher)


def test_store_down_past_the_bounded_wait_fails_with_one_line_and_resumes(weed, catalog_url, tmp_path,
                                                                          model_cache):
    env = {**os.environ, **weed.env(), "GALAHAD_MODEL_CACHE": str(model_cache)}
    seed(catalog_url)
    data, url = tmp_path / "data", f"s3://{BUCKET}/down"
    with Watcher(weed, "down/", kill_at=2, restart=False) as watcher:
        done = _run(data, catalog_url, url, env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1 and lines[0].startswith("galahad: error: "), done.stderr[-3000:]
    assert "object store" in lines[0] and "gave up" in lines[0], lines[0]
    weed.start()  # back on the same ports and data: the next run resumes
    done = _run(data, catalog_url, url, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["reconciled"] >= 1
    _whole(data, catalog_url, url, env, weed, watcher)
