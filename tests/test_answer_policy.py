"""Right answers when the service knows them (issue 52 item 3), the rule itself (`memory/solver.by_policy`):
where the computed value refutes the model's answer, the caller gets the value (path `computed`, verified)
with the model's answer beside it; `answer_policy: model` keeps the model's answer labelled wrong; an answer
nothing refuted is never touched."""

from __future__ import annotations

import pytest

from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.solver import Answer, by_policy


def _answer(answer: str, verified, computed=None, path="base") -> Answer:
    return Answer(answer, path, 3, 0.1, answer, verified=verified, computed=computed,
                  reason="wrong: computed value is 56, read as 7 × 8" if verified is False else None)


def test_a_refuted_answer_becomes_the_computed_value_unless_the_policy_is_model():
    refuted = _answer("14", False, "56")
    got = by_policy(refuted)
    assert (got.answer, got.path, got.verified, got.reason, got.gold_source, got.model_answer) == (
        "56", "computed", True, None, "computed", "14")
    assert got.computed == "56" and got.decode_tokens == 3  # what the walk cost stays reported
    assert by_policy(refuted, "model") == refuted  # evaluations of the model: as it answered, labelled wrong
    for kept in (_answer("56", True, "56"), _answer("Paris", None), _answer("56", True, "56", "hash")):
        assert by_policy(kept) == kept and by_policy(kept, "model") == kept
    with pytest.raises(GalahadError, match="answer_policy must be one of computed, model"):
        by_policy(refuted, "gold")


def test_every_eval_manifest_says_it_measured_the_model(tmp_path):
    from galahad.flywheel.evals.evidence import read_manifest, write_manifest

    path = write_manifest({"kind": "recurrence", "config": {}, "records": [], "scores": {}}, tmp_path / "m.json")
    assert read_manifest(path)["answer_policy"] == "model"


def test_the_service_answers_the_value_its_check_knows_and_retries_a_failed_problem(tmp_path, model_cache):
    """Answering on the tiny model (it does not know 15 + 27): the default policy answers 42, verified, the
    model's answer beside it; `model` gives the model's answer labelled wrong; a failed problem asked again
    is queued again once its backoff has passed; /v1/problems/{id} says who wrote a verified solution."""
    from local_depositor import local_memory, verify_and_deposit

    from galahad.flywheel.catalog import problem_hash
    from galahad.flywheel.config import LoopConfig
    from galahad.flywheel.service.answering import Answering
    from galahad.flywheel.service.api import Decoding
    from galahad.verifier.verifier import Verifier

    text = "What is 15 + 27?"
    with local_memory(tmp_path, model_cache) as (dep, catalog, store, _):
        a = Answering(dep.engine, catalog, store)
        model = a.solve(text, decoding=Decoding(answer_policy="model"))
        assert model.path == "base" and model.model_answer is None and model.computed == "42"
        ours = a.solve(text)
        if model.verified is False:  # the model's answer refuted: the caller gets the value
            assert (ours.answer, ours.path, ours.verified, ours.model_answer, ours.gold_source, ours.reason) == (
                "42", "computed", True, model.answer, "computed", None)
            assert ours.choices[0].model_answer == model.answer and ours.choices[0].verified is True
        else:  # the model was right: nothing to replace
            assert Verifier().check_answer("42", model.answer).verified and ours.path == "base"
        pid = problem_hash(text)
        row = catalog.queue.claim(1, "w", 60.0)[0]
        catalog.queue.mark(row["id"], "failed", {"attempts": 1, "distinct_answers": 1, "no_answer": 0,
                                                 "most_common": None, "closest": None})
        a.loop = LoopConfig(retry_delay_seconds=1e9)
        assert a.solve(text).queued is False  # its backoff has not passed
        a.loop = LoopConfig(retry_delay_seconds=0)
        assert a.solve(text).queued is True and catalog.problems.get(pid)["status"] == "pending"
        verify_and_deposit(dep, pid, "42")
        assert a.problem(pid)["solution"] == "sampled"
        again = a.solve(text)  # the tiny model does not copy its graft: the recall does not verify, the value answers
        assert again.answer == "42" and again.verified is True and again.solution is None
