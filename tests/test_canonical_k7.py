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
    ("is 3/4 or 2/3 larger?", Fraction(3, 4)),
    ("what is the larger number, 3 or 5?", Fraction(5)),
    ("the maximum of 3 and 5", Fraction(5)),
    ("the minimum of 3 and 5", Fraction(3)),
    # how much / how many more, by how much is a greater than b, how much does a exceed b by: a - b
    ("how many more is 12 than 5", Fraction(7)),
    ("how many more than 5 is 12?", Fraction(7)),
    ("by how much is 90 larger than 25?", Fraction(65)),
    ("by how much is 30 smaller than 48", Fraction(18)),
    ("how much greater than 25 is 90?", Fraction(65)),
    ("how much does 12 exceed 5 by?", Fraction(7)),
    ("12 exceeds 5 by how much?", Fraction(7)),
    # money: a tip, tax or discount on an amount (the part), the amount with or after a discount (the rest)
    ("8% sales tax on $25", Fraction(2)),
    ("what is a 15 percent tip on a $60 bill?", Fraction(9)),
    ("20% discount on $45, how much is the discount?", Fraction(9)),
    ("the discount on a $50 item at 10% off", Fraction(5)),
    ("how much do you save with 25% off $80?", Fraction(20)),
    ("what is $80 with 25% off", Fraction(60)),
    ("price of a $120 item after a 15% discount", Fraction(102)),
    # money: the cost of n at a price each, the price of one, an amount shared
    ("what do 4 items cost at $2.25 each?", Fraction(9)),
    ("cost of six things at 1.50 dollars apiece", Fraction(9)),
    ("price per item if 4 cost $9", Fraction(9, 4)),
    ("$7.50 for 3, what is the price of one?", Fraction(5, 2)),
    ("how much does one cost if 4 items cost $10?", Fraction(5, 2)),
    ("if 3 things cost $4.50, what does one cost?", Fraction(3, 2)),
    ("$18 shared equally by 4 people, how much each?", Fraction(9, 2)),
    ("75¢ as dollars", Fraction(3, 4)),
    ("$25 plus 8% tax", Fraction(27)),
    ("$40 with a 15% tip", Fraction(46)),
    ("what is 20% off of $50", Fraction(40)),
    ("$45 split 3 ways", Fraction(15)),
    # time elapsed between clock times (past midnight with am/pm), or two hours of the 24-hour clock
    ("how many hours from 11 pm to 7 am", Fraction(8)),
    ("minutes between 9:15 a.m. and 10:40 a.m.", Fraction(85)),
    ("from noon to 3:30 pm, how many hours is that?", Fraction(7, 2)),
    ("how many hours from 9 to 17", Fraction(8)),
    ("how many hours is it from 10pm to midnight", Fraction(2)),
    ("how long is it from 9 am to 5 pm in hours", Fraction(8)),
    # half a unit, a unit changed to another
    ("half an hour in minutes", Fraction(30)),
    ("how many hours in half a day", Fraction(12)),
    ("change 180 minutes to hours", Fraction(3)),
]

NEAR_MISSES = [  # (text, text of another value): never one key
    ("the distance between -3 and 5", "the distance between 3 and 5"),
    ("how far apart are 4 and 19?", "how far apart are 4 and 9?"),
    ("the distance between -7 and -2", "the distance between -7 and 2"),
    ("the greater of 0.65 and 0.7", "the smaller of 0.65 and 0.7"),
    ("which is bigger, 2/3 or 3/4?", "which is bigger, 2/3 or 1/4?"),
    ("the maximum of 3 and 5", "the minimum of 3 and 5"),
    ("by how much is 90 larger than 25?", "by how much is 90 larger than 35?"),
    ("how many more than 5 is 12?", "how many more than 6 is 12?"),
    ("what is $80 with 25% off", "how much do you save with 25% off $80?"),
    ("price of a $120 item after a 15% discount", "a 15% discount on $120"),
    ("$7.50 for 3, what is the price of one?", "$7.50 for 5, what is the price of one?"),
    ("how many hours from 11 pm to 7 am", "how many hours from 11 pm to 7 pm"),
    ("how many hours from 9 to 17", "how many hours from 9 to 15"),
    ("$25 plus 8% tax", "8% tax on $25"),
    ("half an hour in minutes", "half a day in minutes"),
]

REFUSED = [
    "the difference of 3 and 5",  # 3 - 5 or |3 - 5|: school algebra reads a - b
    "which is bigger, 2/4 or 1/2",  # equal: either, or "neither"
    "how many more is 5 than 12",  # a negative "how many more": -7 or 7
    "the larger of 3 km and 500 m",  # amounts: max is read on plain numbers only
    # a second operand in words may run on: max(5, 3) + 1 = 6 or max(5, 3 + 1) = 5; (9 - 2) + 3 or 9 - (2 + 3)
    "the greater of 5 and 3 plus 1",
    "the difference between 9 and 2 plus 3",
    "the distance between 5 and 3 plus 1",
    "the quotient of 8 and 2 plus 2",
    "$7.50 for 3, what is the price of 0?",  # a price of nothing
    "$80 after a 25% tax",  # a tax after adds: only a discount or "% off" is read after an amount
    "how many hours from 10 to 6",  # no am/pm and the second before the first: 8 or 20
    "how many hours from 6 am to 6 am",  # none or a whole day
    "how many hours from 13 pm to 2 am",  # no such time
    "how many meters from 9 am to 5 pm",  # not a unit of time
    "$40 with a 15% discount",  # only a tip or tax is added
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
