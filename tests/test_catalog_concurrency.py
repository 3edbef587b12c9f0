"""Many processes at once, and processes killed mid-deposit, on SQLite and PostgreSQL.

- 8 spawned processes each deposit 500 artifacts (50 of them the same content in every process) into a
  fresh catalog they also race to migrate: no lost rows, no duplicates, no 'database is locked'.
- 4 processes drain the work queue: every problem is handed out exactly once.
- 50 depositors are SIGKILLed at random points: no row ever points at a missing or partial blob; fsck
  reports at most orphans and temp files, which gc then collects.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import queue
import subprocess
import sys
from pathlib import Path

import pytest

from galahad.flywheel.artifacts.store import LocalStore, sha256_hex
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.fsck import fsck, gc

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import test_catalog_workers as W  # noqa: E402

pytestmark = pytest.mark.slow  # many processes at once, kill -9: the slow tier

PROCS, PER_PROC, SHARED = 8, 500, 50


def fresh_processes():
    """Workers that share nothing with this process (no inherited connections or locks), like `spawn`, but
    forked from a server that has imported torch and the catalog once: eight cold torch imports on two
    busy cores would take most of the test's time."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["test_catalog_workers", "galahad.flywheel.catalog", "galahad.flywheel.artifacts.format"])
    return ctx


def _collect(procs, results, n: int) -> list[tuple]:
    out = []
    try:
        for _ in range(n):
            out.append(results.get(timeout=240))
    except queue.Empty:
        pass
    for p in procs:
        p.join(timeout=60)
        if p.is_alive():
            p.kill()
    return out


def test_eight_processes_deposit_concurrently(catalog_url, tmp_path):
    shared = [W.make_artifact(seed=10_000 + i)[1] for i in range(SHARED)]
    files = []
    for w in range(PROCS):
        own = [W.make_artifact(seed=w * 1000 + i)[1] for i in range(PER_PROC - SHARED)]
        blobs = own + shared
        blobs = blobs[w * 7 % len(blobs):] + blobs[: w * 7 % len(blobs)]  # shared ones at different moments
        f = tmp_path / f"blobs{w}.pkl"
        f.write_bytes(pickle.dumps(blobs))
        files.append(f)
    expected = {sha256_hex(b) for f in files for b in pickle.loads(f.read_bytes())}
    assert len(expected) == PROCS * (PER_PROC - SHARED) + SHARED
    ctx = fresh_processes()
    start, results = ctx.Event(), ctx.Queue()
    store_root = str(tmp_path / "store")
    procs = [ctx.Process(target=W.deposit_worker, args=(catalog_url, store_root, str(f), start, results))
             for f in files]
    for p in procs:
        p.start()
    start.set()
    out = _collect(procs, results, PROCS)
    errors = [err for _, _, err in out if err]
    assert errors == [] and len(out) == PROCS, errors[:1]
    assert all(len(ids) == PER_PROC for _, ids, _ in out)
    assert {i for _, ids, _ in out for i in ids} == expected
    with Catalog(catalog_url) as cat:
        assert set(cat.artifacts.sizes()) == expected  # primary key: a duplicate row cannot exist
        assert cat.stats()["artifacts"] == len(expected)
        report = fsck(cat, LocalStore(store_root))
        assert report.ok, report.to_dict()


def test_concurrent_claims_hand_out_each_problem_once(catalog_url):
    with Catalog(catalog_url) as cat:
        ids = cat.problems.add_many([dict(text=f"problem {i}", answer=str(i), source="u", topic="t") for i in range(120)])
    ctx = fresh_processes()
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=W.claim_worker, args=(catalog_url, f"w{i}", start, results)) for i in range(4)]
    for p in procs:
        p.start()
    start.set()
    out = _collect(procs, results, len(procs))
    assert [err for _, _, err in out if err] == [] and len(out) == 4
    got = [pid for _, claimed, _ in out for pid in claimed]
    assert len(got) == len(set(got)) == 120 and set(got) == set(ids)
    with Catalog(catalog_url) as cat:
        assert cat.stats()["by_status"] == {"claimed": 120}


def test_sigkilled_depositors_never_leave_dangling_rows(catalog_url, tmp_path):
    # Sizes from 1 KB to ~500 KB, so kills land inside blob writes as well as around commits.
    blobs = [W.make_artifact(seed=50_000 + i, n_tokens=[4, 64, 1024, 4096][i % 4], layers=2)[1] for i in range(120)]
    blob_file = tmp_path / "crash.pkl"
    blob_file.write_bytes(pickle.dumps(blobs))
    store_root = tmp_path / "store"
    with Catalog(catalog_url):
        pass  # migrate once up front, so children spend their lives depositing
    trials = 50
    proc = subprocess.run(
        [sys.executable, str(HERE / "test_catalog_workers.py"), "crash", catalog_url, str(store_root),
         str(blob_file), str(trials), "1234"],
        capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"killed={trials}" in proc.stdout  # every child was still depositing when killed
    store = LocalStore(store_root)
    with Catalog(catalog_url) as cat:
        report = fsck(cat, store)
        assert not report.damaged, report.to_dict()  # no dangling, corrupted or mismatched rows
        assert report.rows > 0
        assert all(sha256_hex(store.get(a)) == a for a in cat.artifacts.sizes())
        gc(cat, store, grace_seconds=0, force=True)  # orphans may outnumber rows after 50 kills
        assert fsck(cat, store).ok
