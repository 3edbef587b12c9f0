"""Artifacts made by another model or runtime never block: after importing a foreign-fingerprint bundle into
the same library names, deposits extend this engine's own chains and `solve` grafts only its own artifacts."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import record_gate, recurrence, transfer
from local_depositor import LocalDepositor

from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.catalog.bundle import export_bundle, import_bundle
from galahad.flywheel.memory.solver import Solver
from galahad.workers.runtime import DEFAULT_RUNTIME

sys.path.insert(0, str(Path(__file__).parent))
import test_catalog_workers as W  # noqa: E402

LIB = "template:t-add"


def _foreign_bundle(tmp_path: Path) -> tuple[Path, list[str]]:
    """A bundle from another machine: library `template:t-add` (chain 0) and a verified 3 + 4 made by
    another model, so the catalog already 'knows' the problem solve is asked below."""
    store = LocalStore(tmp_path / "foreign-store")
    with Catalog(f"sqlite:///{tmp_path / 'foreign.sqlite3'}") as cat:
        pid = cat.problems.add("What is 3 + 4?", "7", "unit", "arith", "t-add")
        att = cat.runs.add_attempt(pid, None, W.FP_MODEL, {}, "7", 1, 0.1, 0.1)
        ver = cat.runs.add_verification(att, "v1", True, "ok")
        chain = W.make_chain(2, seed=900)
        for j, (_aid, data) in enumerate(chain):
            cat.artifacts.deposit(store, store.put(data), verification_id=ver if j == 1 else None, library=LIB)
        bundle = tmp_path / "foreign.tar"
        export_bundle(cat, store, bundle)
    return bundle, [a for a, _ in chain]


def _problem(text: str, answer: str) -> dict:
    return {"id": problem_hash(text), "text": text, "answer": answer, "template": "t-add", "topic": "arith"}


def test_deposit_and_solve_ignore_a_foreign_fingerprint_library(tmp_path, model_cache):
    bundle, foreign = _foreign_bundle(tmp_path)
    url = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    dep = LocalDepositor("tiny", model_cache, DEFAULT_RUNTIME, url, tmp_path / "store")
    cat, store = dep.catalog, dep.store
    try:
        assert import_bundle(cat, store, bundle, trust_unsigned=True)["added"]["artifacts"] == 2
        assert cat.libraries.tail(LIB)["id"] == foreign[-1]  # the foreign chain is the library's newest
        placed = []
        for text, answer in (("What is 3 + 4?", "7"), ("What is 2 + 5?", "7")):
            p = _problem(text, answer)
            cat.problems.add(text, answer, "unit", "arith", "t-add")
            att = cat.runs.add_attempt(p["id"], None, dep.engine.model_fingerprint, {}, answer, 1, 0.0, 0.0)
            placed.append(dep.deposit(p, answer, cat.runs.add_verification(att, "v1", True, "ok")))
        # Our deposits start and extend our own chain: the foreign tail neither blocked nor was extended.
        assert [(d.chain_index, d.position) for d in placed] == [(1, 0), (1, 1)]
        assert placed[0].start == 0 and placed[1].start == placed[0].start + placed[0].tokens
        fps = (dep.engine.model_fingerprint, dep.engine.runtime_fingerprint)
        assert cat.libraries.chain(LIB, fingerprints=fps) == [d.artifact_id for d in placed]
        assert cat.libraries.first_chain([LIB], fps) == (LIB, [d.artifact_id for d in placed])  # what routing reads
        assert cat.libraries.chain(LIB, 0) == foreign
        solver = Solver(dep.engine, cat, store)
        rec = recurrence(solver, "What is 3 + 4?")  # verified twice: by the foreign model and by ours
        own = cat.recalls.get(_problem("What is 3 + 4?", "7")["id"], fps)  # recurrence grafts the recall artifact
        assert own is not None and cat.artifacts.get(own["artifact_id"])["model_fingerprint"] == fps[0]
        assert rec is not None and rec.grafted_artifacts == [own["artifact_id"]]
        assert not set(rec.grafted_artifacts) & set(foreign)
        moved = transfer(solver, "What is 1 + 1?", "t-add", "arith")
        assert moved is not None and moved.grafted_artifacts == [d.artifact_id for d in placed]
        assert solver.solve("What is 6 + 1?", "t-add", "arith").path == "base"  # no evidence yet: the gate is shut
        record_gate(cat, fps[0], LIB)  # an eval showed transfer pays for our model in this library
        ans = solver.solve("What is 6 + 1?", "t-add", "arith")
        assert ans.path == "transfer" and ans.grafted_artifacts == [d.artifact_id for d in placed]
    finally:
        cat.close()


def test_recurrence_skips_a_problem_verified_only_by_another_model(tmp_path, model_cache):
    bundle, foreign = _foreign_bundle(tmp_path)
    dep = LocalDepositor("tiny", model_cache, DEFAULT_RUNTIME, f"sqlite:///{tmp_path / 'c.sqlite3'}",
                         tmp_path / "store")
    try:
        import_bundle(dep.catalog, dep.store, bundle, trust_unsigned=True)
        solver = Solver(dep.engine, dep.catalog, dep.store)
        assert recurrence(solver, "What is 3 + 4?") is None  # not a fingerprint-mismatch error
        ans = solver.solve("What is 3 + 4?", "t-add", "arith")  # no own chain yet: the base model answers
        assert ans.path == "base" and ans.grafted_artifacts == []
    finally:
        dep.catalog.close()
