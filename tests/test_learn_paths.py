"""The learning loop's and the solver's less travelled paths, on the tiny model and a real catalog:
`reconcile` (a verdict whose deposit a kill interrupted), a `ChainConflict` retried while other errors
are not, and `solve`'s transfer path with template classification."""

from __future__ import annotations

import pytest
from local_depositor import LocalDepositor as Depositor

from galahad.flywheel.artifacts.chain import load_chain
from galahad.flywheel.catalog import problem_hash
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.learn.deposit import LibraryDeposits
from galahad.flywheel.learn.loop import Flywheel, LoopConfig
from galahad.flywheel.memory.library_names import library_name
from galahad.flywheel.problems.golds import same_gold
from galahad.workers.runtime import DEFAULT_RUNTIME


def _problem(text, answer, template="t-add", topic="arith"):
    return {"id": problem_hash(text), "text": text, "answer": answer, "template": template, "topic": topic}


def _verified(catalog, problem, output=None):
    """A problem with one verified attempt: what the loop commits before it deposits."""
    catalog.problems.add(problem["text"], problem["answer"], "test", problem["topic"], problem["template"])
    attempt = catalog.runs.add_attempt(problem["id"], None, "fp", {}, output or problem["answer"], 1, 0.0, 0.0)
    verification = catalog.runs.add_verification(attempt, "test", True, "ok")
    catalog.queue.mark(problem["id"], "verified")
    return verification


@pytest.fixture()
def depositor(tmp_path, model_cache):
    d = Depositor("tiny", model_cache, DEFAULT_RUNTIME, f"sqlite:///{tmp_path / 'c.sqlite3'}", tmp_path / "store",
                  chain_max_tokens=400)
    yield d
    d.catalog.close()


def test_reconcile_deposits_a_verdict_whose_deposit_was_interrupted(depositor):
    cat = depositor.catalog
    done, cut = _problem("What is 2 + 2?", "4"), _problem("What is 3 + 3?", "6")
    depositor.deposit(done, "4", _verified(cat, done))
    v = _verified(cat, cut, output="6")  # the kill came here: verdict committed, no artifact
    assert [p["id"] for p in cat.queue.unfinished_deposits()] == [cut["id"]]
    wheel = Flywheel(cat, depositor.store, [], None, depositor.engine.model_fingerprint, LoopConfig())
    wheel.deposits = depositor  # the same LibraryDeposits logic, prefilling in this process
    assert wheel.reconcile() == 1 and wheel.tally.deposited == 1
    assert cat.queue.unfinished_deposits() == []
    sol = cat.runs.verified_solution(cut["id"])
    assert sol["verification_id"] == v and sol["artifact_id"]
    chain = cat.libraries.chain(library_name(cut))
    assert chain[-1] == sol["artifact_id"] and [a.id for a in load_chain(depositor.store, chain[-1])] == chain
    assert wheel.reconcile() == 1  # nothing left to do: no second artifact
    assert cat.stats()["artifacts"] == 4  # each verified problem: its library artifact and its recall artifact


def test_a_chain_conflict_is_retried_and_other_errors_are_not(depositor, tmp_path, model_cache):
    cat = depositor.catalog
    a, b, c = (_problem(f"What is {i} + 4?", str(i + 4)) for i in (1, 2, 3))
    other = Depositor("tiny", model_cache, DEFAULT_RUNTIME, cat.url, tmp_path / "store", 400)
    depositor.deposit(a, a["answer"], _verified(cat, a))
    calls = []

    def racing_prefill(segment, tail, extra, recall_of=None):
        calls.append(tail)
        span = depositor.worker.deposit(segment, tail, extra, recall_of)
        if len(calls) == 1:  # another job appends to the same library between our prefill and our commit
            other.deposit(b, b["answer"], _verified(other.catalog, b))
        return span

    raced = LibraryDeposits(cat, depositor.store, racing_prefill)
    d = raced.deposit(c, c["answer"], _verified(cat, c))
    assert len(calls) == 3 and calls[0]["id"] != calls[1]["id"]  # redone after the new tail
    assert calls[2] is None  # then its recall artifact: a root of its own
    chain = cat.libraries.chain(library_name(a))
    assert len(chain) == 3 and chain[-1] == d.artifact_id
    assert [x.id for x in load_chain(depositor.store, d.artifact_id)] == chain

    failing = []

    def broken_prefill(segment, tail, extra, recall_of=None):
        failing.append(1)
        raise GalahadError("store is full")

    e = _problem("What is 9 + 4?", "13")
    with pytest.raises(GalahadError, match="store is full"):
        LibraryDeposits(cat, depositor.store, broken_prefill).deposit(e, "13", _verified(cat, e))
    assert failing == [1]  # not retried

    other.catalog.close()


def test_solve_classifies_a_new_problem_and_answers_by_transfer(depositor):
    from helpers import record_gate

    from galahad.flywheel.memory.policy import RetrievalPolicy
    from galahad.flywheel.memory.solver import Solver

    cat = depositor.catalog
    learned = [_problem(f"What is {i} + 5?", str(i + 5), template="t-plus5") for i in (1, 2, 3)]
    for p in learned:
        depositor.deposit(p, p["answer"], _verified(cat, p))
    solver = Solver(depositor.engine, cat, depositor.store)
    new = "What is 7 + 5?"
    assert solver.classify(new) == {"template": "t-plus5", "topic": "arith"}
    assert solver.classify("Name the capital of Freedonia.") is None
    closed = solver.solve(new, policy=RetrievalPolicy(max_solutions=2))
    assert closed.path == "base" and closed.grafted_artifacts == []  # no evidence that transfer pays: the base model
    assert closed.computed == "12" and closed.verified is same_gold("12", closed.answer)  # checked, never unknown
    record_gate(cat, depositor.engine.model_fingerprint, "template:t-plus5")  # an eval showed transfer pays there
    ans = solver.solve(new, policy=RetrievalPolicy(max_solutions=2))
    chain = cat.libraries.chain("template:t-plus5")
    assert ans.path == "transfer" and ans.grafted_artifacts == chain[:2]
    assert ans.grafted_tokens == cat.artifacts.get(chain[1])["token_end"] and ans.decode_tokens >= 1
    explicit = solver.solve(new, template="t-plus5", policy=RetrievalPolicy(max_solutions=1))
    assert explicit.path == "transfer" and explicit.grafted_artifacts == chain[:1]
    unknown = solver.solve("Name the capital of Freedonia.")
    assert unknown.path == "base" and unknown.grafted_artifacts == []
    recur = solver.solve(learned[0]["text"])
    assert recur.path in ("hash", "transfer")  # recurrence when the tiny model copies its answer
    assert recur.grafted_artifacts and recur.grafted_artifacts[-1] in chain
