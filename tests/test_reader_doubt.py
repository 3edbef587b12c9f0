"""Groupings writers disagree on are refused (reader_doubt.py), and their near neighbours that have one grouping
keep their key (issue 49 item 4: the generated corpus's keyed-ambiguous texts)."""

import pytest

from galahad.flywheel.problems import canonical

K, V = canonical.canonical_key, canonical.value

REFUSED = [
    "Find the value of eight multiplied by three squared.",  # 72 or 576
    "What is one quarter to the third power doubled?",  # (1/4)^6 or 2 (1/4)^3
    "a quarter raised to 4 doubled =",
    "twice 3 squared", "-5 squared", "-14 squared decreased by half a dozen",
    "the sum of 2 and 3 squared", "half of 4 squared", "Please add 125 to 2076 to the 4th power.",
    "Divide two thirds by 5/10 to the 4th power.",
    "double three and seven eighths =", "Evaluate twice two and a half.",  # 2 x 31/8 or 2 x 3 + 7/8
    "How much is the negative of four fifths added to ten?", "the opposite of 4/5 added to 10",
    "16 reduced by twice 1/2 =", "1/3 cubed less than seven = ?", "two thirds squared more than four",
    "What is the value of 16 reduced by (1 take away 3/6)?",
    "Calculate -8 ÷ 2/5**2.", "2/5^2",
]

KEYED = [  # (text, value): one grouping only
    ("What is 4 + 3 squared?", 13),  # a postfix word after a symbol binds as a written power
    ("Find the value of 18 to the 2nd power.", 324),  # "of" in a frame opens nothing
    ("What is 3 more than twice 5?", 13), ("9 plus the square root of 16", 13),
    ("What is the value of the negative of (2 ÷ 4)?", -0.5),  # a bracket closes the prefix's operand
    ("negative fifteen doubled", -30),  # a sign commutes with doubling
    ("What is the cube of three and one half?", 42.875),  # "the cube of" closes on the mixed number
    ("Evaluate the sum of 1 cubed and 2920.", 2921), ("Divide twice 9 by 3", 6),
    ("Take 11 away from the opposite of five", -16), ("What is half a dozen reduced by 2?", 4),
    ("Please compute four and a fifth less than the square of 8.", 59.8),
]


@pytest.mark.parametrize("text", REFUSED)
def test_refused(text: str) -> None:
    assert K(text) is None


@pytest.mark.parametrize("text,want", KEYED)
def test_one_grouping_keeps_its_key(text: str, want: float) -> None:
    k = K(text)
    assert k is not None, text
    assert float(V(k)) == want
