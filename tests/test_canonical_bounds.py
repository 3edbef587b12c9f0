"""Canonical keys are bounded: hostile texts are refused by deterministic limits, never by a clock.

The reader checks the length first (MAX_CHARS) and the character whitelist second, before any
tokenizing; literals are bounded in digits, texts in tokens, parsing in steps (MAX_STEPS, one counter
for a whole text), readings per span (MAX_ALTS) and nesting (MAX_DEPTH); nothing is evaluated while
keying, and `value` refuses exponents and intermediates beyond its bit bound before computing them.
Wall-clock numbers are in bench/bench_keys.py, not here.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from galahad.flywheel.problems import canonical, key_frames, key_grammar, key_lexer, key_tree

# texts a hill-climbing search (by CPU time) found to cost the reader the most (bench/bench_keys.py reads them too)
SEARCHED = json.loads((Path(__file__).parents[1] / "bench" / "data" / "key_reader_worst.json").read_text())["texts"]
HOSTILE = [
    "What is 10**10**10 // 3?", "What is 10**10**8 // 3?", "What is 10**10**6 // 3?", "What is 10^10^10?",
    "What is 2^(10^10)?", "What is 9^9^9^9?", "What is " + "(" * 100_000 + "1" + ")" * 100_000 + "?",
    "What is " + "+".join(["1"] * 10_000) + "?", "What is " + "(" * 140 + "1" + ")" * 140 + "?",
    "What is " + "(" * 40 + "1" + ")" * 40 + "?", "What is \ud800 + 1?", "What is 1\x00 + 1?",
    "What is " + "9" * 5000 + " + 1?", "What is " + "9" * 31 + " + 1?", "What is 1." + "0" * 40 + " + 1?",
    "What is " + "twice " * 60 + "3?", "What is " + "minus " * 70 + "3?", "What is " + "- " * 140 + "3?",
    "What is " + "the sum of " * 20 + "1" + " and 1" * 20 + "?",
    ("the product of the sum of " * 6 + "2 and 3" + " and 4" * 12),
    "What is the sum of " + " and ".join(["one hundred and one"] * 12) + "?",
    "x" * 20_000, "\ud800" * 10, "", " " * 300, "?" * 300, "=" * 299,
    "Add " + " and ".join(["2"] * 60), "What is " + " divided by ".join(["3/4"] * 40) + "?",
    "Solve for x: " + " plus ".join(["half of x"] * 8) + " = 3",
    *SEARCHED,
]


def test_hostile_texts_are_refused_or_keyed_within_the_work_bound():
    for text in HOSTILE:
        k = canonical.canonical_key(text)
        work = canonical.reader_work(text)
        assert work is None or work <= key_grammar.MAX_STEPS + 1, (text[:60], work)  # +1: the step that stops it
        assert k is None or len(k) <= key_tree.MAX_KEY_CHARS
        canonical.numbers(text), canonical.number_sequence(text), canonical.value(text)  # total: no exception
    assert canonical.canonical_key("What is 10**10**10 // 3?") is None
    assert canonical.canonical_key("What is " + "9" * 31 + " + 1?") is None  # digit bound
    assert canonical.canonical_key("What is " + "9" * 30 + " + 1?") is not None


def test_length_is_checked_before_anything_else(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("tokenized a text over MAX_CHARS")

    monkeypatch.setattr(canonical, "tokenize", boom)
    monkeypatch.setattr(canonical, "admissible", boom)
    canonical._read.cache_clear()
    for text in ("What is " + "(" * 100_000 + "1" + ")" * 100_000 + "?", "1+" * 10_000 + "1",
                 "a" * (canonical.MAX_CHARS + 1)):
        assert canonical.canonical_key(text) is None
        assert canonical.reader_work(text) is None
    canonical._read.cache_clear()


def test_characters_outside_the_whitelist_are_refused_before_tokenizing(monkeypatch):
    monkeypatch.setattr(canonical, "tokenize", lambda *a: (_ for _ in ()).throw(AssertionError("tokenized")))
    canonical._read.cache_clear()
    for text in ("What is \ud800 + 1?", "What is 1\x00 + 1?", "What is 3 \u2295 4?", "What is \u0663 + 1?"):
        assert canonical.canonical_key(text) is None
    canonical._read.cache_clear()


def test_lexical_limits():
    with pytest.raises(key_lexer.Refuse):
        key_lexer.tokenize("9" * (key_lexer.MAX_DIGITS + 1))
    with pytest.raises(key_lexer.Refuse):
        key_lexer.tokenize(" ".join(["1"] * (key_lexer.MAX_TOKENS + 1)))
    for bad in ("1,2345", "3.4.5", "1,2", "3st", "11nd"):
        with pytest.raises(key_lexer.Refuse):
            key_lexer.tokenize(bad)
    assert [t.value for t in key_lexer.tokenize("1,234.5")] == [Fraction(12345, 10)]


def test_the_costliest_texts_found_hit_the_work_bound():
    """The texts a search found to cost the most run into MAX_STEPS (their cost is steps, not time)."""
    for text in SEARCHED:
        assert canonical.reader_work(text) == key_grammar.MAX_STEPS + 1
        assert canonical.canonical_key(text) is None


def test_work_that_is_not_a_grammar_step_is_counted():
    # flattening a sum of k terms, a list state with k items, an equation's normal form: more than 1 step
    flat = canonical.reader_work("What is " + " + ".join(["1"] * 40) + "?")
    assert flat > 40 * 3
    eq = "Solve for x: " + " + ".join(["x"] * 30) + " = 3"
    parse_only = [0]
    key_frames.readings(key_lexer.tokenize(eq.lower()), parse_only)
    assert canonical.reader_work(eq) > parse_only[0]  # + the normal form of the reading's trees
    # "the difference between A and B" compares A and B only where both are short
    assert canonical.value("What is the difference between 3 squared and 4?") == 5
    long_a = "the product of " + " and ".join(str(12345 + i) for i in range(12))  # distinct: 12345^12 is short
    assert canonical.canonical_key(f"What is the difference between {long_a} and 3?") is None


def test_the_step_budget_refuses_instead_of_working_on(monkeypatch):
    text = "What is the sum of 1, 2, 3 and 4?"
    assert canonical.canonical_key(text) is not None
    assert canonical.reader_work(text) > 20
    monkeypatch.setattr(key_grammar, "MAX_STEPS", 20)
    canonical._read.cache_clear()
    assert canonical.canonical_key(text) is None  # out of budget: no key (and no exception)
    assert canonical.reader_work(text) == 21  # stopped at the first step past the budget
    canonical._read.cache_clear()


def test_nesting_is_bounded_deterministically():
    deep = "What is " + "(" * 30 + "1 + 2" + ")" * 30 + "?"
    assert canonical.canonical_key(deep) is None  # past MAX_DEPTH: refused, not a RecursionError
    shallow = "What is " + "(" * 10 + "1 + 2" + ")" * 10 + "?"
    assert canonical.canonical_key(shallow) == canonical.canonical_key("What is 1 + 2?")


def test_keying_never_evaluates():
    # a tower keys structurally at once; only value() would compute, and it refuses the size first
    k = canonical.canonical_key("What is 2^(10^10) + 1?")
    assert k is not None and canonical.value(k) is None
    assert canonical.value("What is 10^5000?") is None  # more than ~1000 digits
    assert canonical.value("What is 10^900?") == 10 ** 900
    assert canonical.value("What is (1/2)^5000?") is None
    assert canonical.value("What is 1^100000000?") is None  # exponent bound, whatever the base
    assert canonical.value("What is 0^5?") == 0 and canonical.value("What is (-1)^3?") == -1


def test_value_bounds_intermediates():
    big = key_tree.num(10 ** 900)
    t = key_tree.mul(big, big, big, big)  # 3600 digits: refused at the product that crosses the bound
    assert key_tree.value(t) is None
    assert key_tree.value(key_tree.power(key_tree.num(2), key_tree.num(key_tree.MAX_BITS))) is None
    assert key_tree.value(key_tree.power(key_tree.num(2), key_tree.num(key_tree.MAX_BITS - 1))) == 2 ** 3399
    assert key_tree.value(key_tree.div(key_tree.num(1), key_tree.num(0))) is None
