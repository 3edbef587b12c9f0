"""Worker logic without Ray: seeded generation, chained deposits that graft exactly, chain overflow."""

import hashlib

import pytest
from local_depositor import LocalDepositor as Depositor

from galahad.flywheel.artifacts.chain import load_chain
from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import problem_hash
from galahad.flywheel.memory.library_names import library_name
from galahad.flywheel.problems import prompts
from galahad.workers.generator import Generator
from galahad.workers.graft import restore
from galahad.workers.runtime import DEFAULT_RUNTIME
from galahad.workers.sampling import SamplingConfig


def _problem(text, answer="7", template="t-add", topic="arith"):
    return {"id": problem_hash(text), "text": text, "answer": answer, "template": template, "topic": topic}


@pytest.fixture()
def depositor(tmp_path, model_cache):
    url = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    d = Depositor("tiny", model_cache, DEFAULT_RUNTIME, url, tmp_path / "store", chain_max_tokens=120)
    yield d
    d.catalog.close()


def _verification(catalog, problem):
    catalog.problems.add(problem["text"], problem["answer"], "test", problem["topic"], problem["template"])
    attempt = catalog.runs.add_attempt(problem["id"], None, "fp", {}, problem["answer"], 1, 0.0, 0.0)
    return catalog.runs.add_verification(attempt, "test", True, "ok")


def test_generator_is_seeded_and_reproducible(model_cache):
    gen = Generator("tiny", model_cache, DEFAULT_RUNTIME.with_(threads=1))
    p = _problem("What is 3 + 4?")
    cfg = SamplingConfig(k=4, max_tokens=6, seed=5)
    a = gen.attempt(p, cfg)
    b = gen.attempt(p, cfg, first=2, count=2)
    assert [r.output_text for r in a[2:]] == [r.output_text for r in b]
    assert [r.sample for r in a] == [0, 1, 2, 3] and len({r.seed for r in a}) == 4
    assert all(0 < r.tokens <= 6 and r.cpu_seconds >= 0 for r in a)
    assert a[0].energy_joules is None  # no GPU here: CPU time is the cost figure


def test_deposits_chain_per_library_and_graft_exactly(depositor):
    eng = depositor.engine
    problems = [_problem(f"What is {i} + 2?", str(i + 2)) for i in range(3)]
    placed = [depositor.deposit(p, p["answer"], _verification(depositor.catalog, p)) for p in problems]
    assert [d.position for d in placed] == [0, 1, 2] and {d.chain_index for d in placed} == {0}
    assert placed[1].start == placed[0].start + placed[0].tokens
    chain = load_chain(depositor.store, placed[-1].artifact_id)
    assert [a.id for a in chain] == depositor.catalog.libraries.chain(library_name(problems[0]))
    # the grafted chain equals a fresh prefill of the same segments, byte for byte
    fresh = eng.new_cache()
    for a in chain:
        eng.prefill(fresh, list(a.meta.token_ids), a.meta.start)
    q = eng.encode(prompts.query(problems[0]["text"]), bos=False)
    end = chain[-1].meta.end
    ref = eng.forward(fresh, q, end)
    got = eng.forward(restore(eng, chain), q, end)
    assert hashlib.sha256(ref.numpy().tobytes()).digest() == hashlib.sha256(got.numpy().tobytes()).digest()


def test_chain_overflow_starts_new_chain_and_restart_restores(depositor, tmp_path, model_cache):
    problems = [_problem(f"What is {i} + {i}? Please answer carefully.", str(2 * i)) for i in range(6)]
    placed = [depositor.deposit(p, p["answer"], _verification(depositor.catalog, p)) for p in problems]
    by_chain: dict[int, list[str]] = {}
    for r in depositor.catalog.artifacts.listing(limit=10**6, library=library_name(problems[0])):
        by_chain.setdefault(r["chain_index"], []).append(r["id"])
    chains = [by_chain[k] for k in sorted(by_chain)]
    assert len(chains) >= 2 and sum(len(c) for c in chains) == 6
    assert all(depositor.catalog.artifacts.get(c[-1])["token_end"] <= 120 for c in chains)
    assert placed[-1].artifact_id == chains[-1][-1]
    # a new depositor (a restarted actor) restores the tail from the store and appends exactly after it
    other = Depositor("tiny", model_cache, DEFAULT_RUNTIME, depositor.catalog.url, tmp_path / "store", 120)
    p = _problem("What is 9 + 9?", "18")
    tail = other.catalog.libraries.tail(library_name(p))
    d = other.deposit(p, "18", _verification(other.catalog, p))
    chain = load_chain(LocalStore(tmp_path / "store"), d.artifact_id)
    # The segment fits after the restored tail (so the restart path, restore then append, is what runs).
    assert tail["token_end"] + d.tokens <= 120, "test set-up: the segment must fit after the tail"
    assert chain[-2].id == placed[-1].artifact_id == tail["id"] and d.start == tail["token_end"]
    other.catalog.close()


def test_verified_deposit_has_lineage(depositor):
    p = _problem("What is 1 + 6?", "7")
    v = _verification(depositor.catalog, p)
    d = depositor.deposit(p, "7", v)
    lineage = depositor.catalog.artifacts.lineage(d.artifact_id)
    text = str(lineage)
    assert v in text and p["id"] in text


def test_two_depositors_racing_on_one_library_keep_the_chain_linear(depositor, tmp_path, model_cache):
    other = Depositor("tiny", model_cache, DEFAULT_RUNTIME, depositor.catalog.url, tmp_path / "store", 120)
    a, b, c = (_problem(f"What is {i} + 1?", str(i + 1)) for i in (1, 2, 3))
    depositor.deposit(a, a["answer"], _verification(depositor.catalog, a))
    other.deposit(b, b["answer"], _verification(other.catalog, b))  # other now holds the live tail
    # depositor's live cache is stale (its tail is a, the catalog's is b): it must restore, not append after a
    d = depositor.deposit(c, c["answer"], _verification(depositor.catalog, c))
    chain = depositor.catalog.libraries.chain(library_name(a))
    assert chain[-1] == d.artifact_id and len(chain) == 3
    assert [x.id for x in load_chain(depositor.store, d.artifact_id)] == chain
    other.catalog.close()
