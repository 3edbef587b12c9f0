"""k5 coverage of what people ask (issue 42 item 2d): each construct keys to its exact answer, paraphrases
share a key, and the readings writers disagree on get none. Pure (no model, no catalog), quick tier."""

from fractions import Fraction as F

import pytest

from galahad.flywheel.problems import canonical

K, V = canonical.canonical_key, canonical.value

GROUPS = [  # (answer, texts that must all key to one key with this value)
    (180, ["Reduce 200 by 10%", "What is 200 minus 10% of 200?", "Decrease 200 by 10 percent."]),
    (100, ["Increase 75 by a third.", "What is 75 plus a third of 75?", "What is a third more than 75?"]),
    (70, ["Add a quarter of 56 to 56", "What is 56 increased by one quarter?", "What is a quarter more than 56?"]),
    (79, ["What is 27 more than 52?", "27 more than 52 is what number?", "Quick question: 27 + 52"]),
    (-16, ["Quick question: the negative of 2^4", "What is the opposite of 2^4?", "What is -(2^4)?"]),
    (6, ["What is the opposite of -6?", "Negate -6."]),
    (F(11, 4), ["Please find the multiplicative inverse of 4/11.", "What is the reciprocal of 4/11?", "1 / (4/11)"]),
    (F(59, 2), ["Find the mean of 39, 26, 49 and 4.", "Calculate the arithmetic mean of 39, 26, 49, 4",
                "What is the average of 39, 26, 49 and 4?"]),
    (1, ["What is 646 to the zeroth power?", "646 RAISED TO THE POWER 0", "646**0"]),
    (F(1, 81), ["Raise 1/3 to the power 4.", "What is (1/3)**4? Thanks!", "(1/3)^4"]),
    (13, ["WHAT IS 169^(1/2)?", "sqrt(169)", "square root of 169", "What is the square root of 169?", "\u221a169",
          "What is 169 to the power of 0.5?"]),
    (F(1, 5), ["sqrt(1/25)", "What is the square root of 1/25?"]),
    (7, ["\u2074\u221a2401", "2401^(1/4)", "What is the fourth root of 2401?", "\u221c2401"]),
    (15, ["\u221a(81 + 144)", "sqrt(81+144)", "$\\sqrt{81 + 144}$"]),
    (6, ["$\\sqrt[3]{216}$", "\u221b216", "What is the cube root of 216?", "cbrt(216)"]),
    (343, ["$7^{3}$", "7^3?"]),
    (16, ["$5\\%$ of $320$", "Q: 5% of 320 A:"]),
    (F(13, 10), ["$\\frac{4}{5} + \\frac{2}{4}$", "4/5 + 2/4"]),
    (F(2, 5), ["$\\frac{4}{5} \\cdot \\frac{2}{4}$", "4/5 * 2/4"]),
    (32, ["$|-13| + 19$?", "abs(-13) + 19", "|-13| + 19"]),
    (F(89, 6), ["$6\\frac{1}{2} + 8\\frac{1}{3}$", "Compute $6\\tfrac{1}{2}+8\\tfrac{1}{3}$", "6 1/2 + 8 1/3"]),
    (F(625, 18), ["(4 1/6) * (8 1/3)", "What is 4 1/6 times 8 1/3"]),
    (F(15, 2), ["2\u215e + 4\u215d", "2 7/8 + 4 5/8 = ?", "two and seven eighths plus four and five eighths"]),
    (F(39, 8), ["Convert 4 7/8 to an improper fraction", "Can you write 4 7/8 as an improper fraction?",
                "Express four and seven eighths as an improper fraction."]),
    (F(9, 20), ["Please express 0.45 as a fraction.", "Write 0.45 as a simplified fraction"]),
    (201, ["triple 67", "triple 67, please", "What is three times 67"]),
    # units: the key carries the conversion's mathematics (3 hours in minutes is 3 * 60)
    (420, ["How many minutes are in 7 hours?", "Can you convert 7 hours to minutes?", "7 hours = ? minutes",
           "What is 7 * 60?"]),
    (F(7, 60), ["Convert 7 minutes to hours", "How many hours is 7 minutes?"]),
    (130, ["Convert 2 h 10 min to minutes.", "2 hours 10 minutes = how many minutes?",
           "How many minutes are in 2 hours and 10 minutes?"]),
    (F(61, 20), ["Convert 3050 g to kg.", "How many kilograms is 3050 grams?", "Q: Express 3,050 g in kilograms. A:"]),
    (48, ["How many feet are in 16 yards?", "Convert 16 yd to feet.", "16 yards = ? ft"]),
    (2250, ["Q: 2.25 litres in millilitres A:", "How many milliliters are in 2.25 liters?", "Express 2.25 l in ml."]),
    (90, ["How many minutes are in an hour and a half?", "1 1/2 hours in minutes"]),
    (4429, ["$44.29 is how many cents?", "Convert $44.29 to cents.", "Express $44.29 in cents"]),
    (F(299, 5), ["write 5980 cents in dollars.", "how many dollars is 5980 cents?", "5980 cents = how many dollars?"]),
    (250, ["How many cents are 8 quarters, 2 dimes and 6 nickels?",
           "what is the value in cents of 8 quarters, 2 dimes, and 6 nickels?"]),
    (F(7315, 100), ["ADD $41.75 AND $31.40.", "41.75 dollars + 31.40 dollars", "Q: What is $41.75 plus $31.40? A:",
                    "41.75 + 31.40"]),
    (7, ["What is $3 + $4?", "What is 3 + 4?"]),
    (72, ["Six dozen eggs is how many eggs?", "How many is 6 dozens", "What is 6 * 12?"]),
    (125, ["6 score and 5 = ?", "What number is six score and five?"]),
    (1296, ["What is nine gross?", "Question: 9 gross = ? items"]),
    (108, ["Nine gross is how many dozens?", "How many dozen are in 9 gross?"]),
    (6, ["Quick question: How many eggs are in half a dozen?", "Quick question: What is a half dozen?"]),
    (18, ["How many eggs are in a dozen and a half?", "What is one and a half dozen?"]),
    # comparisons and percentages
    (200, ["How much smaller is 10 than 210?", "BY HOW MUCH IS 10 LESS THAN 210?", "How much less is 10 than 210?",
           "What is 210 - 10?"]),
    (7, ["34 is how much more than 27", "How much more is 34 than 27", "By how much does 34 exceed 27?"]),
    (10, ["220 is how many times as big as 22", "220 is how many times 22?", "How many times as large as 22 is 220?"]),
    (5, ["Quick question: What percent is 10 of 200?", "10 IS WHAT PERCENT OF 200?", "What percentage of 200 is 10?",
         "What is 10 / 200 * 100?"]),
    (25, ["What percent of 40 is 10?", "10 is what percentage of 40?"]),
    (F(1, 2), ["6 is what fraction of 12?", "What fraction of 12 is 6"]),
    (10, ["120 drops to 108. what is the percentage decrease?", "what is the percent decrease from 120 to 108?",
          "by what percentage does 120 fall to 108?"]),
    (25, ["What is the percent increase from 80 to 100?", "80 rises to 100. What is the percentage increase?"]),
    (3, ["Suppose 3*y + 2 = 11. Solve for y.", "Solve 3y + 2 = 11", "Let 3y + 2 = 11. What is y?"]),
    (11, ["Q: Let 0 = 7m - 77. Find m. A:", "Suppose 0 = 7*m - 77. What is m?", "Q: If 7m - 77 = 0, then m = ? A:"]),
    (5, ["Let f = 3 + 2. What is f?", "What is 3 + 2?"]),  # "Suppose f = 3 + 2" is the equation (a q: key)
]


# k7 (the grammar reader, issue 49): a fraction in words as a part of a relative change is read both ways
# by writers ("reduce 1/2 by a half"), so it gets no key; the rest are phrasings k7 does not read yet
# (coverage not ported), and two texts key apart from their group (same value, another written form).
K7_REFUSED = ["Increase 75 by a third.", "What is a third more than 75?", "What is 56 increased by one quarter?",
              "What is a quarter more than 56?"]
K7_UNREAD = ["\u2074\u221a2401", "What is the fourth root of 2401?", "\u221c2401", "Convert 4 7/8 to an improper fraction",
             "what is the value in cents of 8 quarters, 2 dimes, and 6 nickels?", "Six dozen eggs is how many eggs?",
             "Question: 9 gross = ? items", "Nine gross is how many dozens?", "How many dozen are in 9 gross?",
             "Quick question: How many eggs are in half a dozen?", "How many eggs are in a dozen and a half?",
             "120 drops to 108. what is the percentage decrease?", "by what percentage does 120 fall to 108?",
             "80 rises to 100. What is the percentage increase?"]
K7_APART = ["1 / (4/11)", "1 1/2 hours in minutes"]


@pytest.mark.parametrize("text", K7_REFUSED + K7_UNREAD)
def test_k7_gives_these_no_key(text):
    assert K(text) is None, (text, K(text))


@pytest.mark.parametrize("answer,texts", GROUPS)
def test_groups_key_alike_to_the_exact_answer(answer, texts):
    assert all(V(t) in (None, answer) for t in texts)  # never a wrong value
    texts = [t for t in texts if t not in K7_REFUSED + K7_UNREAD + K7_APART]
    if not texts:
        return
    keys = {t: K(t) for t in texts}
    assert [t for t, k in keys.items() if k is None or V(k) != answer] == [], keys
    assert len(set(keys.values())) == 1, keys


REFUSED = [
    "What is the quotient of 62 and 4?",  # 15 (remainder 2) or 15.5
    "Find the quotient when 62 is divided by 4.", "What is the quotient of 62 divided by 4?",
    "What is the square root of 81 plus 144?",  # sqrt(81) + 144 or sqrt(225)
    "What is the negative of 2 + 4?", "\u221a4^2", "\u221a1/25", "\u221a4\u00b2", "sqrt(2)",
    "What is 2 to the power of 0.5?", "What is (-8)^(1/3)?", "What is the square root of -4?",
    "What is 1/2 3/4?", "What is 2 3/4^2?", "What is the product of two and a half and four?",
    "$\\sqrt[5]{32}$", "$\\pi + 1$", "$3\\frac{x}{2}$",
    "Convert 3 tons to pounds.", "Convert 5 km to miles.", "What is $3 + 4?", "What is $3 + 4 cents?",
    "How many minutes are in 2 hours and 3 km?", "How many apples are in 3 dozen eggs?",
    "How many legs are in 3 dozen?", "What is 5 hours - 30 minutes?",  # k7: months in 3 years is 36, keyed
    "How much more is 27 than 34?",  # -7 or 7
    "How much less is 34 than 27?", "What is the percent decrease from 100 to 120?",
    "What is the percent increase from 120 to 100?",
]


@pytest.mark.parametrize("text", REFUSED)
def test_what_writers_read_two_ways_gets_no_key(text):
    assert K(text) is None, (text, K(text))


def test_whole_quotients_stay_keyed():
    assert V("What is the quotient of 24 and 2?") == 12 and V("What is the quotient of 3/4 and 2?") == F(3, 8)
