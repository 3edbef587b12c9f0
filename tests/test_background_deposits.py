"""Deposits in the background: a real depositor actor and a real catalog; the caller never waits on a
prefill (neither a library deposit's nor its recall deposit's), consecutive deposits into one library chain
onto each other, and a chain conflict is redone."""


import pytest
import ray
from local_depositor import LocalDepositor
from local_ray import local_ray as start_local_ray

from galahad.flywheel.artifacts.chain import load_chain
from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.learn.background import BackgroundDeposits
from galahad.flywheel.learn.deposit import LibraryDeposits
from galahad.flywheel.learn.loop import fetch_span, remote_prefill
from galahad.flywheel.memory.library_names import library_name
from galahad.workers.actors import start_depositor
from galahad.workers.runtime import DEFAULT_RUNTIME

RT = DEFAULT_RUNTIME.with_(threads=1)


@pytest.fixture(scope="module")
def local_ray():
    with start_local_ray(num_cpus=2):
        yield


def _problem(text, answer, template="t-add"):
    return {"id": problem_hash(text), "text": text, "answer": answer, "template": template, "topic": "arith"}


def _verified(catalog, p):
    catalog.problems.add(p["text"], p["answer"], "test", p["topic"], p["template"])
    attempt = catalog.runs.add_attempt(p["id"], None, "fp", {}, p["answer"], 1, 0.0, 0.0)
    return catalog.runs.add_verification(attempt, "test", True, "ok")


@pytest.fixture
def setup(local_ray, tmp_path, model_cache):
    url = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    catalog, store = Catalog(url), LocalStore(tmp_path / "store")
    actor = start_depositor(0, "tiny", str(model_cache), RT, str(tmp_path / "store"), 4096, ram_tier_bytes=7 << 20)
    # the depositor's store has the tier the job asked for (`run --ram-tier`, `serve --ram-tier`)
    assert ray.get(actor.__ray_call__.remote(lambda self: self.store.ram.capacity)) == 7 << 20
    deposits = LibraryDeposits(catalog, store, remote_prefill(actor))
    deposits.prefill = _never_waits  # every background request, the recall deposit's too, goes by a ref
    bg = BackgroundDeposits(deposits, lambda seg, tail, extra, recall_of=None: actor.deposit.remote(seg, tail, extra, recall_of), fetch_span)
    yield catalog, store, bg, url, tmp_path
    ray.kill(actor)
    catalog.close()


def _never_waits(segment, tail, extra, recall_of=None):
    raise AssertionError("a background deposit waited on a prefill")


def _drain(bg, max_in_flight_per_library=1):
    placed = []
    while bg.refs():
        libs = [req.library for req in bg.in_flight.values()]  # library deposits (recalls extend no chain)
        assert not libs or max(libs.count(x) for x in libs) <= max_in_flight_per_library
        ready, _ = ray.wait(bg.refs(), num_returns=1, timeout=300)
        assert ready, "a deposit did not return"
        d = bg.done(ready[0])
        if d is not None:
            placed.append(d)
    return placed


def test_deposits_return_at_once_and_chain_per_library(setup):
    catalog, store, bg, _, _ = setup
    add = [_problem(f"What is {i} + 3?", str(i + 3)) for i in range(3)]
    mul = [_problem(f"What is {i} times 2?", str(2 * i), template="t-mul") for i in range(2)]
    for p in (add[0], mul[0], add[1], add[2], mul[1]):
        bg.add(p, p["answer"], _verified(catalog, p))  # returns without waiting on any prefill
    assert len(bg) == 5 and len(bg.refs()) == 2  # one in flight per library, the rest queued behind it
    placed = _drain(bg)
    assert len(placed) == 5 and len(bg) == 0
    for group in (add, mul):
        lib = library_name(group[0])
        chain = catalog.libraries.chain(lib)
        assert len(chain) == len(group)
        ds = [d for d in placed if d.library == lib]
        assert [d.position for d in ds] == list(range(len(group)))
        assert all(b.start == a.start + a.tokens for a, b in zip(ds, ds[1:], strict=False))  # each after the last
        assert [a.id for a in load_chain(store, chain[-1])] == chain
        assert all(catalog.artifacts.get(a)["verification_id"] for a in chain)
    assert catalog.queue.unfinished_deposits() == [] and catalog.recalls.missing() == []
    for p in add + mul:  # each recall artifact: the solution alone, a root, blob in the store
        art = catalog.artifacts.get(catalog.recalls.get(p["id"])["artifact_id"])
        assert art["parent_id"] is None and store.has(art["id"])


def test_a_chain_conflict_in_the_background_is_redone_after_the_new_tail(setup, model_cache):
    catalog, store, bg, url, tmp_path = setup
    a, b, c = (_problem(f"What is {i} + 5?", str(i + 5)) for i in (1, 2, 3))
    bg.add(a, a["answer"], _verified(catalog, a))
    _drain(bg)
    bg.add(b, b["answer"], _verified(catalog, b))  # prefilled after a ...
    other = LocalDepositor("tiny", model_cache, RT, url, tmp_path / "store", 4096)
    other.deposit(c, c["answer"], _verified(other.catalog, c))  # ... but another job appends c first
    placed = _drain(bg)
    assert len(placed) == 1
    chain = catalog.libraries.chain(library_name(a))
    assert len(chain) == 3 and chain[-1] == placed[0].artifact_id
    assert [x.id for x in load_chain(store, chain[-1])] == chain
    other.catalog.close()
