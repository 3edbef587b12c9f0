"""Canonical keys are bounded: hostile texts are refused by deterministic limits, never by a clock.

The reader checks the length first (MAX_CHARS), then lexes under bounds (characters, known words, digits
per literal, MAX_TOKENS tokens), parses only what the lexer passed, refuses a parse node with more than
MAX_READINGS readings, bounds brackets and phrase nesting (MAX_DEPTH, MAX_PHRASES), and `value` refuses exponents and intermediates beyond its bit bound before
computing them. Wall-clock numbers are in bench/bench_keys.py, not here.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from galahad.flywheel.problems import canonical, reader, reader_lexer, reader_meaning
from galahad.flywheel.problems import reader_tree as rt

SEARCHED = json.loads((Path(__file__).parents[1] / "bench" / "data" / "key_reader_worst.json").read_text())["texts"]
HOSTILE = [
    "What is 10**10**10 // 3?", "What is 10**10**8 // 3?", "What is 10^10^10?", "What is 2^(10^10)?",
    "What is 9^9^9^9?", "What is " + "(" * 100_000 + "1" + ")" * 100_000 + "?",
    "What is " + "+".join(["1"] * 10_000) + "?", "What is " + "(" * 140 + "1" + ")" * 140 + "?",
    "What is " + "(" * 30 + "1" + ")" * 30 + "?", "What is \ud800 + 1?", "What is 1\x00 + 1?",
    "What is " + "9" * 5000 + " + 1?", "What is " + "9" * 31 + " + 1?", "What is 1." + "0" * 40 + " + 1?",
    "What is " + "twice " * 60 + "3?", "What is " + "minus " * 30 + "3?", "What is " + "- " * 140 + "3?",
    "What is " + "the sum of " * 20 + "1" + " and 1" * 20 + "?",
    ("the product of the sum of " * 6 + "2 and 3" + " and 4" * 12),
    "What is the sum of " + " and ".join(["one hundred and one"] * 12) + "?",
    "x" * 20_000, "\ud800" * 10, "", " " * 300, "?" * 300, "=" * 299,
    "Add " + " and ".join(["2"] * 30), "What is " + " divided by ".join(["3/4"] * 15) + "?",
    "2 plus 3 times 4 minus 5 times 6 plus 7 over 8 times 9 minus 1 plus 2 times 3 over 4",
    "Solve for x: " + " plus ".join(["half of x"] * 8) + " = 3", "2^2^2^2^2^2^2^2",
    *SEARCHED,
]


def test_hostile_texts_are_refused_or_keyed_within_the_bounds():
    for text in HOSTILE:
        k = canonical.canonical_key(text)
        work = canonical.reader_work(text)
        assert work is None or work <= reader_lexer.MAX_TOKENS, (text[:60], work)
        assert k is None or len(k) <= rt.MAX_KEY_CHARS
        canonical.numbers(text), canonical.number_sequence(text), canonical.value(text)  # total: no exception
    assert canonical.canonical_key("What is 10**10**10 // 3?") is None
    assert canonical.canonical_key("What is " + "9" * 31 + " + 1?") is None  # digit bound
    assert canonical.canonical_key("What is " + "9" * 30 + " + 1?") is not None


def test_length_is_checked_before_anything_else(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("lexed a text over MAX_CHARS")

    monkeypatch.setattr(reader, "tokens", boom)
    canonical._read.cache_clear()
    for text in ("What is " + "(" * 100_000 + "1" + ")" * 100_000 + "?", "1+" * 10_000 + "1",
                 "a" * (canonical.MAX_CHARS + 1)):
        assert canonical.canonical_key(text) is None
        assert reader.key_and_value(text) is None


def test_the_lexer_refuses_what_it_cannot_bound():
    with pytest.raises(reader_lexer.Refuse):
        reader_lexer.tokens("9" * (reader_lexer.MAX_DIGITS + 1))
    with pytest.raises(reader_lexer.Refuse):
        reader_lexer.tokens(" + ".join(["1"] * (reader_lexer.MAX_TOKENS // 2 + 1)))
    for bad in ("1\x00 + 1", "\ud800 + 1", "What is 5 blorp 3?", "5!"):
        with pytest.raises(reader_lexer.Refuse):
            reader_lexer.tokens(bad)
    assert [t.value for t in reader_lexer.tokens("1,234.5")] == ["2469/2"]


def test_readings_are_bounded(monkeypatch):
    text = "What is the square root of 16 plus 9?"
    assert canonical.canonical_key(text) is None  # read two ways (5 or 13): no key
    monkeypatch.setattr(reader_meaning, "MAX_READINGS", 1)
    with pytest.raises(reader_lexer.Refuse):
        toks = reader_lexer.tokens(text)
        from galahad.flywheel.problems.reader_grammar import parser_for
        reader_meaning.readings(parser_for(frozenset(t.type for t in toks)).parse(toks))


def test_value_bounds_intermediates():
    big = rt.num(10 ** 900)
    assert rt.value(rt.mul(big, big, big, big)) is None  # 3600 digits: refused at the product that crosses
    assert rt.value(rt.power(rt.num(2), rt.num(rt.MAX_BITS))) is None
    assert rt.value(rt.power(rt.num(2), rt.num(rt.MAX_BITS - 1))) == 2 ** 3399
    assert rt.value(rt.div(rt.num(1), rt.num(0))) is None
    assert rt.value(rt.power(rt.num(0), rt.num(0))) is None  # 0^0: undefined
    assert rt.value(rt.power(rt.num(0), rt.num(-1))) is None
    assert rt.value(rt.power(rt.num(2), rt.num(Fraction(1, 2)))) is None  # irrational
    for text in ("What is 5/0?", "0^0", "0^2*0^-2", "What is 2 to the power of 0.5?", "sqrt(-4)"):
        assert canonical.canonical_key(text) is None, text
