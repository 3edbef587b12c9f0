"""Gold solutions (issue 52 item 1), on the tiny model and a real SQLite catalog: when no sample verified,
the learner deposits a trusted (computed) gold as the solution, provenance `gold`, and it is recalled
exactly like a sampled one (graft == fresh, byte for byte); a gold someone only gave, or one the key reader
no longer computes, never becomes a solution; the switch turns it off; a tenant's stays in its scope."""

from __future__ import annotations

import itertools

from local_depositor import local_memory

from galahad.flywheel.app.intake import admit
from galahad.flywheel.cli.main import main
from galahad.flywheel.config import LoopConfig
from galahad.flywheel.evals.recurrence import candidates
from galahad.flywheel.evals.spec import Spec, execute
from galahad.flywheel.learn.background import BackgroundDeposits
from galahad.flywheel.learn.gold_solutions import trusted_gold
from galahad.flywheel.learn.loop import Flywheel
from galahad.flywheel.memory.recall import graft_decode
from galahad.flywheel.problems import prompts
from galahad.flywheel.problems.golds import COMPUTED
from galahad.flywheel.problems.records import problem_from_dict


def _wheel(dep, catalog, store, config: LoopConfig) -> Flywheel:
    """The loop with the local depositor: its background deposits prefill in this process."""
    wheel = Flywheel(catalog, store, [], None, dep.engine.model_fingerprint, config)
    wheel.deposits = dep
    spans: dict[int, object] = {}
    refs = itertools.count()

    def submit(segment, tail, extra, recall_of=None):
        ref = next(refs)
        spans[ref] = dep.prefill(segment, tail, extra, recall_of)
        return ref

    wheel.background = BackgroundDeposits(dep, submit, spans.pop)
    return wheel


def _drain(wheel: Flywheel) -> None:
    while wheel.background.refs():
        wheel.background.done(wheel.background.refs()[0])


def test_trusted_gold_is_the_computed_one_only():
    text = "What is 7 * 8?"
    assert trusted_gold({"text": text, "answer": "56", "gold_source": COMPUTED}) == "56"
    assert trusted_gold({"text": text, "answer": "56", "gold_source": "file:x.jsonl"}) is None  # only given
    assert trusted_gold({"text": text, "answer": "54", "gold_source": COMPUTED}) is None  # a row that lies
    assert trusted_gold({"text": "Name a colour.", "answer": "red", "gold_source": COMPUTED}) is None


def test_a_gold_solution_is_deposited_and_recalled_exactly(tmp_path, model_cache, capsys):
    with local_memory(tmp_path, model_cache) as (dep, catalog, store, _):
        asked = [problem_from_dict({"problem": "What is 7 * 8?", "answer": "56"}),
                 problem_from_dict({"problem": "Name the first colour of the rainbow.", "answer": "red"})]
        computed, given = admit(catalog, asked, ["a:1", "a:2"], "test")
        admit(catalog, [problem_from_dict({"problem": "What is 9 * 6?", "answer": "54"})], ["t:1"], "test",
              scope="acme")
        run_id = catalog.runs.start({})
        claimed = {p["id"]: p for p in catalog.queue.claim(10, "w", 60.0)}
        assert len(claimed) == 3
        off = _wheel(dep, catalog, store, LoopConfig(gold_solutions=False))
        assert not off._gold_solution(run_id, claimed[computed])  # the switch: the problem fails as before
        wheel = _wheel(dep, catalog, store, LoopConfig())
        assert not wheel._gold_solution(run_id, claimed[given])  # a gold someone only gave: never written
        solved = [pid for pid in claimed if wheel._gold_solution(run_id, claimed[pid])]
        assert given not in solved and computed in solved and len(solved) == 2 and wheel.tally.gold_solutions == 2
        _drain(wheel)
        for pid in solved:
            problem = catalog.problems.get(pid)
            sol = catalog.runs.verified_solution(pid)
            assert problem["status"] == "verified" and sol["provenance"] == "gold" and sol["tokens"] == 0
            recall = catalog.recalls.get(pid)
            art = catalog.artifacts.get(recall["artifact_id"])
            assert art["scope"] == problem["scope"]  # a tenant's gold solution stays in its scope
            query = prompts.query(problem["text"])
            graft = graft_decode(dep.engine, store, recall["artifact_id"], query, 8)
            assert graft.artifacts == [recall["artifact_id"]]
        covered = [p for p in candidates(catalog, None) if p["id"] in solved]  # what `eval recurrence` covers
        assert len(covered) == 2
        for p in covered:  # the recurrence eval's graft spec, and the same tokens prefilled afresh: same bytes
            graft = execute(dep.engine, store, Spec(p["id"], "graft", p["text"], p["answer"], "query",
                                                    p["artifact_id"], max_tokens=8))
            fresh = execute(dep.engine, store, Spec(p["id"], "graft", p["text"], p["answer"], "query",
                                                    p["artifact_id"], max_tokens=8, recompute=True))
            assert graft["output_token_ids"] == fresh["output_token_ids"] and graft["decode_tokens"] > 0
            assert graft["output_sha256"] == fresh["output_sha256"] and graft["input_sha256"] == fresh["input_sha256"]
        assert {catalog.problems.get(pid)["scope"] for pid in solved} == {"shared", "acme"}
        assert catalog.problems.get(given)["status"] == "claimed"  # the loop marks it failed
        assert catalog.stats()["gold_solutions"] == 2
        assert {r["provenance"] for r in catalog.activity.latest_verified(5)} == {"gold"}  # /ui's latest
        capsys.readouterr()
        argv = ["--data", str(tmp_path / "d"), "catalog", "--catalog", catalog.url, "--store", str(tmp_path / "store"),
                "show", computed]
        assert main(argv) == 0
        shown = capsys.readouterr().out.split("verified solution:")[1]
        assert "provenance           gold" in shown and "output_text          56" in shown
