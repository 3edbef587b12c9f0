"""Evals that finish and talk: the base condition's few-shot prefix is prefilled once per process and every
problem continues from a copy of it, with output bytes equal to a fresh prefill of that prefix; progress
reaches a stderr that is not a terminal."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.cli.eval_support import ProgressLines, progress_bar
from galahad.flywheel.evals.evidence import output_hash
from galahad.flywheel.evals.spec import Spec, execute
from galahad.flywheel.memory.recall import decode, graft_decode, render
from galahad.flywheel.memory.solver import Solver
from galahad.flywheel.problems import prompts
from galahad.workers import schedule as prefix
from galahad.workers.engine import Engine
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import DEFAULT_RUNTIME

PROBLEMS = ["What is 3 + 9?", "What is seven plus five?", "If x + 3 = 10, what is x?"]


@pytest.fixture(scope="module")
def engine(model_cache):
    return Engine(load_model("tiny", model_cache, DEFAULT_RUNTIME), DEFAULT_RUNTIME)


def _spec(problem: str, shared: bool) -> Spec:
    return Spec("id", "base", problem, "0", "few-shot", None, 0.0, 0, 6, shared_prefix=shared)


def test_the_prefix_is_the_few_shot_prompt_before_the_question():
    assert prefix.prefix_text() + prompts.query("What is 1 + 1?") == prompts.few_shot_prompt("What is 1 + 1?")


def test_kept_prefix_gives_the_bytes_of_a_fresh_one(engine):
    prefix.forget(engine)
    before = prefix.STATS["prefix_prefills"]
    kept = [execute(engine, None, _spec(p, True)) for p in PROBLEMS]
    assert prefix.STATS["prefix_prefills"] == before + 1  # once for all the problems
    # the control: the prefix prefilled afresh for each problem, nothing kept
    fresh = [decode(engine, prefix.few_shot(engine, p, 6, keep=False), 6) for p in PROBLEMS]
    assert prefix.STATS["prefix_prefills"] == before + 1 + len(PROBLEMS)
    assert [k["output_sha256"] for k in kept] == [output_hash(r.output_token_ids, r.output_text) for r in fresh]
    assert [k["input_sha256"] for k in kept] == [
        execute(engine, None, _spec(p, False))["input_sha256"] for p in PROBLEMS]  # the same model input
    # and the logits themselves, after the kept prefix vs after a fresh one
    pre = prefix.kept_prefix(engine, keep=True)
    ids = engine.encode(prompts.few_shot_prompt(PROBLEMS[0]), bos=True)
    n = len(pre.ids)
    assert ids[:n] == pre.ids
    a = engine.prefill(copy.deepcopy(pre.cache), ids[n:], n, last_only=True)
    fresh_cache = engine.new_cache()
    engine.prefill(fresh_cache, pre.ids, 0, last_only=True)
    b = engine.prefill(fresh_cache, ids[n:], n, last_only=True)
    assert torch.equal(a, b)


def test_records_without_the_flag_keep_the_one_span_schedule(engine):
    """Records made before `shared_prefix` replay exactly as they were made (`graft_decode`, one span)."""
    for p in PROBLEMS[:2]:
        old = execute(engine, None, _spec(p, False))
        r = graft_decode(engine, None, None, render(p, "few-shot"), 6)
        assert old["output_token_ids"] == r.output_token_ids


def test_solves_base_route_is_the_evals_base_condition(engine, tmp_path):
    """One code path: a problem memory does not know is answered by `solve` with the very bytes the evals'
    base condition records for it (the same two-span schedule, the same kept prefix)."""
    with Catalog(f"sqlite:///{tmp_path / 'catalog.sqlite3'}") as catalog:
        solver = Solver(engine, catalog, LocalStore(tmp_path / "store"))
        for p in PROBLEMS:
            route = list(solver.routes(p))[-1]
            assert route.path == "base" and route.shared_prefix
            answer = solver.answer_route(route)
            rec = execute(engine, None, Spec("id", "base", p, "0", "few-shot", None, 0.0, 0, route.max_tokens,
                                             shared_prefix=True))
            assert answer.output_text == rec["output_text"]
            assert answer.decode_tokens == len(rec["output_token_ids"])


def test_progress_lines_reach_a_stream_that_is_not_a_terminal():
    now = [0.0]
    out = io.StringIO()
    lines = ProgressLines(10, "transfer", every=5.0, stream=out, clock=lambda: now[0])
    for _ in range(3):
        now[0] += 1.0
        lines.tick()
    assert out.getvalue() == ""  # nothing before `every` seconds
    now[0] += 3.0
    lines.tick()  # 4 done at 6 s
    assert out.getvalue().splitlines() == ["transfer: 4/10 problems, 0.67/s, elapsed 0m06s, eta 0m09s"]
    for _ in range(6):
        lines.tick()  # the last one always prints
    assert out.getvalue().splitlines()[-1].startswith("transfer: 10/10 problems")
    lines.close()
    assert len(out.getvalue().splitlines()) == 2


def test_progress_bar_prints_lines_when_stderr_is_captured(capsys):
    with progress_bar(2, "recurrence") as tick:
        tick()
        tick()
    assert "recurrence: 2/2 problems" in capsys.readouterr().err
