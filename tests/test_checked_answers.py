"""Every answer checked where it can be, learned from use, and marked; transfer only where it pays (issue 42).

- `Solver.solve`'s last step (`check_computed`): a text with a computed value gets `verified` True or False
  against it, never None, and a wrong answer says what the value is;
- the service queues a computable text memory did not answer as verified, with its computed gold;
- the `similar` and `transfer` routes are closed until `eval transfer` evidence (`evals/gate_evidence.py`, recorded
  in `catalog.gates`) shows they beat the base model for that (model, library);
- `problems check` names the golds it could not check.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import record_gate
from local_depositor import local_memory, verify_and_deposit
from serve_harness import GALAHAD, seed_solution, serve_env, serving

from galahad.flywheel.catalog import problem_hash
from galahad.flywheel.cli.cmd_solve import mark
from galahad.flywheel.evals.gate_evidence import evidence
from galahad.flywheel.memory.solver import Answer, Solver
from galahad.flywheel.service.answering import Answering
from galahad.flywheel.service.api import Decoding
from galahad.verifier.verifier import Verifier


@pytest.fixture()
def memory(tmp_path, model_cache):
    with local_memory(tmp_path, model_cache) as mem:
        yield mem



def _judge(gold: str, answer: str) -> bool:
    """The one judge of equality every verdict goes through (issue 50)."""
    return Verifier().check_answer(gold, answer).verified

def learn(dep, catalog, text, answer, template="add", topic="arith"):
    return verify_and_deposit(dep, catalog.problems.add(text, answer, "test", topic, template), answer)


def _answer(text: str, path: str = "transfer", verified=None, gold_source=None) -> Answer:
    return Answer(text, path, 1, 0.0, text, verified=verified, gold_source=gold_source)


def test_the_last_step_checks_every_answer_against_the_computed_value(memory):
    dep, catalog, store, _ = memory
    solver = Solver(dep.engine, catalog, store)
    # the measured case: 15 + 27 answered 12 by transfer was returned with no warning
    wrong = solver.check_computed("What is 15 + 27?", _answer("12"))
    assert (wrong.verified, wrong.reason, wrong.computed, wrong.gold_source) == (
        False, "wrong: computed value is 42, read as 15 + 27", "42", None)
    right = solver.check_computed("Add 27 and 15.", _answer("42.0", "base"))
    assert (right.verified, right.reason, right.gold_source) == (True, None, "computed")
    recalled = solver.check_computed("What is 15 + 27?", _answer("42", "hash", True, "file:f:s"))
    assert recalled.verified is True and recalled.gold_source == "file:f:s"  # a recall keeps its provenance
    planted = solver.check_computed("What is 15 + 27?", _answer("41", "hash", True, "unchecked:raw"))
    assert planted.verified is False and planted.gold_source is None  # fail closed on a gold that predates checks
    assert solver.check_computed("Solve for x: 2x + 3 = 11", _answer("x = 4", "base")).verified is True
    unknown = solver.check_computed("Name the capital of France.", _answer("Paris", "base"))
    assert (unknown.verified, unknown.computed, unknown.reason) == (None, None, None)  # nothing to check it with
    # through the walk itself: the base model's answer to a computable text is True or False, never None
    ans = solver.solve("What is 15 + 27?")
    assert ans.path == "base" and ans.computed == "42" and ans.verified is _judge("42", ans.answer)
    assert (ans.reason is None) == ans.verified
    assert [mark(v, "42") for v in (True, None, False)] == ["verified", "unverified",
                                                             "wrong (computed value differs: 42)"]


def test_transfer_and_similar_are_closed_until_evidence_opens_them(memory):
    dep, catalog, store, _ = memory
    for text, answer in (("What is 3 + 4?", "7"), ("What is 2 + 5?", "7")):
        learn(dep, catalog, text, answer)
    odd = learn(dep, catalog, "Tell me 5 and 6 combined, please.", "11", template="odd", topic="odd")
    solver = Solver(dep.engine, catalog, store)
    fp = dep.engine.model_fingerprint

    def paths(text):
        return [r.path for r in solver.routes(text)]

    assert paths("What is 9 + 1?") == ["base"] and paths("Tell me 5 and 6 combined.") == ["base"]  # no evidence
    assert [r.path for r in solver.routes("What is 9 + 1?", gated=False)] == ["transfer", "base"]  # what evals measure
    # an eval where transfer did no better than base on the same problems: recorded, and still closed
    record_gate(catalog, fp, "template:add", "transfer", route_correct=2, base_correct=2)
    record_gate(catalog, "another-model", "template:add", "transfer")  # another model's evidence opens nothing here
    assert paths("What is 9 + 1?") == ["base"]
    record_gate(catalog, fp, "template:add", "transfer", route_correct=3, base_correct=1)  # replaces it: open
    routes = list(solver.routes("What is 9 + 1?"))
    assert [r.path for r in routes] == ["transfer", "base"] and routes[0].library == "template:add"
    assert paths("Tell me 5 and 6 combined.") == ["base"]  # similar has its own gate, by its example's library
    record_gate(catalog, fp, "template:odd", "similar")
    assert [(r.path, r.matched_problem) for r in solver.routes("Tell me 5 and 6 combined.")][0] == ("similar", odd)
    ans = solver.solve("What is 9 + 1?")
    assert ans.path == "transfer" and ans.computed == "10" and ans.verified is _judge("10", ans.answer)
    (gate,) = [g for g in catalog.gates.all() if g["model_fingerprint"] == fp and g["route"] == "transfer"]
    assert (gate["open"], gate["route_correct"], gate["base_correct"], gate["route_n"]) == (True, 3, 1, 4)


def test_gate_evidence_from_an_eval_manifest():
    def rec(pid, condition, verified, path=None, library=None, overlap="none"):
        return {"problem_id": pid, "condition": condition, "verified": verified, "path": path, "library": library,
                "overlap": overlap}

    records = [rec("a", "base", False), rec("a", "transfer", True, "transfer", "template:add"),
               rec("b", "base", True), rec("b", "transfer", False, "transfer", "template:add"),
               rec("c", "base", False), rec("c", "transfer", True, "transfer", "template:add"),
               rec("d", "base", True), rec("d", "transfer", True, "base"),  # base answered: no route measured
               rec("e", "base", False), rec("e", "transfer", True, "transfer", "template:add", overlap="hash"),
               rec("f", "base", False), rec("f", "transfer", False, "similar", "template:odd"),
               rec("a", "system", False, "base"), rec("f", "system", True, "similar", "template:odd")]
    rows = {(g["library"], g["route"]): g for g in evidence(records, "m" * 64, "fp")}
    assert set(rows) == {("template:add", "transfer"), ("template:odd", "similar")}  # the ungated walk's, preferred
    add = rows[("template:add", "transfer")]  # a, b, c: held out (e is memory's own problem)
    assert (add["open"], add["route_correct"], add["base_correct"], add["route_n"]) == (True, 2, 1, 3)
    assert add["manifest_id"] == "m" * 64 and add["model_fingerprint"] == "fp" and add["condition"] == "transfer"
    assert rows[("template:odd", "similar")]["open"] is False  # 0 of 1 vs base 0 of 1: no gain, closed
    assert evidence([r for r in records if r["condition"] != "base"], "m" * 64, "fp") == []  # no base: no evidence
    families = [{"id": "x", "condition": "base", "verified": False},
                {"id": "x", "condition": "library:template:n8", "verified": True, "library": "template:t"},
                {"id": "x", "condition": "library:template:n1", "verified": False, "library": "template:t"}]
    (fam,) = evidence(families, "m" * 64, "fp")  # what solve grafts (n8) is the evidence, not n1
    assert (fam["library"], fam["route"], fam["open"], fam["condition"]) == ("template:t", "transfer", True,
                                                                             "library:template:n8")


def test_the_service_queues_a_computable_text_with_its_computed_gold(memory):
    dep, catalog, store, _ = memory
    a = Answering(dep.engine, catalog, store)
    out = a.solve("What is 15 + 27?", decoding=Decoding(answer_policy="model"))  # the model's own labels
    assert out.path == "base" and out.computed == "42" and out.verified is _judge("42", out.answer)
    assert out.reason == (None if out.verified else "wrong: computed value is 42, read as 15 + 27")
    assert out.queued is True  # not memory's answer: learned from use, with the value as its gold
    row = catalog.problems.get(problem_hash("What is 15 + 27?"))
    assert (row["answer"], row["gold_source"], row["status"]) == ("42", "computed", "pending")
    unknown = a.solve("Name the capital of France.")
    assert unknown.verified is None and unknown.queued is False and unknown.computed is None
    assert catalog.problems.by_hash(problem_hash("Name the capital of France.")) is None  # no gold: not queued


def test_problems_check_names_the_golds_it_could_not_check(tmp_path):
    rows = [{"id": "a", "problem": "What is 2 + 2?", "answer": "4", "topic": "t", "source": "s"},
            {"id": "w1", "problem": "Who wrote Hamlet?", "answer": "Shakespeare", "topic": "t", "source": "s"},
            {"id": "w2", "problem": "Name a prime.", "answer": "7", "topic": "t", "source": "s"},
            {"id": "w3", "problem": "What colour is the sky?", "answer": "blue", "topic": "t", "source": "s"},
            {"id": "w4", "problem": "Spell cat.", "answer": "cat", "topic": "t", "source": "s"}]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmd = [sys.executable, "-m", "galahad.flywheel.cli", "problems", "check", str(path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"OK: {path} has no findings",
                                       "4 golds unchecked: no computable value (ids w1, w2, w3, ...)"]
    js = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=120)
    assert [json.loads(line) for line in js.stdout.splitlines()] == [
        {"unchecked": 4, "unchecked_ids": ["w1", "w2", "w3", "w4"]}]


@pytest.mark.slow  # a server (tiny model) and a `galahad solve` process: ~60 s
def test_checked_answers_over_http_and_the_cli(tmp_path, model_cache):
    data = tmp_path / "data"
    env = serve_env(model_cache)
    seed_solution(data, "tiny", model_cache, "What is 2 + 3?", "5", template="add")
    with serving(data, ["--model", "tiny", "--no-learn"], env) as served:
        code, ans = served.json("POST", "/v1/solve", {"problem": "What is 15 + 27?", "answer_policy": "model"})
        assert code == 200, ans
        assert ans["path"] == "base"  # the gate of template:add holds no evidence: no transfer
        assert ans["computed"] == "42" and ans["verified"] is _judge("42", ans["answer"]), ans
        assert ans["reason"] == (None if ans["verified"] else "wrong: computed value is 42, read as 15 + 27")
        assert ans["queued"] is True
        code, status = served.json("GET", f"/v1/problems/{ans['problem_id']}")
        assert code == 200 and status["status"] in ("pending", "claimed"), status
        code, other = served.json("POST", "/v1/solve", {"problem": "Name the capital of France."})
        assert code == 200 and other["verified"] is None and other["queued"] is False
    proc = subprocess.run([*GALAHAD, "--data", str(data), "solve", "What is 15 + 27?", "--model", "tiny",
                           "--answer-policy", "model"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer, detail = proc.stdout.splitlines()
    want = "verified" if _judge("42", answer) else "wrong (computed value differs: 42)"
    assert detail.strip().startswith(f"{want}, path base"), proc.stdout
    proc = subprocess.run([*GALAHAD, "--data", str(data), "solve", "What is 15 + 27?", "--model", "tiny", "--json",
                           "--answer-policy", "model"], env=env, capture_output=True, text=True, timeout=300)
    out = json.loads(proc.stdout)
    assert out["verified"] is _judge("42", out["answer"]) and out["computed"] == "42"
