"""A hit answers from memory (issue 51): the recall decode is computed once where its artifact is deposited and
stored in the catalog (`catalog.recall_answers`), so a first hit on a fresh replica is a catalog read with the
very bytes a fresh graft -> decode gives; a replica that had to decode one stores it (write-through); a caller
who asks for the model's own decode gets it decoded now, with the same bytes; a stored decode answers only the
caps it is exact for; tokens and Server-Timing say what happened."""

from __future__ import annotations

from dataclasses import replace

import pytest
from local_depositor import local_memory, verify_and_deposit

from galahad.flywheel.catalog.recall_answers import answers_cap
from galahad.flywheel.service import request
from galahad.flywheel.service.answering import Answering
from galahad.flywheel.service.api import Decoding
from galahad.flywheel.service.openai_protocol import usage

TEXT, GOLD = "What is 2 + 3?", "5"


def _no_stored_decode(dep):
    """The depositor's prefill without the recall decode: a catalog as older releases left it."""
    dep.prefill = lambda segment, tail, extra, recall_of=None: dep.worker.deposit(segment, tail, extra)


@pytest.fixture()
def memory(tmp_path, model_cache):
    with local_memory(tmp_path, model_cache) as (dep, catalog, store, _):
        yield dep, catalog, store


def _row(catalog, a: Answering, route):
    return catalog.recall_answers.get(route.tail, route.decoded, route.prompt, route.max_tokens, a.solver.fingerprints)


def test_the_decode_stored_at_deposit_is_a_fresh_graft_decode_s_bytes(memory):
    dep, catalog, store = memory
    verify_and_deposit(dep, catalog.problems.add(TEXT, GOLD, "test", "arith", "add"), GOLD)
    a = Answering(dep.engine, catalog, store)
    route = next(a.solver.routes(TEXT))
    assert route.path == "hash"
    row = _row(catalog, a, route)
    fresh = a.solver.decode(route)  # graft -> decode, now
    assert row is not None and (row["output_token_ids"], row["output_text"], row["prompt_token_ids"], row["start"],
                                row["chain"]) == (fresh.output_token_ids, fresh.output_text, fresh.prompt_token_ids,
                                                  fresh.start, fresh.artifacts)
    # under another engine's fingerprints, or another question, nothing is read back
    assert catalog.recall_answers.get(route.tail, route.decoded, route.prompt, route.max_tokens, ("m", "r")) is None
    assert catalog.recall_answers.get(route.tail, "What is 3 + 2?", route.prompt, route.max_tokens,
                                      a.solver.fingerprints) is None

    stages = request.begin().stages
    read = a.solve(TEXT)
    assert "stored" in stages and read.choices and a.memo.stored_hits == 1
    stages = request.begin().stages
    decoded = Answering(dep.engine, catalog, store).solve(TEXT, decoding=Decoding(model_decode=True))
    assert "stored" not in stages and "memo" not in stages and "graft" in stages and "decode" in stages
    assert (read.answer, read.path, read.verified, read.prompt_tokens, read.grafted_tokens) == (
        decoded.answer, decoded.path, decoded.verified, decoded.prompt_tokens, decoded.grafted_tokens)


def test_a_first_hit_on_a_fresh_replica_runs_no_forward_pass_and_says_so(memory):
    """The tiny random model does not copy its gold, so the stored decode is written here as the default model
    writes it (` + 5`): the hit is then accepted, and answered from the catalog alone."""
    dep, catalog, store = memory
    _no_stored_decode(dep)
    verify_and_deposit(dep, catalog.problems.add(TEXT, GOLD, "test", "arith", "add"), GOLD)
    assert catalog.recall_answers.count() == 0
    a = Answering(dep.engine, catalog, store)
    route = next(a.solver.routes(TEXT))
    ids = dep.engine.encode(" + 5\n", bos=False)
    catalog.recall_answers.put(route.tail, route.decoded, route.prompt, route.max_tokens, a.solver.fingerprints,
                               {"chain": [route.tail], "start": 9, "prompt_token_ids": [1, 2, 3],
                                "output_token_ids": ids, "output_text": " + 5\n"})
    stages = request.begin().stages
    out = a.solve(TEXT)
    assert (out.path, out.answer, out.verified, out.answer_from, out.decode_tokens) == ("hash", "+ 5", True, "stored", 0)
    assert "stored" in stages and not {"graft", "forward", "decode"} & set(stages)
    assert usage(out) == {"prompt_tokens": 12, "completion_tokens": 0, "total_tokens": 12,
                          "prompt_tokens_details": {"cached_tokens": 12}}


def test_a_replica_that_decodes_a_hit_stores_it_for_the_next_replica(memory):
    dep, catalog, store = memory
    _no_stored_decode(dep)
    verify_and_deposit(dep, catalog.problems.add(TEXT, GOLD, "test", "arith", "add"), GOLD)
    first = Answering(dep.engine, catalog, store)
    stages = request.begin().stages
    out = first.solve(TEXT)
    assert "graft" in stages and "stored" not in stages and out.decode_tokens > 0
    assert catalog.recall_answers.count() == 1  # written through
    second = Answering(dep.engine, catalog, store)  # another replica, or this one restarted
    stages = request.begin().stages
    again = second.solve(TEXT)
    assert "stored" in stages and second.memo.stored_hits == 1
    route = next(second.solver.routes(TEXT))
    fresh = second.solver.decode(route)
    row = _row(catalog, second, route)
    assert (row["output_token_ids"], row["output_text"]) == (fresh.output_token_ids, fresh.output_text)
    assert (again.answer, again.path, again.verified) == (out.answer, out.path, out.verified)


def test_a_stored_decode_answers_only_the_caps_it_is_exact_for():
    stopped = {"max_tokens": 8, "output_token_ids": [1, 2, 3]}  # stopped on its own after 3 of 8 tokens
    ran_out = {"max_tokens": 8, "output_token_ids": list(range(8))}
    assert answers_cap(stopped, 8) and answers_cap(stopped, 3) and answers_cap(stopped, 100)
    assert not answers_cap(stopped, 2)  # a decode capped at 2 stops earlier: other tokens
    assert answers_cap(ran_out, 8) and not answers_cap(ran_out, 9) and not answers_cap(ran_out, 4)
    assert answers_cap({**ran_out, "max_tokens": 4}, 4)


def test_a_request_cap_below_a_stored_decode_decodes_now(memory):
    dep, catalog, store = memory
    verify_and_deposit(dep, catalog.problems.add(TEXT, GOLD, "test", "arith", "add"), GOLD)
    a = Answering(dep.engine, catalog, store)
    route = next(a.solver.routes(TEXT))
    row = _row(catalog, a, route)
    n = len(row["output_token_ids"])
    assert n >= 2  # the tiny random model writes on to its cap
    stages = request.begin().stages
    a.solve(TEXT, decoding=Decoding(max_tokens=n - 1))
    assert "stored" not in stages and "graft" in stages
    assert _row(catalog, a, replace(route, max_tokens=n - 1)) is None  # the deposit's decode stays the stored one
    assert _row(catalog, a, route) == row


def test_a_stored_decode_round_trips_exactly_on_both_backends(catalog_url):
    """Any bytes a model writes (NUL, lone surrogates aside: the tokenizer never gives those) come back as
    written, on SQLite and PostgreSQL (whose text columns cannot hold NUL)."""
    from galahad.flywheel.catalog import Catalog

    text = " 4\x00 ✓\n\t\"}"
    decoded = {"chain": ["a" * 64], "start": 7, "prompt_token_ids": [2, 5], "output_token_ids": [0, 262143],
               "output_text": text}
    with Catalog(catalog_url) as cat:
        assert cat.recall_answers.put("a" * 64, TEXT, "query", 8, ("m", "r"), decoded)
        assert not cat.recall_answers.put("a" * 64, TEXT, "query", 8, ("m", "r"), {**decoded, "output_text": "x"})
        row = cat.recall_answers.get("a" * 64, TEXT, "query", 8, ("m", "r"))
        assert {k: row[k] for k in decoded} == decoded
        assert cat.recall_answers.get("a" * 64, TEXT, "query", 8, ("m", "r2")) is None
