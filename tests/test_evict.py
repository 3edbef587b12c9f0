"""A disk budget: `catalog evict --to SIZE` deletes least recently grafted blobs, never rows, tokens or
verdicts, and spares what the depositor extends; a graft of an evicted artifact rebuilds it byte-identical
(same id, checked by hash), and the rebuild is counted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import recurrence
from local_depositor import LocalDepositor

from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.catalog.evictions import evict
from galahad.flywheel.catalog.fsck import fsck
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.rebuild import RebuildingStore
from galahad.flywheel.memory.solver import Solver
from galahad.workers.runtime import DEFAULT_RUNTIME

sys.path.insert(0, str(Path(__file__).parent))
import test_catalog_workers as W  # noqa: E402


def test_evict_takes_the_least_recently_grafted_and_keeps_every_row(catalog_url, tmp_path):
    store = LocalStore(tmp_path / "store")
    with Catalog(catalog_url) as cat:
        ids = W.populate(cat, store)  # library `arith`: chain 0 (3 artifacts), chain 1 (the current one)
        old_chain = ids["chain"]
        rows_before = {a["id"]: a["token_ids"] for a in map(cat.artifacts.get, old_chain + ids["second_chain"])}
        size = {a: cat.artifacts.get(a)["size"] for a in rows_before}
        cat.evictions.touch([old_chain[0]])  # grafted lately: the last to go
        total = sum(size.values())
        out = evict(cat, store, total - size[old_chain[1]])  # room for exactly one eviction
        assert out["evicted"] == [old_chain[1]] and out["after_bytes"] <= out["target_bytes"]
        out = evict(cat, store, 0)  # everything it may: the current chain (what a deposit extends) stays
        assert out["evicted"] == [old_chain[2], old_chain[0]] and out["protected"] == 1
        assert sorted(store.ids()) == ids["second_chain"]
        assert {a: cat.artifacts.get(a)["token_ids"] for a in rows_before} == rows_before  # rows, tokens stay
        assert cat.artifacts.lineage(old_chain[2])["verification"]["id"] == ids["verification"]
        s = cat.stats()
        assert (s["artifacts"], s["evicted"], s["resident_bytes"]) == (4, 3, size[ids["second_chain"][0]])
        report = fsck(cat, store)
        assert report.ok and report.evicted == 3 and report.dangling == []  # evicted is not damage
        with pytest.raises(GalahadError, match="evicted"):
            from galahad.flywheel.catalog.bundle import export_bundle

            export_bundle(cat, store, tmp_path / "b.galahad")  # says how to rebuild first
        with pytest.raises(GalahadError, match="non-negative"):
            evict(cat, store, -1)


@pytest.mark.slow
def test_an_evicted_artifact_is_rebuilt_byte_identical(tmp_path, model_cache):
    dep = LocalDepositor("tiny", model_cache, DEFAULT_RUNTIME, f"sqlite:///{tmp_path / 'c.sqlite3'}",
                         tmp_path / "store", chain_max_tokens=40)  # short chains: old ones can be evicted
    cat, store = dep.catalog, dep.store
    try:
        texts = [("What is 3 + 4?", "7"), ("What is 2 + 5?", "7"), ("What is 6 + 1?", "7"), ("What is 1 + 2?", "3")]
        for text, answer in texts:
            pid = cat.problems.add(text, answer, "unit", "arith", "t-add")
            att = cat.runs.add_attempt(pid, None, dep.engine.model_fingerprint, {}, answer, 1, 0.0, 0.0)
            dep.deposit({"id": pid, "text": text, "answer": answer, "template": "t-add", "topic": "arith"}, answer,
                        cat.runs.add_verification(att, "v1", True, "ok"))
        blobs = {a: store.get(a) for a in store.ids()}
        solver = Solver(dep.engine, cat, store)
        before = [recurrence(solver, t).output_text for t, _ in texts]
        chain0 = cat.libraries.chain("template:t-add", 0)
        out = evict(cat, store, 0, spare_current=False)  # everything: no learner runs here
        gone = set(out["evicted"])
        assert len(gone) >= len(texts) + 1 and set(chain0) <= gone  # every recall, and a whole old chain
        assert not gone & set(store.ids())

        again = Solver(dep.engine, cat, store)
        after = [recurrence(again, t).output_text for t, _ in texts]  # each graft rebuilds its recall artifact
        assert after == before
        tail = RebuildingStore(store, cat, dep.engine).get_checked(chain0[-1])  # a child of an evicted parent
        assert tail.buffer == blobs[chain0[-1]]
        rebuilt = gone & set(store.ids())
        assert rebuilt == {*chain0, *(cat.recalls.get(problem_hash(t))["artifact_id"] for t, _ in texts)}
        assert all(store.get(a) == blobs[a] for a in rebuilt)  # byte-identical, under the same ids
        s = cat.stats()
        assert s["rebuilds"] == len(rebuilt) and s["evicted"] == len(gone - rebuilt)
        assert fsck(cat, store).ok
    finally:
        cat.close()
