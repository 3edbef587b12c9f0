"""A replica's recall memo (`service/recall_memo.py`) and the per-stage timing (`service/request.py`): a repeated
hash hit is answered from the memo with the very bytes a fresh graft + decode gives, the lookup and the
verification still run, only recall routes are kept, and each solve reports where its time went. The stored
tier (the catalog's decodes): `test_stored_recall.py`."""

from __future__ import annotations

from dataclasses import replace

import pytest
from local_depositor import local_memory, verify_and_deposit

from galahad.flywheel.memory.recall import Recalled
from galahad.flywheel.memory.solver import Route
from galahad.flywheel.service import request
from galahad.flywheel.service.answering import Answering
from galahad.flywheel.service.recall_memo import RecallMemo
from galahad.verifier.verifier import Verifier

TEXT, GOLD = "What is 2 + 3?", "5"


@pytest.fixture()
def memory(tmp_path, model_cache):
    with local_memory(tmp_path, model_cache) as (dep, catalog, store, _):
        verify_and_deposit(dep, catalog.problems.add(TEXT, GOLD, "test", "arith", "add"), GOLD)
        yield dep, catalog, store


def _bytes(out) -> tuple:
    return out.answer, out.path, out.verified, out.decode_tokens, out.choices, out.prompt_tokens


def test_a_repeated_hit_is_answered_from_the_memo_with_a_fresh_decode_s_bytes(memory):
    dep, catalog, store = memory
    assert catalog.recall_answers.count() == 1  # the depositor stored the recall's decode; a replica reads it once
    a = Answering(dep.engine, catalog, store)
    stages = request.begin().stages
    first = a.solve(TEXT)  # the hash route read back from the catalog (the tiny random model need not copy the
    assert (a.memo.stored_hits, a.memo.hits, len(a.memo)) == (1, 0, 1)  # gold: the walk may go on to the base model)
    assert {"check", "stored", "walk", "solve"} <= set(stages) and "memo" not in stages
    assert all(v >= 0 for v in stages.values())

    stages = request.begin().stages
    again = a.solve(TEXT)
    assert (a.memo.stored_hits, a.memo.hits, len(a.memo)) == (1, 1, 1) and "memo" in stages and "stored" not in stages
    assert "walk" in stages  # the lookup and the verification still ran
    assert _bytes(again) == _bytes(first)
    recall = a.solver.decode(next(a.solver.routes(TEXT)))  # the hash route decoded afresh: the memo's bytes
    (kept,) = a.memo._kept.values()
    assert (kept.output_token_ids, kept.output_text, kept.prompt_token_ids, kept.start) == (
        recall.output_token_ids, recall.output_text, recall.prompt_token_ids, recall.start)


def test_the_memo_keys_a_recall_by_what_its_output_is_a_function_of():
    memo = RecallMemo(2)
    r = Recalled(["t"], 5, [1, 2], [3], " 5", 0.1)
    hit = Route("hash", "t" * 64, TEXT, "query", 8, GOLD)
    memo.put(hit, r)
    assert memo.get(hit) == (r, "memo")
    for other in (replace(hit, tail="u" * 64), replace(hit, max_tokens=2), replace(hit, decoded="What is 3 + 2?")):
        assert memo.get(other) is None
    memo.put(Route("transfer", "t" * 64, TEXT, "query", 8), r)  # an inexact route: never kept
    memo.put(Route("base", None, TEXT, "few-shot", 16), r)
    assert len(memo) == 1
    memo.put(replace(hit, tail="a" * 64), r)
    memo.put(replace(hit, tail="b" * 64), r)  # over capacity: the least recently used goes
    assert len(memo) == 2 and memo.get(hit) is None
    assert RecallMemo(0).get(hit) is None


def test_server_timing_round_trips():
    parse = request.parse_server_timing
    assert parse(request.server_timing({"graft": 0.0021, "decode": 0.1})) == {"graft": 2.1, "decode": 100.0}
    assert parse(None) == {} and parse("x, y;desc=z") == {}


def test_a_recall_the_verifier_accepts_is_never_labelled_false(tmp_path, model_cache):
    """Issue 50's case: "What is 6 + 6?" (gold 12) recalled by hash as `+ 12` was `verified: false`, "wrong:
    computed value is 12", by a second, stricter judge beside the verifier. The recall's decode is put in the
    replica's memo (the bytes a decode of `+ 12` gives), so the walk answers with exactly that."""
    text = "What is 6 + 6?"
    assert Verifier().check_answer("12", "+ 12").verified
    with local_memory(tmp_path, model_cache) as (dep, catalog, store, _):
        verify_and_deposit(dep, catalog.problems.add(text, "12", "test", "arith", "add"), "12")
        a = Answering(dep.engine, catalog, store)
        route = next(a.solver.routes(text))
        assert route.path == "hash" and route.gold == "12"
        ids = dep.engine.encode(" + 12\n", bos=False)
        a.memo.put(route, Recalled([route.tail], 10, [1, 2], ids, " + 12\n", 0.0))
        out = a.solve(text)
        assert (out.path, out.answer, out.verified, out.reason) == ("hash", "+ 12", True, None), out
        assert (out.computed, out.reading) == ("12", "6 + 6") and out.gold_source is not None
        assert out.queued is False  # memory's own verified answer: nothing to learn
