"""Issue 49's phrasing classes in money, comparisons and time: each class read in general form (any numbers,
word and digit forms) with its exact value, and a near miss with another value keyed differently or refused.
Pure (no model, no catalog)."""

from fractions import Fraction

import pytest

from galahad.flywheel.problems import canonical

K, V = canonical.canonical_key, canonical.value

KEYED = [  # (text, exact value)
    # the distance between a and b, how far apart they are: |a - b|
    ("the distance between 5 and -3", Fraction(8)),
    ("the distance between -3 and 5", Fraction(8)),
    ("the distance between -7 and -2 on the number line", Fraction(5)),
    ("how far apart are 4 and 19?", Fraction(15)),
    ("how far apart are negative two and three", Fraction(5)),
    # the greater / smaller of a and b, which is larger: a or b: max, min
    ("the greater of 0.65 and 0.7", Fraction(7, 10)),
    ("the larger of three quarters and two thirds", Fraction(3, 4)),
    ("which is bigger, 2/3 or 3/4?", Fraction(3, 4)),
    ("which number is greater: 9 or 7", Fraction(9)),
    ("which is smaller, 3/4 or 2/3?", Fraction(2, 3)),
    ("the lesser of 5 and -2", Fraction(-2)),
]

NEAR_MISSES = [  # (text, text of another value): never one key
    ("the distance between -3 and 5", "the distance between 3 and 5"),
    ("how far apart are 4 and 19?", "how far apart are 4 and 9?"),
    ("the distance between -7 and -2", "the distance between -7 and 2"),
    ("the greater of 0.65 and 0.7", "the smaller of 0.65 and 0.7"),
    ("which is bigger, 2/3 or 3/4?", "which is bigger, 2/3 or 1/4?"),
]

REFUSED = [
    "the difference of 3 and 5",  # 3 - 5 or |3 - 5|: school algebra reads a - b
    "the difference between -3 and 5",  # likewise (tests/test_canonical_probes.py)
    "which is bigger, 2/4 or 1/2",  # equal: either, or "neither"
    "the larger of 3 km and 500 m",  # amounts: max is read on plain numbers only
    # a second operand in words may run on: max(5, 3) + 1 = 6 or max(5, 3 + 1) = 5; (9 - 2) + 3 or 9 - (2 + 3)
    "the greater of 5 and 3 plus 1",
    "the difference between 9 and 2 plus 3",
    "the distance between 5 and 3 plus 1",
    "the quotient of 8 and 2 plus 2",
]


@pytest.mark.parametrize("text,want", KEYED)
def test_keyed_with_exact_value(text: str, want: Fraction) -> None:
    key = K(text)
    assert key is not None, text
    assert V(key) == want


@pytest.mark.parametrize("a,b", NEAR_MISSES)
def test_near_miss_is_keyed_apart(a: str, b: str) -> None:
    ka, kb = K(a), K(b)
    assert ka is not None
    assert kb is None or kb != ka
    if kb is not None:
        assert V(kb) != V(ka)


@pytest.mark.parametrize("text", REFUSED)
def test_refused(text: str) -> None:
    assert K(text) is None
