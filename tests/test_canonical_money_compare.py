"""Money and comparison phrasings as people type them (issue 49, second round): each class in general form with
its exact value, near misses keyed apart, and the readings writers disagree on refused. Pure (no model)."""

from fractions import Fraction as F

import pytest

from galahad.flywheel.problems import canonical

K, V = canonical.canonical_key, canonical.value

KEYED = [
    # a tip or tax added, a discount taken, the total asked after the part
    ("$45 + 20% tip", F(54)), ("what's the total with a 20% tip on $45?", F(54)),
    ("total cost of $25 with 8% tax", F(27)), ("what is the total of $25 plus 8% sales tax", F(27)),
    ("15% tip on a $40 bill, what's the total?", F(46)), ("8% tax on $25, what is the total?", F(27)),
    ("25% discount on $80, what is the final price", F(60)), ("how much tax on $25 at 8%", F(2)),
    ("$50 minus 30%", F(35)), ("$80 - 25%", F(60)), ("$80 plus 15%", F(92)), ("$50 discounted by 30%", F(35)),
    ("a $50 shirt at 30% off", F(35)), ("sale price of $50 at 30% off", F(35)),
    ("price after a 30% discount on $50", F(35)), ("how much is saved with 30% off $50", F(15)),
    ("a $35 shirt is 20% off. What is the price?", F(28)), ("$35 marked down by 20%", F(28)),
    ("what is $60 after a 15% increase", F(69)),
    # change from a payment
    ("change from $20 for a $13.75 purchase", F(25, 4)), ("how much change from $20 if I spend $13.75", F(25, 4)),
    ("how much change do you get from $20 for $13.75", F(25, 4)),
    ("if you pay $20 for a $13.75 item, how much change do you get back?", F(25, 4)),
    ("change from a twenty-dollar bill for $13.75", F(25, 4)),
    # coins, a count at a price each, the price of one, a total of amounts
    ("how many quarters in $5", F(20)), ("how many quarters make $3", F(12)), ("$2 in nickels", F(40)),
    ("4 pens at $1.25 each", F(5)), ("cost of 3 tickets at $12 each", F(36)), ("how much for 3 at $5.99 each", F(1797, 100)),
    ("3 pens cost $2 each, what is the total", F(6)), ("if 5 pens cost $6, what's the price of one pen", F(6, 5)),
    ("the total of $12.50 and $7.25", F(79, 4)), ("$100 divided among 4 people", F(25)), ("$.99 times 3", F(297, 100)),
    ("$1,250.00 divided by 5", F(250)), ("unit price if 3 cost $7.50", F(5, 2)),
    # comparisons: how much more, taller, cheaper; how many times; largest, smallest, range; ratios
    ("how much taller is 180 cm than 165 cm", F(15)), ("how much cheaper is $5 than $8", F(3)),
    ("how much more expensive is $8 than $5", F(3)), ("90 is how much bigger than 65?", F(25)),
    ("65 is how much smaller than 90", F(25)), ("find how much bigger 90 is than 65", F(25)),
    ("by how much is 65 smaller than 90", F(25)), ("60 is how many times bigger than 15", F(4)),
    ("how many times as much is 60 as 15", F(4)),
    ("what is the max of 3, 9 and 4", F(9)), ("max(3, 9, 4)", F(9)), ("the largest of 3, 9 and 4", F(9)),
    ("which is the largest, 3, 9 or 4?", F(9)), ("which number is greatest: 3, 9, 4", F(9)),
    ("the largest number among 3, 9 and 4", F(9)), ("min(3, 9, 4)", F(3)), ("the min of 3, 9 and 4", F(3)),
    ("the smallest of 3, 9 and 4", F(3)), ("which is smallest: 3, 9 or 4", F(3)), ("the range of 3, 9, 4", F(6)),
    ("the sum of the numbers 3, 4 and 5", F(12)), ("the ratio of 4 to 12", F(1, 3)), ("4:12 as a fraction", F(1, 3)),
    ("the ratio 4:12 as a fraction", F(1, 3)), ("12 : 4 as a number", F(3)), ("ratio of 4:12", F(1, 3)),
    ("A meal costs $60. What is a 15% tip?", F(9)), ("What is the total cost of 3 items at $4.99 each?", F(1497, 100)),
    ("What's the smallest number in the list 4, 9, 2, 7?", F(2)), ("By what amount does 90 exceed 65?", F(25)),
    ("How far is 45 from 27?", F(18)), ("a $200 jacket is on sale for 25% off, what is the sale price", F(150)),
    ("how long from 9:30 am to 11:00 am in minutes", F(90)), ("convert 0.35 to a percent", F(35)),
]

NEAR_MISSES = [
    ("$45 + 20% tip", "20% tip on $45"), ("$50 minus 30%", "30% of $50"),
    ("change from $20 for a $13.75 purchase", "change from $20 for a $12.75 purchase"),
    ("how many quarters in $5", "how many dimes in $5"), ("the largest of 3, 9 and 4", "the smallest of 3, 9 and 4"),
    ("the largest of 3, 9 and 4", "the largest of 3, 8 and 4"), ("4:12 as a fraction", "12:4 as a fraction"),
    ("how much taller is 180 cm than 165 cm", "how much taller is 180 cm than 160 cm"),
    ("the range of 3, 9, 4", "the sum of 3, 9, 4"), ("$80 plus 15%", "$80 minus 15%"),
]

REFUSED = [
    "80 plus 15%", "80 minus 25%",  # no money: 80.15 / 79.75 or a percent of 80
    "is 5 bigger than 3?",  # yes or no, no number
    "which is bigger, 5 or 5", "the max of 5, 5 and 2", "which is largest: 9, 9 or 4",  # a tie: either
    "how much bigger is 3 than 10",  # a negative "how much bigger"
    "change from $10 for a $13.75 purchase",  # paid less than the price
    "how much longer is 2 m than 150 cm",  # two units: the answer's unit is the writer's choice
    "4:12",  # a ratio or a clock time
    "what is 4:12",
    "$80 after a 25% tax",  # after tax: added, or what is left after paying it
    "how many dollars is 20 euros",  # no rate given
]


@pytest.mark.parametrize("text,want", KEYED)
def test_keyed_with_exact_value(text: str, want: F) -> None:
    key = K(text)
    assert key is not None, text
    assert V(key) == want


@pytest.mark.parametrize("a,b", NEAR_MISSES)
def test_near_miss_is_keyed_apart(a: str, b: str) -> None:
    ka, kb = K(a), K(b)
    assert ka is not None
    assert kb is None or (kb != ka and V(kb) != V(ka))


@pytest.mark.parametrize("text", REFUSED)
def test_refused(text: str) -> None:
    assert K(text) is None
