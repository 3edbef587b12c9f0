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
