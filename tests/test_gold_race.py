"""Golds that cannot race (issue 43 item 4), on SQLite and PostgreSQL, through the real intake.

Two callers submit conflicting golds for the same problem at the same moment (threads released by one
barrier, each with its own connection from the catalog's pool): exactly one is admitted and the other
gets a GoldConflict (HTTP 409 in the service), every time. Different tenants' scopes do not conflict with
each other; a tenant's gold is checked against shared's too.
"""

from __future__ import annotations

import threading

import pytest

from galahad.flywheel.app.intake import GoldConflict, admit
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.problems.records import Problem
from galahad.flywheel.problems.scope_ids import scoped_id

PAIRS = 20


def _race(cat: Catalog, a: Problem, b: Problem, scopes=("shared", "shared")) -> list[str]:
    barrier = threading.Barrier(2)
    out: list[str] = [""] * 2

    def go(i: int, p: Problem) -> None:
        barrier.wait()
        try:
            admit(cat, [p], ["gold"], "test", scope=scopes[i])
            out[i] = "ok"
        except GoldConflict:
            out[i] = "conflict"

    threads = [threading.Thread(target=go, args=(i, p)) for i, p in enumerate((a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return out


def _p(text: str, gold: str) -> Problem:
    # no canonical value to compute for "Zork" texts: any gold is acceptable alone, only conflicts refuse
    return Problem(id="x", problem=text, answer=gold, topic="t", template="t", source="me")


def test_twenty_conflicting_pairs_one_wins_every_time(catalog_url):
    with Catalog(catalog_url) as cat:
        results = [sorted(_race(cat, _p(f"What is zork number {i}?", "1"), _p(f"What is zork number {i}?", "2")))
                   for i in range(PAIRS)]
        assert results == [["conflict", "ok"]] * PAIRS
        # the stored gold is the winner's, once
        rows = cat.problems.find(text="zork number", limit=None)
        assert len(rows) == PAIRS and all(r["answer"] in ("1", "2") for r in rows)


def test_the_same_gold_in_other_words_is_no_conflict(catalog_url):
    # A text with a canonical key has a computed value: a wrong gold is refused alone (400) before any race,
    # so two keyed golds that both pass are equal; racing them must admit both (the lock never refuses).
    with Catalog(catalog_url) as cat:
        results = [sorted(_race(cat, _p(f"What is {100 + i} + 7?", str(107 + i)), _p(f"What is 7 + {100 + i}?", str(107 + i))))
                   for i in range(PAIRS)]
        assert results == [["ok", "ok"]] * PAIRS
        assert len(cat.problems.find(text=" + ", limit=None)) == 2 * PAIRS


def test_scopes_do_not_conflict_with_each_other(catalog_url):
    with Catalog(catalog_url) as cat:
        got = _race(cat, _p("What is zork?", "1"), _p("What is zork?", "2"), scopes=("alice", "bob"))
        assert got == ["ok", "ok"]
        a, b = cat.problems.by_hash(scoped_id("What is zork?", "alice")), cat.problems.by_hash(scoped_id("What is zork?", "bob"))
        assert (a["scope"], a["answer"], b["scope"], b["answer"]) == ("alice", "1", "bob", "2")
        # within one scope the race is refused as in shared
        assert sorted(_race(cat, _p("What is zork 2?", "1"), _p("What is zork 2?", "2"), scopes=("alice", "alice"))) \
            == ["conflict", "ok"]


def test_a_tenant_gold_conflicting_with_shared_is_refused(catalog_url):
    with Catalog(catalog_url) as cat:
        admit(cat, [_p("What is zork?", "1")], ["gold"], "admin")
        with pytest.raises(GoldConflict):
            admit(cat, [_p("What is zork?", "2")], ["gold"], "alice", scope="alice")
