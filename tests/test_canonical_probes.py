"""Canonical keys against the attacker's probes, the deliberate refusals, and paraphrase coverage.

A probe is (new text, learned text): the new text must get no key or a key different from the learned
problem's, because the two are different mathematics. Paraphrase groups must share one key, and the
key's exact value must be the problem's answer. Pure (no model, no catalog).
"""

from fractions import Fraction

import pytest

from galahad.flywheel.problems import canonical

K, V = canonical.canonical_key, canonical.value

PROBES = [  # (new text, the learned problem it must not be served from)
    ("What is 9 mod 3?", "What is 9 - 3?"),
    ("What is 2 xor 3?", "What is 2 + 3?"),
    ("What is 4 + 3 squared?", "What is 4 + 3?"),
    ("What is 4\u00b2 + 3?", "What is 4 + 3?"),
    ("What is minus 4 plus 3?", "What is 4 + 3?"),
    ("What is 10 thousand - 4?", "What is 10 - 4?"),
    ("What is 4 + 3%?", "What is 4 + 3?"),
    ("What is 4! + 3?", "What is 4 + 3?"),
    ("What is 6 to the 2?", "What is 6 * 2?"),
    ("Solve for x: 2x = 5", "Solve for x: x + 2 = 5"),
    ("Solve for x: x + 2 > 5", "Solve for x: x + 2 = 5"),
    ("Solve for y: x + 2 = 5", "Solve for x: x + 2 = 5"),
    ("What is 3 + 4!", "What is 3 + 4?"),
    ("Multiply 3 by 4!", "Multiply 3 by 4."),
    ("Solve for x: x + 2 = 5!", "Solve for x: x + 2 = 5"),
    ("What is 8 // 2?", "What is 4?"),
    ("What is 8 // 2?", "What is 8 / 2?"),
    ("What is 0x10 + 2?", "What is 0 * 10 + 2?"),
    ("What is twenty-ten plus 1?", "What is 20 - 10 + 1?"),
    ("What is twenty ten plus 1?", "What is 20 + 10 + 1?"),
    ("What is the difference between 2 and 3?", "What is 2 - 3?"),
    ("What is the difference of 2 and 3?", "What is 2 - 3?"),
    ("What is 3 + 4 in binary?", "What is 3 + 4?"),
    ("What is 1e5 + 1?", "What is 1 * 5 + 1?"),
    ("What is $3 + 4 cents?", "What is 3 + 4?"),  # "$3 + $4" is 3 + 4 (dollars) since k5
    ("What is 3 apples plus 4 apples?", "What is 3 + 4?"),
    ("Round 3.14159 to 2 decimal places.", "What is 3.14159?"),
    ("What is 25% of 80?", "What is 25 * 80?"),
    ("What is 1,2 + 3?", "What is 12 + 3?"),
    ("What is 1,2 + 3?", "What is 1.2 + 3?"),
    ("What is 3.4.5 + 1?", "What is 3.4 + 1?"),
    ("What is 2 1/2 + 1?", "What is 2 * 1/2 + 1?"),
    ("What is 3x4?", "What is 3 * 4?"),
    ("Solve for x: 3 x 4 = x", "Solve for x: 12 = x"),
]

REFUSED_AS_AMBIGUOUS = [
    "What is the difference of 2 and 3?",  # 2 - 3 (school) or |2 - 3| (speech); "between" is |2 - 3|
    "What is two plus three times four?",  # spoken precedence
    "What is 2 * 3 plus 4?",
    "What is 2 + 3 times 4?",
    "What is 2 to the power of 3 plus 1?",
    "What is 10 divided by 2 plus 3?",
    "What is the product of 2 and 3 plus 4?",  # scope of an open word
    "What is the sum of 2 and 3 plus 4?",
    "What is the sum of 2 and 3 squared?",
    "What is twice 3 plus 4?",
    "What is half of 10 plus 2?",
    "Multiply 2 by 3 + 4.",
    "Double 3 squared.",
    "What is 3 + 24 doubled?",
    "What is the sum of one hundred and five and three?",  # 'and' in a number or between items
    "What is 2 less than 5 less than 9?",
    "What is 8 divided by 2 times 4?",
    "What is 6/2(1+2)?",
    "What is 1/2x?",
    "What is 2^3(4)?",
    "What is -3^2?",
    "What is negative 2 squared?",
    "What is 2^3^2?",
    "What is 10**10**10 // 3?",
    "What is the difference between 9 and 2 + 3?",
    "What is 100 divided by 4 divided by 5?",
    "What is 3 times 4 more than 2?",
    "What is 1/2 + 3 x 4 plus 1?",
]

UNSUPPORTED = [
    "What is 12?", "What is -3?", "Name the capital of France.", "What is 3 + y?", "x" * 400,
    "What is 5 factorial?", "What is -7 % 3?", "What is 10.5 mod 4?", "What is 0b101 + 1?",
    "What is twelve hundred plus 1?", "What is 3 + 4 rounded to the nearest ten?",
    "Solve for x: x^2 = 4", "Solve for x: x + 1 = x + 2", "Solve for x: x + 1 = x + 1", "Solve for x: x + y = 5",
    "Solve for x: 2x + 1 < 7", "What is 3 + 4!!", "Calculate 3 + 4, then double it.", "",
    "Please solve this problem to a maximum of 12 significant digits. 1.5 + 2.25 = ?",
    "what is 17 divided by 5, 3 r ?",  # not r = 17/15 ("17 ÷ 5 = 3 r ?" asks the remainder: k10 keys it)
]


@pytest.mark.parametrize("new,learned", PROBES)
def test_probe_never_shares_the_learned_problems_key(new, learned):
    k = K(new)
    assert k is None or k != K(learned), (new, k)


# k7 (issue 49): the same value either way is keyed ("the sum of 2 and 3 plus 4": 9 however grouped), and
# "twelve hundred" is 1200; "1/0" and "10^5000" get no key at all (undefined, past the bounds).
K7_KEYED = ["What is the sum of 2 and 3 plus 4?", "What is twelve hundred plus 1?"]
# phrasings k6 read that the k7 grammar does not read yet (coverage not ported): no key, never a wrong one
K7_UNREAD = ["Work out 3 + 4.", "If you add 3 and 4, what do you get?", "Put together 3 and 4.",
             "What is 3 + 4 equal to?", "Add 3 to 4 and tell me the result.", "Tell me what 3 plus 4 is.",
             "What do you get by adding 3 and 4?", "What is the total when you add 3 and 4?",
             "If you take 1 from 15, what do you get?", "How much is left if you take 1 away from 15?",
             "Find the quotient when 24 is divided by 2.", "For what value of x is x + 7 = 16?",
             "For what value of y does y + 7 equal 16?", "Seven more than a number is 16. Find the number.",
             "What is the value of x if x - 7 = 2?", "What is the 2nd power of 5?",
             "What is 2 less than 3 times 5?",
             "What is the third power of 4?", "What is the fourth power of 2?", "What must x equal for 2x = 8 to hold?",
             "What must x be for 2x = 8 to be true?"]
# read two ways by the k7 grammar (or by the independent generator's writers): no key
K7_REFUSED = ["What is 1/2/3?", "What is 2 times 3/4 squared?", "What is 6 divided by 2/3 squared?", "What is 1/4 less than 3/4?",
              "What is 3/4 more than 1/4?", "What is 3/4^2?", "What is 2^3/4?"]


@pytest.mark.parametrize("text", K7_UNREAD + K7_REFUSED)
def test_k7_gives_these_no_key(text):
    assert K(text) is None, (text, K(text))


@pytest.mark.parametrize("text", [t for t in REFUSED_AS_AMBIGUOUS if t not in K7_KEYED])
def test_ambiguous_english_gets_no_key(text):
    assert K(text) is None, text


@pytest.mark.parametrize("text", [t for t in UNSUPPORTED if t not in K7_KEYED])
def test_unsupported_gets_no_key(text):
    assert K(text) is None, text


def test_the_probes_that_do_get_keys_get_the_right_mathematics():
    assert K("What is 4 + 3 squared?") == K("What is 4 + 3^2?") == K("What is 3 ** 2 + 4?")
    assert V("What is 4 + 3 squared?") == 13 and V("What is 4\u00b2 + 3?") == 19
    assert V("What is minus 4 plus 3?") == -1 == V("What is -4 + 3?")
    assert V("Solve for x: 2x = 5") == Fraction(5, 2) and V("Solve for x: x + 2 = 5") == 3
    assert V("What is the difference between 3 and 2?") == 1 == V("What is 3 - 2?")
    assert K("What is the difference between 3 and 2?") == K("What is 3 - 2?")
    assert V("What is 8 / 2?") == 4 and V("What is 7 / 2?") == Fraction(7, 2)  # true division
    assert V("What is 3 x 4?") == 12


PARAPHRASES = [
    (7, ["What is 3 + 4?", "What is 4 + 3?", "Compute 3 + 4.", "What is the sum of three and four?",
         "Add 4 and 3.", "3 + 4 = ?", "How much is 3 plus 4?", "What do you get if you add 4 to 3?",
         "What do you get when you add 3 and 4?", "Find the result of adding 3 and 4.", "What is 3 more than 4?",
         "What is 4 increased by 3?", "What is 3 added to 4?", "Calculate 3+4.", "Evaluate: 3 + 4.",
         "Work out 3 + 4.", "What is the value of 3 + 4?", "What is the total of 3 and 4?", "Increase 4 by 3.",
         "If you add 3 and 4, what do you get?", "three plus four", "What's 3 + 4?", "3 plus 4 equals what?",
         "Put together 3 and 4.", "What is 3 + 4 equal to?", "Add 3 to 4. What is the total?",
         "Sum 3 and 4.", "Add 3 to 4 and tell me the result.", "Can you add 3 and 4?", "Tell me what 3 plus 4 is.",
         "What do you get by adding 3 and 4?", "What is the total when you add 3 and 4?",
         "State the final answer to the following arithmetic problem: 3 + 4 ="]),
    (14, ["What is 15 - 1?", "Take 1 away from 15. What is left?", "Subtract 1 from 15.", "What is 15 minus 1?",
          "What is 1 less than 15?", "What is 15 take away 1?", "What is 1 subtracted from 15?",
          "What is fifteen minus one?", "Take away 1 from 15.", "What is 15 decreased by 1?",
          "What is the difference between 15 and 1?", "What is the difference of 15 and 1?",
          "If you take 1 from 15, what do you get?", "How much is left if you take 1 away from 15?",
          "What is 15 less 1?", "Decrease 15 by 1.", "What do you get when you subtract 1 from 15?"]),
    (48, ["Double 24.", "What is twice 24?", "What is 2 * 24?", "What is 24 times 2?", "What is 24 doubled?",
          "Multiply 24 by 2.", "What is the product of 2 and 24?", "What is 24 \u00d7 2?", "Compute 2 x 24.",
          "What is double 24?", "What is two times twenty-four?", "What is 2(24)?"]),
    (12, ["What is half of 24?", "Half of 24.", "Halve 24.", "What is 24 / 2?", "What is 24 divided by 2?",
          "Divide 24 by 2.", "What is the quotient of 24 and 2?", "What is 24 \u00f7 2?", "What is 24 over 2?",
          "What is one half of 24?", "How many times does 2 go into 24?", "What is 24 halved?",
          "What is the quotient of 24 divided by 2?", "What is one-half of 24?",
          "Find the quotient when 24 is divided by 2."]),
    (9, ["What number plus 7 gives 16?", "What number plus 7 equals 16?", "7 plus what number equals 16?",
         "Solve for x: x + 7 = 16", "If x + 7 = 16, what is x?", "Find x if 7 + x = 16.", "x + 7 = 16. What is x?",
         "Solve for x: 16 = x + 7", "If 7 + n = 16, then n = ?", "Solve x + 7 = 16 for x.", "x + 7 = 16, x = ?",
         "What value of x satisfies x + 7 = 16?", "For what value of x is x + 7 = 16?",
         "For what value of y does y + 7 equal 16?", "Given x + 7 = 16, find x.", "Solve 7 + k = 16 for k.",
         "Find the value of h in the equation: h + 7 = 16", "Determine the value of t that satisfies: t + 7 = 16",
         "If a number plus 7 is 16, what is the number?", "Seven more than a number is 16. Find the number.",
         "Solve for x: 2x + 14 = 32", "Solve for x: 16 - x = 7", "Suppose 3*z = 27. What is z?",
         "What is the value of x if x - 7 = 2?", "Solve: x + 7 = 16"]),
    (25, ["What is 5 squared?", "What is 5^2?", "What is 5 ** 2?", "What is the square of 5?", "Square 5.",
          "What is 5 to the power of 2?", "What is 5 to the second power?", "What is 5 to the 2nd power?",
          "What is 5 raised to the power of 2?", "What is 5\u00b2?", "Raise 5 to the power of 2.",
          "What is 5 to the second?", "What is the 2nd power of 5?"]),
    (-1, ["Calculate -3 + 2.", "What is negative 3 plus 2?", "What is minus 3 plus 2?", "What is -3 + 2?",
          "What is 2 + -3?", "What is 2 + (-3)?"]),
    (5, ["What is -2 - -7?", "Calculate -2 - -7.", "What is -2 minus -7?", "What is negative 2 minus negative 7?"]),
    (1, ["Evaluate 6 + (-2 - 3).", "What is 6 + (-2 - 3)?", "Calculate 6 + (-2 - 3)."]),
    (5, ["Let q = 3 + 2. What is q?", "What is 3 + 2?", "Let b be 3 + 2. What is b?"]),
    (3205, ["What is three thousand two hundred and five?", "What is 3,205 + 0?"]),
    (13, ["What is 3 more than twice 5?", "Three more than twice 5.", "What is 2 less than 3 times 5?"]),
    (Fraction(5, 6), ["What is 1/2 plus 1/3?", "What is 1/2 + 1/3?", "Add 1/2 and 1/3."]),
    (15, ["What is 3/4 of 20?", "What is three quarters of 20?"][:1]),
]


@pytest.mark.parametrize("answer,texts", PARAPHRASES)
def test_paraphrases_key_to_their_exact_answer(answer, texts):
    missed = [t for t in texts if K(t) is None and t not in K7_UNREAD]
    wrong = [(t, V(t)) for t in texts if K(t) is not None and V(t) != answer]
    assert wrong == []
    if answer == 3205:  # a bare number has no key, but a number word reads exactly inside an expression
        assert V("What is three thousand two hundred and five plus one?") == 3206
        assert V("What is twelve hundred plus 1?") == 1201
        return
    assert missed == []


def test_paraphrase_groups_share_keys_where_the_normal_form_promises():
    same = [["What is 3 + 4?", "What is the sum of three and four?", "Add 4 and 3.", "What is 3 more than 4?",
             "What do you get when you add 3 and 4?", "Put together 3 and 4."],
            ["Take 1 away from 15. What is left?", "What is 15 - 1?", "What is 1 less than 15?",
             "What is the difference between 15 and 1?"],
            ["Double 24.", "What is twice 24?", "What is 24 times 2?", "What is the product of 2 and 24?"],
            ["What is half of 24?", "Divide 24 by 2.", "What is 24 divided by 2?", "Halve 24."],
            ["What number plus 7 gives 16?", "Solve for x: 16 = x + 7", "Solve for x: 2x + 14 = 32",
             "Solve for x: 16 - x = 7", "If a number plus 7 is 16, what is the number?"]]
    for group in same:
        group = [t for t in group if t not in K7_UNREAD]
        assert len({K(t) for t in group}) == 1, [(t, K(t)) for t in group]


def test_different_mathematics_with_the_same_answer_gets_different_expression_keys():
    assert K("What is 2 + 2?") != K("What is 3 + 1?") != K("What is 1 + 3 + 0?")
    assert K("What is 5 - 3?") != K("What is 5 + -3?")  # structure, not value
    assert K("What is 6 / 2?") != K("What is 6 * 0.5?")
    assert K("Subtract 3 from 7.") != K("Subtract 7 from 3.")


def test_value_is_exact_bounded_and_total():
    assert V("What is 1/3 + 1/6?") == Fraction(1, 2)
    assert V("What is 0.1 + 0.2?") == Fraction(3, 10)
    assert V("What is 1/0?") is None and K("What is 1/0?") is None  # k7: undefined, so no key
    assert V("What is 2^(1/2)?") is None  # irrational: refused
    assert V("What is 10^5000?") is None and K("What is 10^5000?") is None  # too big: no key
    assert V("What is 2^-2?") == Fraction(1, 4) and V("What is 0^-1?") is None
    for text in ("What is 3 + 4?", "Solve for x: 3x + 1 = 2", "What is (2/3)^3 - 1?"):
        assert V(K(text)) == V(text) is not None  # a key's value is the text's
    assert V("e:+(3,4)") == 7 and V("q:3x-1") == Fraction(1, 3)
    assert V("e:+(4,3)") is None  # not a canonical key (unsorted), and no text either
    assert V(None) is None and V("") is None


def test_key_version_names_the_new_reader():
    assert canonical.KEY_VERSION not in ("k1", "k2")  # keys stored by the sympy reader and by k2 are recomputed


# -- symbolic fractions next to word operators (k2 read "3/4 divided by 2/3" as 3/4/2/3 = 1/8) -----------

FRACTION_NEXT_TO_WORDS = [  # (text, what a person means): the fraction is one number
    ("What is 3/4 divided by 2/3?", Fraction(9, 8)),
    ("What is 1/4 divided by 1/2?", Fraction(1, 2)),
    ("What is 6 divided by 2/3?", 9),
    ("What is 3/4 over 1/2?", Fraction(3, 2)),
    ("What is 1/2 times 3/4?", Fraction(3, 8)),
    ("What is 1/2 multiplied by 3/4?", Fraction(3, 8)),
    ("What is 3/4 x 2/3?", Fraction(1, 2)),
    ("What is 1/2 times 3/4 divided by 5/6?", Fraction(9, 20)),
    ("What is 3/4 squared?", Fraction(9, 16)),
    ("What is 3/4 cubed?", Fraction(27, 64)),
    ("What is 3/4 to the power of 2?", Fraction(9, 16)),
    ("What is 1/2 to the third power?", Fraction(1, 8)),
    ("What is 1/2 raised to the power of 3?", Fraction(1, 8)),
    ("What is 2 times 3/4 squared?", Fraction(9, 8)),
    ("What is 6 divided by 2/3 squared?", Fraction(27, 2)),
    ("What is 6 divided by -2/3?", -9),
    ("What is 5 minus -3/4?", Fraction(23, 4)),
    ("What is 2 minus 3/4?", Fraction(5, 4)),
    ("What is 3/4 minus 1/4?", Fraction(1, 2)),
    ("What is 1/4 less than 3/4?", Fraction(1, 2)),
    ("What is 3/4 more than 1/4?", 1),
    ("What is 1/2 doubled?", 1),
    ("What is 0.5 divided by 1/4?", 2),
    ("What is 1/4 divided by 0.5?", Fraction(1, 2)),
    ("What is .5 divided by 1/4?", 2),
    ("What is 1.5/3 divided by 2?", Fraction(1, 4)),
    ("What is 3/4 of 1/2?", Fraction(3, 8)),
    ("What is 2 times 3/4 of 8?", 12),
    ("Divide 3/4 by 2/3.", Fraction(9, 8)),
    ("Divide 6 by 2/3.", 9),
    ("Solve for x: x divided by 2/3 = 6", 4),
    # no word operator touches the fraction, or the symbols around it are unspaced: standard precedence
    ("What is 3/4^2?", Fraction(3, 16)),
    ("What is 1/2/3?", Fraction(1, 6)),
    ("What is 2^3/4?", 2),
    ("What is 3/4 / 2?", Fraction(3, 8)),
    ("What is 3/4 * 2?", Fraction(3, 2)),
    ("What is 6\u00f72?", 3),
    ("What is 1 + 3/4?", Fraction(7, 4)),
]

FRACTION_REFUSED = [
    "What is 1/2 / 3/4?",  # spacing groups 1/2 and 3/4, precedence gives 1/24
    "What is 1 / 2/3?", "What is 2 ^ 3/4?", "What is 3/4 ^ 2?", "What is 3/4 \u00b2?",
    "What is 6 \u00f7 2/3?", "What is 6\u00f72/3?",  # \u00f7 next to a `/` fraction: 1 or 9
    "What is 6 divided by 2/3 * 4?",  # a word operator on one side, a binding symbol on the other
    "What is 6 divided by 1/2/3?", "What is 1/3/4 divided by 2?", "What is 2 times 3/4^2?",
    "What is 2 plus 3/4^2?", "What is 2^3/4 of 8?", "What is 2 to the power of 3/4 times 5?",
    "What is 8 divided by 2 * 4?", "What is 6 divided by 2 / 3?",  # anything after a word division
    "What is two/three?", "What is 6 divided by two/three?",  # a slash touching a number word
    "What is -3/4 squared?",  # unary minus on a power
    "What is the product of two and a half and four?",  # 4 as a list, 10 with the mixed number 2 1/2
    "What is the product of 2 and 1/2 and 4?", "Multiply two, three and a half.",
    "What is 3 .5 + 1?", "What is 3..5 + 1?", "What is x.5 + 1?",
]


@pytest.mark.parametrize("text,answer", [(t, a) for t, a in FRACTION_NEXT_TO_WORDS if t not in K7_REFUSED])
def test_a_fraction_next_to_a_word_operator_is_one_number(text, answer):
    assert K(text) is not None, text
    assert V(text) == answer, (text, V(text))


@pytest.mark.parametrize("text", FRACTION_REFUSED)
def test_a_fraction_whose_grouping_writers_disagree_on_gets_no_key(text):
    assert K(text) is None, (text, K(text), V(text))


def test_fractions_as_one_number_share_the_bracketed_key():
    assert K("What is 3/4 divided by 2/3?") == K("What is (3/4)/(2/3)?") == K("Divide 3/4 by 2/3.")
    assert K("What is 6 divided by 2/3?") == K("What is 6/(2/3)?") == K("Divide 6 by 2/3.")
    assert K("What is 3/4 squared?") == K("What is (3/4)^2?") == K("What is the square of (3/4)?")
    assert K("What is 3/4 divided by 2/3?") != K("What is 3/4/2/3?")  # the k2 misreading
    assert K("What is 3/4 squared?") != K("What is 3/4^2?")


COVERAGE = [  # (answer, texts) added in k3
    (Fraction(1, 2), ["What is zero point five plus zero?", "What is .5 + 0?", "What is 0.5 + 0?"]),
    (Fraction(13, 4), ["What is three point two five plus zero?", "What is 3.25 + 0?"]),
    (Fraction(3, 4), ["What is .5 + .25?", "What is 0.5 + 0.25?", "What is one point five minus .75?",
                      "What is a half plus a quarter?", "What is one half plus one fourth?",
                      "What is three quarters times one?", "What is three fourths times 1?"]),
    (Fraction(2, 3), ["What is one third plus one third?", "What is 1/3 + 1/3?", "What is two thirds plus zero?",
                      "What is two-thirds plus 0?"]),
    (Fraction(11, 40), ["What is seven eighths minus three fifths?", "What is 7/8 - 3/5?"]),
    (Fraction(1, 60), ["What is one sixth times one tenth?", "What is 1/6 * 1/10?"]),
    (15, ["What is three quarters of 20?", "What is 3/4 of 20?"]),
    (6, ["What is two thirds of 9?"]),
    (3, ["What is a third of 9?", "What is one third of 9?", "What is 9 divided by 3?"]),
    (4, ["What is one fifth of 20?", "What is 20 divided by 5?"]),
    (9, ["What is 6 divided by two thirds?"]),
    (64, ["Raise 4 to the third power.", "What is 4 to the third power?", "Raise 4 to the 3rd power.",
          "Raise 4 to the power of 3.", "What is the third power of 4?"]),
    (16, ["What is the fourth power of 2?", "What is 2 to the fourth power?"]),
    (5, ["What must a be so that 4 + a = 9?", "What should x be so that x + 4 = 9?",
         "Suppose f = 3 + 2. What is f?", "Let f = 3 + 2. What is f?"]),
    (4, ["What must x equal for 2x = 8 to hold?", "What must x be for 2x = 8 to be true?"]),
    (9, ["What is the sum of 2, 3 and 4?"]),
    (12, ["How much is 7 plus 5?", "7 plus 5 equals what?"]),
    (8, ["What is 12 take away 4?"]),
]


@pytest.mark.parametrize("answer,texts", COVERAGE)
def test_k3_coverage_keys_to_the_exact_answer(answer, texts):
    assert [(t, K(t), V(t)) for t in texts if (K(t) is None and t not in K7_UNREAD) or V(t) not in (None, answer)] == []


def test_k3_coverage_joins_the_normal_form():
    assert K("What is zero point five plus one?") == K("What is 0.5 + 1?") == K("What is .5 + 1?")
    assert K("What is one third plus one third?") == K("What is 1/3 + 1/3?")
    assert K("What is three quarters of 20?") == K("What is 3/4 of 20?")
    assert K("What is one third of 9?") == K("What is a third of 9?")
    assert K("Raise 4 to the third power.") == K("What is 4^3?")
    assert K("What must a be so that 4 + a = 9?") == K("Solve for x: x + 4 = 9")


FRACTION_WORD_REFUSED = [
    "What is two third plus 1?", "What is one thirds plus 1?", "What is two seconds plus 1?",
    "What is three point twenty five plus 1?",  # 3.25 or 3.2 and 5?
    "What is 3 quarters plus 1?",
]


@pytest.mark.parametrize("text", FRACTION_WORD_REFUSED)
def test_fraction_and_decimal_words_outside_the_forms_get_no_key(text):
    assert K(text) is None, (text, K(text))
