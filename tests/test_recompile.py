"""Recompile: a catalog whose artifacts were all made under another runtime answers recurrences from its
graft again after `catalog recompile`, exactly (the same output bytes as under the runtime that made them);
a rerun does nothing; `kill -9` in the middle of it loses nothing and duplicates nothing.

The other runtime is real: a different pinned env value (`OMP_DYNAMIC`) is a different runtime fingerprint
on the same machine (`workers/runtime.py` records the pinned env), so the same process, or a subprocess
started with that value, is "another machine" to the catalog.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import recurrence, transfer
from local_depositor import LocalDepositor

from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.fsck import fsck, gc
from galahad.flywheel.learn.recompile import recompile
from galahad.flywheel.memory.solver import Solver
from galahad.workers.engine import Engine
from galahad.workers.runtime import DEFAULT_RUNTIME

PROBLEMS = [("What is 3 + 4?", "7"), ("What is 2 + 5?", "7"), ("What is 6 + 1?", "7")]
OTHER_ENV = {"OMP_DYNAMIC": "TRUE"}  # pinned "FALSE" by default: another value, another runtime fingerprint


def learn(tmp_path: Path, model_cache: Path) -> LocalDepositor:
    """Three verified problems deposited as the learner does: into library `template:t-add` (one chain)
    and each alone as its recall artifact."""
    dep = LocalDepositor("tiny", model_cache, DEFAULT_RUNTIME, f"sqlite:///{tmp_path / 'c.sqlite3'}",
                         tmp_path / "store")
    for text, answer in PROBLEMS:
        pid = dep.catalog.problems.add(text, answer, "unit", "arith", "t-add")
        att = dep.catalog.runs.add_attempt(pid, None, dep.engine.model_fingerprint, {}, answer, 1, 0.0, 0.0)
        problem = {"id": pid, "text": text, "answer": answer, "template": "t-add", "topic": "arith"}
        dep.deposit(problem, answer, dep.catalog.runs.add_verification(att, "v1", True, "ok"))
    return dep


def recalled(solver: Solver) -> list[tuple[str, str, list[str]]]:
    """Each problem asked again on its hash path, what `eval recurrence` grafts: (path, output text, grafted
    artifacts); ("none", "", []) where no recall artifact of this engine's runtime serves it. (The tiny
    random model does not copy its answer, so `solve` would go on to the next route: the exact bytes are
    the check here.)"""
    out = []
    for text, _ in PROBLEMS:
        ans = recurrence(solver, text)
        out.append(("none", "", []) if ans is None else (ans.path, ans.output_text, ans.grafted_artifacts))
    return out


@pytest.mark.slow
def test_recompile_after_a_runtime_change_makes_recurrence_whole_again(tmp_path, model_cache, monkeypatch):
    dep = learn(tmp_path, model_cache)
    cat, store = dep.catalog, dep.store
    try:
        before = recalled(Solver(dep.engine, cat, store))  # also records this runtime's facts
        assert [p for p, _, _ in before] == ["hash"] * 3
        originals = {a["id"] for a in cat.artifacts.listing(limit=100)}
        assert len(originals) == 6  # 3 chain segments + 3 recall artifacts

        for k, v in OTHER_ENV.items():
            monkeypatch.setenv(k, v)
        other = Engine(dep.engine.loaded, DEFAULT_RUNTIME)
        assert other.runtime_fingerprint != dep.engine.runtime_fingerprint
        fps = (other.model_fingerprint, other.runtime_fingerprint)
        solver = Solver(other, cat, store)
        assert [p for p, _, _ in recalled(solver)] == ["none"] * 3
        ans = solver.solve(PROBLEMS[0][0])
        assert ans.path in ("transfer", "base") and not set(ans.grafted_artifacts) & originals
        # nothing here is graftable, but it says so, and what to run
        assert ans.memory_note == ("1 artifact was made under another runtime (fields: env.OMP_DYNAMIC): "
                                   "run `galahad catalog recompile`")

        out = recompile(cat, store, other)
        assert (out.pending, len(out.rebuilt), out.skipped) == (6, 6, [])
        assert not set(out.rebuilt) & originals
        after = recalled(Solver(other, cat, store))
        assert [p for p, _, _ in after] == ["hash"] * 3
        assert [t for _, t, _ in after] == [t for _, t, _ in before]  # the same bytes out, under the new runtime
        assert all(set(g) <= set(out.rebuilt) for _, _, g in after)
        for old, new in zip([g for _, _, g in before], [g for _, _, g in after], strict=True):
            row = cat.artifacts.get(new[0])
            assert row["recompiled_from"] == old[0] and row["runtime_fingerprint"] == fps[1]
            assert row["verification_id"] == cat.artifacts.get(old[0])["verification_id"]
        lib = "template:t-add"
        assert len(cat.libraries.chain(lib, fingerprints=fps)) == 3  # the chain rebuilt, in order, as its own
        assert cat.libraries.chain(lib, 0) == cat.libraries.chain(
            lib, fingerprints=(dep.engine.model_fingerprint, dep.engine.runtime_fingerprint))  # originals kept
        assert transfer(Solver(other, cat, store), "What is 1 + 1?", "t-add", "arith").grafted_artifacts == \
            cat.libraries.chain(lib, fingerprints=fps)

        again = recompile(cat, store, other)  # idempotent: nothing left to do
        assert (again.pending, again.rebuilt) == (0, [])
        assert cat.stats()["artifacts"] == 12 and fsck(cat, store).ok
        back = recompile(cat, store, dep.engine)  # and the original runtime still has all of its own
        assert back.pending == 0

        # gc: the originals' blobs go, but for each library's current chain; every row stays
        spared = set(cat.libraries.chain(lib, 0))  # the original runtime's current chain: what it extends next
        assert len(spared) == 3
        assert gc(cat, store, grace_seconds=0, dry_run=True)["evicted_superseded"] == sorted(
            originals - spared, key=lambda i: (cat.artifacts.get(i)["token_start"], i))
        swept = gc(cat, store, grace_seconds=0)
        assert set(swept["evicted_superseded"]) == originals - spared and swept["removed_orphans"] == []
        assert not any(store.has(i) for i in originals - spared) and all(store.has(i) for i in spared)
        assert cat.stats()["artifacts"] == 12 and fsck(cat, store).ok
        assert [t for _, t, _ in recalled(Solver(other, cat, store))] == [t for _, t, _ in before]
        assert gc(cat, store, grace_seconds=0)["evicted_superseded"] == []  # nothing left to sweep
    finally:
        cat.close()


SCRIPT = r"""
import json, os, signal, sys
from pathlib import Path
from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env
pin_process_env(DEFAULT_RUNTIME)
from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.learn.recompile import recompile
from galahad.workers.engine import Engine
from galahad.workers.model_loader import load_model

url, store, cache, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
engine = Engine(load_model("tiny", Path(cache), DEFAULT_RUNTIME), DEFAULT_RUNTIME)
puts = 0

def hook(event, artifact_id):
    global puts
    if event == "put":  # the blob is durable, its row not yet written: the worst moment to die
        puts += 1
        if puts == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

with Catalog(url) as cat:
    out = recompile(cat, LocalStore(store), engine, hook)
print(json.dumps({"runtime": engine.runtime_fingerprint, **out.to_dict()}))
"""


@pytest.mark.slow
def test_kill_9_during_recompile_loses_nothing(tmp_path, model_cache, monkeypatch):
    dep = learn(tmp_path, model_cache)
    url, store = dep.catalog.url, dep.store
    dep.catalog.close()
    env = {**os.environ, **OTHER_ENV, "GALAHAD_MODEL_CACHE": str(model_cache)}
    killed = subprocess.run([sys.executable, "-c", SCRIPT, url, str(store.root), str(model_cache), "3"], env=env,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    with Catalog(url) as cat:
        done = [a for a in cat.artifacts.listing(limit=100) if a["recompiled_from"]]
        assert len(done) == 2  # two recorded completely; the third's blob is durable but has no row
        report = fsck(cat, store)
        assert not report.damaged and len(report.orphans) == 1
        orphan = report.orphans[0]
    # The rerun is the command a user types: it finishes what is left, and only that.
    cli = [sys.executable, "-m", "galahad.flywheel.cli.main", "--data", str(tmp_path / "d"), "catalog",
           "--catalog", url, "--store", str(store.root), "recompile", "--model", "tiny", "--json"]
    rerun = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    assert (summary["pending"], summary["rebuilt"]) == (4, 4) and orphan in summary["rebuilt_ids"]
    for k, v in OTHER_ENV.items():
        monkeypatch.setenv(k, v)
    with Catalog(url) as cat:
        other = Engine(dep.engine.loaded, DEFAULT_RUNTIME)
        rows = [a for a in cat.artifacts.listing(limit=100) if a["recompiled_from"]]
        assert len(rows) == 6 and {a["runtime_fingerprint"] for a in rows} == {other.runtime_fingerprint}
        assert len({a["recompiled_from"] for a in rows}) == 6  # none twice
        assert fsck(cat, store).ok
        assert [p for p, _, _ in recalled(Solver(other, cat, store))] == ["hash"] * 3
        assert recompile(cat, store, other).pending == 0
