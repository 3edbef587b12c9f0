"""Every phrase frame of the key reader x every operand kind, against a second evaluator (issue 42, item 2).

The generator instantiates each frame below (the phrase frames of key_frames.py / key_phrases.py /
key_parse.py, written out by hand) with each operand kind (whole, negative, decimal, fraction in digits,
fraction in words, percent, money, units, number words, large numbers). The SECOND evaluator is the
`meaning` column: what the English phrase means, written from the language, never by calling the
reader's code. A meaning of None says the phrase has no single number (read two ways by writers, or no
rational value): such a text must get no key.

Verdicts per text: keyed-correct (a key whose value is the meaning) or refused (no key). Anything else
fails: keyed-wrong (the 'Increase 60 by a third' = 60 + 1/3 class), keyed-ambiguous (a key where the
meaning is None), a wrong join (two texts of different meanings, one key) and a pairing join (a frame's
text sharing its key with the plain arithmetic of its numbers, "What is 60 + 1/3?", with another value).
A completeness check lists the reader's phrase tables: a phrase added to the grammar without a row here
fails, so the next misread class is met here before users meet it. Quick tier: a few seconds.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from fractions import Fraction as F
from typing import NamedTuple

import pytest

from galahad.flywheel.problems import canonical, key_parse


class Op(NamedTuple):
    kind: str  # int neg dec fdig fword pct money unit word large
    text: str
    value: F  # the number the operand names (a percent: its fraction, 15% = 3/20)
    plain: str  # the same number in plain digits for "What is 60 + 1/3?"


A_OPS = [Op("int", "60", F(60), "60"), Op("neg", "-4", F(-4), "(-4)"), Op("dec", "2.5", F(5, 2), "2.5"),
         Op("fdig", "1/3", F(1, 3), "(1/3)"), Op("fword", "a third", F(1, 3), "(1/3)"),
         Op("fword", "two thirds", F(2, 3), "(2/3)"), Op("pct", "15%", F(3, 20), "(15/100)"),
         Op("money", "$4.50", F(9, 2), "4.5"), Op("unit", "5 km", F(5), "5"), Op("word", "twelve", F(12), "12"),
         Op("large", "1,000,000", F(10 ** 6), "1000000"), Op("mixed", "2 1/2", F(5, 2), "(5/2)"),
         Op("mixedw", "two and a half", F(5, 2), "(5/2)")]
B_OPS = [Op("int", "5", F(5), "5"), Op("neg", "-3", F(-3), "(-3)"), Op("dec", "0.5", F(1, 2), "0.5"),
         Op("fdig", "3/4", F(3, 4), "(3/4)"), Op("fword", "a quarter", F(1, 4), "(1/4)"),
         Op("fword", "three quarters", F(3, 4), "(3/4)"), Op("pct", "20%", F(1, 5), "(20/100)"),
         Op("money", "$2", F(2), "2"), Op("unit", "3 km", F(3), "3"), Op("word", "seven", F(7), "7"),
         Op("large", "2,000,000", F(2 * 10 ** 6), "2000000"), Op("mixed", "1 1/4", F(5, 4), "(5/4)"),
         Op("mixedw", "one and a quarter", F(5, 4), "(5/4)")]
PART = ("fword", "pct")  # operands that name a part of something else


# -- the second evaluator: what each phrase means in English ------------------------------------------

def _whole(x: F) -> bool:
    return x.denominator == 1


def add(a: Op, b: Op):
    return None if "pct" in (a.kind, b.kind) else a.value + b.value  # 60 plus 15%: 60.15 or 69


def sub(a: Op, b: Op):
    return None if "pct" in (a.kind, b.kind) else a.value - b.value


def mul(a: Op, b: Op):
    return a.value * b.value


def div(a: Op, b: Op):
    return None if b.value == 0 else a.value / b.value


BIG = "beyond the reader's size bounds"  # a whole power too big to compute: refused, or keyed without a value


def power(a: Op, b: Op):
    if "pct" in (a.kind, b.kind) or not _whole(b.value) or (a.value == 0 and b.value < 0):
        return None  # 60 to the power of 0.5: no rational value
    return BIG if abs(b.value) > 64 else a.value ** int(b.value)


def change(sign: int, what: str = "by"):
    """increase/decrease A by B, A increased/decreased by B, A less B: a part is relative, an amount absolute."""
    def m(a: Op, b: Op):
        if a.kind == "pct":
            return None
        if b.kind == "pct":
            return a.value * (1 + sign * b.value)  # 60 less 20%: 48
        if b.kind == "fword" and what == "by":  # increase 60 by a quarter: 75; 2.5 increased by a quarter?
            return a.value * (1 + sign * b.value) if _whole(a.value) else None
        if b.kind in ("fdig", "fword"):
            return None  # by 3/4, less a quarter: a part or an amount?
        return a.value + sign * b.value
    return m


def than(sign: int):
    """B more/less/fewer than A (B is the first operand written)."""
    def m(a: Op, b: Op):
        if a.kind == "pct":
            return None
        if b.kind == "pct" or (b.kind == "fword" and _whole(a.value)):
            return a.value * (1 + sign * b.value)  # a quarter more than 60: 75
        if b.kind == "fword":
            return None  # a quarter less than three quarters: 1/2 or 9/16?
        if b.kind == "fdig" and _whole(a.value):
            return None  # 3/4 more than 60: 60.75 or 105?
        return a.value + sign * b.value  # 3/4 more than 1/3, 0.5 more than 60, 5 fewer than 60
    return m


def difference(a: Op, b: Op):
    if "pct" in (a.kind, b.kind) or a.value < b.value:
        return None  # a - b or |a - b|
    return a.value - b.value


def quotient(a: Op, b: Op):
    """The quotient of A and B: A / B, but for whole numbers B does not divide, 15 (remainder 2) or 15.5."""
    if b.value == 0 or (_whole(a.value) and _whole(b.value) and a.value % b.value):
        return None
    return a.value / b.value


def mean(a: Op, b: Op):
    return None if "pct" in (a.kind, b.kind) else (a.value + b.value) / 2


def of(a: Op, b: Op):
    """B of A: a part of A (a quarter of 60, 3/4 of 60, 20% of 60); a whole number 'of' means nothing."""
    return b.value * a.value if b.kind in ("fdig", "fword", "pct") else None


def root(k: int):
    """The k-th root of x where it is rational (x >= 0 and both parts k-th powers), else None."""
    def fn(x: F):
        if x < 0:
            return None
        parts = []
        for q in (x.numerator, x.denominator):
            r = next((c for c in range(int(round(q ** (1 / k))) - 2, int(round(q ** (1 / k))) + 3)
                      if c >= 0 and c ** k == q), None)
            if r is None:
                return None
            parts.append(r)
        return F(parts[0], parts[1])
    return fn


def unary(fn: Callable[[F], F], neg_doubt: bool = False):
    def m(a: Op, b=None):
        if a.kind == "pct" or (neg_doubt and a.value < 0):
            return None  # 15% squared; -4 squared: (-4)^2 or -(4^2)
        return fn(a.value)
    return m


def nopct(fn):
    return lambda a, b: None if "pct" in (a.kind, b.kind) else fn(a.value, b.value)


def _gap(x: F, y: F):
    return x - y if x >= y else None  # how much more is 3 than 5: -2 or 2?


def _pct_change(sign: int):
    def m(x: F, y: F):
        if x <= 0 or (sign > 0 and y < x) or (sign < 0 and y > x):
            return None
        return (y - x) / x * 100 * sign
    return m


def _mod(x: F, y: F):
    """The remainder of whole x >= 0 divided by whole y > 0; otherwise conventions differ."""
    return x % y if _whole(x) and _whole(y) and x >= 0 and y > 0 else None


def _intdiv(x: F, y: F):
    return x // y if _whole(x) and _whole(y) and x >= 0 and y > 0 else None


def _round(unit: F):
    """The nearest multiple of unit; an exact tie has no single answer (half up or half even)."""
    def fn(x: F):
        q = x / unit
        lo = q.numerator // q.denominator
        return None if q - lo == F(1, 2) else (lo + (q - lo > F(1, 2))) * unit
    return fn


def _lit(fn):
    """Rounding a number (a percentage: of what?)."""
    return lambda a, b=None: None if a.kind == "pct" else fn(a.value)


# whole questions (kind "whole": the text itself and its Q: ... A: form)
COMPARISONS = [
    ("What is the remainder when {A} is divided by {B}?", nopct(_mod)), ("{A} mod {B}", nopct(_mod)),
    ("What is {A} modulo {B}?", nopct(_mod)), ("When {A} is divided by {B}, what is the remainder?", nopct(_mod)),
    ("Find the remainder of {A} divided by {B}.", nopct(_mod)), ("{A} // {B}", nopct(_intdiv)),
    ("f(x) = x + {B}. What is f({A})?", nopct(lambda x, y: x + y)),
    ("Let g(x) = {B} * x - 1. Find g({A}).", nopct(lambda x, y: y * x - 1)),
    ("If h(t) = t^2 - {B}, what is h({A})?", nopct(lambda x, y: x * x - y)),
    ("How much more is {A} than {B}?", nopct(_gap)), ("{A} is how much more than {B}?", nopct(_gap)),
    ("By how much does {A} exceed {B}?", nopct(_gap)), ("By how much is {A} greater than {B}?", nopct(_gap)),
    ("How much less is {B} than {A}?", nopct(_gap)), ("By how much is {B} smaller than {A}?", nopct(_gap)),
    ("{B} is how much less than {A}?", nopct(_gap)),
    ("{A} is how many times {B}?", nopct(lambda x, y: x / y if y else None)),
    ("How many times as large as {B} is {A}?", nopct(lambda x, y: x / y if y else None)),
    ("What percent of {A} is {B}?", nopct(lambda x, y: y / x * 100 if x else None)),
    ("What percent is {B} of {A}?", nopct(lambda x, y: y / x * 100 if x else None)),
    ("{B} is what percentage of {A}?", nopct(lambda x, y: y / x * 100 if x else None)),
    ("What fraction of {A} is {B}?", nopct(lambda x, y: y / x if x else None)),
    ("{B} is what fraction of {A}?", nopct(lambda x, y: y / x if x else None)),
    ("What is the percent increase from {A} to {B}?", nopct(_pct_change(1))),
    ("What is the percentage decrease from {A} to {B}?", nopct(_pct_change(-1))),
    ("By what percent does {A} fall to {B}?", nopct(_pct_change(-1))),
]

# (template, meaning, kind): kind "expr" goes into question frames, "cmd" into command frames
BINARY = [(t, m, "whole") for t, m in COMPARISONS] + [
    ("{A} plus {B}", add, "expr"), ("{A} + {B}", add, "expr"), ("{A} add {B}", add, "expr"),
    ("{A} increased by {B}", change(1), "expr"), ("{B} added to {A}", add, "expr"),
    ("{B} more than {A}", than(1), "expr"), ("the sum of {A} and {B}", add, "expr"),
    ("the total of {A} and {B}", add, "expr"),
    ("{A} minus {B}", sub, "expr"), ("{A} - {B}", sub, "expr"), ("{A} less {B}", change(-1, "less"), "expr"),
    ("{A} subtract {B}", sub, "expr"), ("{A} take away {B}", sub, "expr"),
    ("{A} decreased by {B}", change(-1), "expr"), ("{A} reduced by {B}", change(-1), "expr"),
    ("{B} subtracted from {A}", sub, "expr"), ("{B} less than {A}", than(-1), "expr"),
    ("{B} fewer than {A}", than(-1), "expr"), ("the difference between {A} and {B}", difference, "expr"),
    ("the difference of {A} and {B}", difference, "expr"),
    ("{A} times {B}", mul, "expr"), ("{A} * {B}", mul, "expr"), ("{A} multiplied by {B}", mul, "expr"),
    ("the product of {A} and {B}", mul, "expr"),
    ("{A} divided by {B}", div, "expr"), ("{A} / {B}", div, "expr"), ("{A} over {B}", div, "expr"),
    ("the quotient of {A} and {B}", quotient, "expr"), ("the quotient of {A} divided by {B}", quotient, "expr"),
    ("the quotient when {A} is divided by {B}", quotient, "expr"),
    ("the mean of {A} and {B}", mean, "expr"), ("the average of {A} and {B}", mean, "expr"),
    ("the arithmetic mean of {A} and {B}", mean, "expr"), ("{A} raised to the power {B}", power, "expr"),
    ("{A} to the power of {B}", power, "expr"), ("{A} ^ {B}", power, "expr"),
    ("{A} raised to the power of {B}", power, "expr"), ("{A} raised to {B}", power, "expr"),
    ("{A} to the power {B}", power, "expr"),
    ("{B} of {A}", of, "expr"),
    ("add {A} and {B}", add, "cmd"), ("add {B} to {A}", add, "cmd"), ("sum {A} and {B}", add, "cmd"),
    ("put together {A} and {B}", add, "cmd"), ("subtract {B} from {A}", sub, "cmd"),
    ("minus {B} from {A}", sub, "cmd"), ("take {B} away from {A}", sub, "cmd"),
    ("take away {B} from {A}", sub, "cmd"), ("take {B} from {A}", sub, "cmd"),
    ("multiply {A} by {B}", mul, "cmd"), ("multiply {A} and {B}", mul, "cmd"), ("divide {A} by {B}", div, "cmd"),
    ("increase {A} by {B}", change(1), "cmd"), ("raise {A} by {B}", change(1), "cmd"),
    ("decrease {A} by {B}", change(-1), "cmd"), ("reduce {A} by {B}", change(-1), "cmd"),
    ("cut {A} by {B}", change(-1), "cmd"), ("lower {A} by {B}", change(-1), "cmd"),
    ("raise {A} to the power of {B}", power, "cmd"), ("raise {A} to the power {B}", power, "cmd"),
]
UNARY = [
    ("Round {A} to the nearest ten", _lit(_round(F(10))), "whole"),
    ("Round {A} to the nearest whole number", _lit(_round(F(1))), "whole"),
    ("{A} rounded to the nearest tenth", _lit(_round(F(1, 10))), "whole"),
    ("Round {A} to 2 decimal places.", _lit(_round(F(1, 100))), "whole"),
    ("What is {A} to one decimal place?", _lit(_round(F(1, 10))), "whole"),
    ("{A} squared", unary(lambda x: x ** 2, True), "expr"), ("{A} cubed", unary(lambda x: x ** 3, True), "expr"),
    ("the square of {A}", unary(lambda x: x ** 2), "expr"), ("the cube of {A}", unary(lambda x: x ** 3), "expr"),
    ("{A} to the third power", unary(lambda x: x ** 3, True), "expr"),
    ("{A} to the 4th power", unary(lambda x: x ** 4, True), "expr"),
    ("the third power of {A}", unary(lambda x: x ** 3), "expr"),
    ("{A} to the zeroth power", unary(lambda x: x ** 0, True), "expr"),
    ("{A} to the first power", unary(lambda x: x, True), "expr"),
    ("the negative of {A}", unary(lambda x: -x), "expr"), ("the opposite of {A}", unary(lambda x: -x), "expr"),
    ("the additive inverse of {A}", unary(lambda x: -x), "expr"),
    ("the reciprocal of {A}", unary(lambda x: 1 / x), "expr"),
    ("the multiplicative inverse of {A}", unary(lambda x: 1 / x), "expr"),
    ("negate {A}", unary(lambda x: -x), "cmd"),
    ("the square root of {A}", unary(root(2)), "expr"), ("the cube root of {A}", unary(root(3)), "expr"),
    ("the fourth root of {A}", unary(root(4)), "expr"), ("sqrt({A})", unary(root(2)), "expr"),
    ("\u221a{A}", lambda a, b=None: None if a.kind in ("neg", "pct", "fdig", "mixed", "mixedw") or " " in a.text
     else root(2)(a.value), "expr"),  # \u221a1/3, \u221a2 1/2: where does the root end?
    ("the absolute value of {A}", unary(abs), "expr"), ("|{A}|", unary(abs), "expr"), ("abs({A})", unary(abs), "expr"),
    ("twice {A}", unary(lambda x: 2 * x), "expr"), ("double {A}", unary(lambda x: 2 * x), "expr"),
    ("triple {A}", unary(lambda x: 3 * x), "expr"), ("thrice {A}", unary(lambda x: 3 * x), "expr"),
    ("{A} doubled", unary(lambda x: 2 * x), "expr"), ("{A} tripled", unary(lambda x: 3 * x), "expr"),
    ("{A} halved", unary(lambda x: x / 2), "expr"),
    ("half of {A}", unary(lambda x: x / 2), "expr"), ("one half of {A}", unary(lambda x: x / 2), "expr"),
    ("one-half of {A}", unary(lambda x: x / 2), "expr"), ("a third of {A}", unary(lambda x: x / 3), "expr"),
    ("one third of {A}", unary(lambda x: x / 3), "expr"), ("a quarter of {A}", unary(lambda x: x / 4), "expr"),
    ("a fourth of {A}", unary(lambda x: x / 4), "expr"), ("one fourth of {A}", unary(lambda x: x / 4), "expr"),
    ("one quarter of {A}", unary(lambda x: x / 4), "expr"), ("one-fourth of {A}", unary(lambda x: x / 4), "expr"),
    ("one-quarter of {A}", unary(lambda x: x / 4), "expr"), ("one-third of {A}", unary(lambda x: x / 3), "expr"), ("two thirds of {A}", unary(lambda x: 2 * x / 3), "expr"),
    ("3/4 of {A}", unary(lambda x: 3 * x / 4), "expr"), ("1/3 of {A}", unary(lambda x: x / 3), "expr"),
    ("25% of {A}", unary(lambda x: x / 4), "expr"), ("50 percent of {A}", unary(lambda x: x / 2), "expr"),
    ("double {A}", unary(lambda x: 2 * x), "cmd"), ("triple {A}", unary(lambda x: 3 * x), "cmd"),
    ("halve {A}", unary(lambda x: x / 2), "cmd"), ("square {A}", unary(lambda x: x ** 2), "cmd"),
    ("cube {A}", unary(lambda x: x ** 3), "cmd"), ("raise {A} to the third power", unary(lambda x: x ** 3), "cmd"),
    ("increase {A} by half", unary(lambda x: x * F(3, 2)), "cmd"),
    ("reduce {A} by half", unary(lambda x: x / 2), "cmd"),
    ("increase {A} by a third", unary(lambda x: x * F(4, 3)), "cmd"),
    ("decrease {A} by a third", unary(lambda x: x * F(2, 3)), "cmd"),
    ("a third more than {A}", lambda a, b=None: (None if a.kind == "pct" or not _whole(a.value)
                                                 else a.value * F(4, 3)), "expr"),
]
EXPR_WRAP = ["What is {e}?", "Calculate {e}.", "{e} = ?", "Compute {e}.", "Find {e}.", "What number is {e}?",
             "Q: What is {e}? A:", "Evaluate {e}.", "What is the value of {e}?", "How much is {e}?"]
CMD_WRAP = ["{c}.", "Please {c}.", "If you {c}, what do you get?", "What do you get by {g}?",
            "{c} and tell me the result."]
GERUND = {"add": "adding", "sum": "summing", "put": "putting", "subtract": "subtracting", "minus": None,
          "take": "taking", "multiply": "multiplying", "divide": "dividing", "increase": "increasing",
          "raise": "raising", "decrease": "decreasing", "reduce": "reducing", "cut": "cutting",
          "lower": "lowering", "double": "doubling", "triple": "tripling", "halve": "halving",
          "square": "squaring", "cube": "cubing", "negate": "negating"}
# the unknown, then an operation on it: "What number, when increased by a quarter, gives 80?"
EQUATIONS = [
    ("What number, when added to {B}, gives 80?", lambda b: (None if b.kind == "pct" else 80 - b.value)),
    ("What number, when increased by {B}, gives 80?",
     lambda b: 80 / (1 + b.value) if b.kind in PART else None if b.kind == "fdig" else 80 - b.value),
    ("What number, when decreased by {B}, gives 80?",
     lambda b: 80 / (1 - b.value) if b.kind in PART else None if b.kind == "fdig" else 80 + b.value),
    ("What number, when reduced by {B}, gives 80?",
     lambda b: 80 / (1 - b.value) if b.kind in PART else None if b.kind == "fdig" else 80 + b.value),
    ("What number, when multiplied by {B}, gives 80?", lambda b: None if b.value == 0 else 80 / b.value),
    ("What number, when divided by {B}, gives 80?", lambda b: 80 * b.value),
    ("What number, when subtracted from {B}, gives 80?", lambda b: None if b.kind == "pct" else b.value - 80),
    ("If a number increased by {B} is 80, what is the number?",
     lambda b: 80 / (1 + b.value) if b.kind in PART else None if b.kind == "fdig" else 80 - b.value),
    ("{B} more than a number is 80. Find the number.",
     lambda b: 80 / (1 + b.value) if b.kind in PART else None if b.kind == "fdig" else 80 - b.value),
    ("What number plus {B} equals 80?", lambda b: None if b.kind == "pct" else 80 - b.value),
]


# unit conversions (key_units): a quantity, a target, and the factors written out here from the units' definitions
FACTORS = {"seconds": ("t", 1), "minutes": ("t", 60), "hours": ("t", 3600), "days": ("t", 86400),
           "grams": ("m", 1), "kg": ("m", 1000), "feet": ("L", 12), "yards": ("L", 36), "ml": ("v", 1),
           "litres": ("v", 1000), "cents": ("$", 1), "dollars": ("$", 100), "dozens": ("n", 12), "eggs": ("n", 1),
           "pounds": ("lb", 16), "ounces": ("lb", 1)}
QUANTITIES = [  # (text, dimension, amount in the dimension's smallest unit here)
    ("3 hours", "t", F(10800)), ("2.5 hours", "t", F(9000)), ("2 h 10 min", "t", F(7800)), ("7 minutes", "t", F(420)),
    ("an hour and a half", "t", F(5400)), ("13 days", "t", F(13 * 86400)), ("3050 g", "m", F(3050)),
    ("2 kg", "m", F(2000)), ("16 yards", "L", F(576)), ("3 ft", "L", F(36)), ("2.25 litres", "v", F(2250)),
    ("$44.29", "$", F(4429)), ("5980 cents", "$", F(5980)), ("8 quarters, 2 dimes and 6 nickels", "$", F(250)),
    ("6 dozen", "n", F(72)), ("9 gross", "n", F(1296)), ("a dozen and a half", "n", F(18)),
    ("six score and five", "n", F(125)), ("half a dozen", "n", F(6)), ("2 pounds", "lb", F(32)),
    ("3 tons", None, None),  # short, long or metric: no unit here
]
CONVERSION_FRAMES = ["How many {T} are in {Q}?", "Convert {Q} to {T}.", "{Q} in {T}", "{Q} = ? {T}",
                     "{Q} is how many {T}?"]


def conversion_rows() -> list:
    rows = []
    for q, dim, amount in QUANTITIES:
        for target, (tdim, f) in FACTORS.items():
            meaning = amount / f if dim is not None and dim == tdim else None
            for frame in CONVERSION_FRAMES if meaning is not None else CONVERSION_FRAMES[:2]:
                rows.append(Row(frame, f"{dim}->{tdim}", _cap(frame.format(Q=q, T=target)), meaning, ()))
    return rows


class Row(NamedTuple):
    frame: str
    kinds: str
    text: str
    meaning: F | None
    plain: tuple  # (plain text, its value) for the pairing check


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def _plain(a: Op, b: Op | None) -> list[tuple[str, F | None]]:
    """The plain arithmetic of the operands' numbers, valued here with Fractions."""
    if b is None:
        pairs = [(f"{a.plain} * 2", a.value * 2), (f"{a.plain} / 2", a.value / 2), (f"{a.plain} + 2", a.value + 2),
                 (f"{a.plain} ^ 2", a.value ** 2), (f"{a.plain} * 3", a.value * 3), (f"{a.plain} / 3", a.value / 3)]
    else:
        x, y, p, q = a.value, b.value, a.plain, b.plain
        pairs = [(f"{p} + {q}", x + y), (f"{p} - {q}", x - y), (f"{q} - {p}", y - x), (f"{p} * {q}", x * y),
                 (f"{p} / {q}", x / y if y else None), (f"{q} / {p}", y / x if x else None)]
    return [(f"What is {t}?", v) for t, v in pairs]


def _wrap(template: str, kind: str, body: str, n: int) -> list[str]:
    if kind == "expr":
        return [w.format(e=body) for w in EXPR_WRAP[: n]]
    if kind == "whole":
        return [body, f"Q: {body} A:"][: n]
    verb, _, rest = body.partition(" ")
    out = []
    for w in CMD_WRAP[: n]:
        if "{g}" in w:
            if GERUND.get(verb) is None:
                continue
            out.append(w.format(g=f"{GERUND[verb]} {rest}"))
        else:
            out.append(_cap(w.format(c=body)))
    return out


def build_table() -> list[Row]:
    rows = []
    combos = [(a, B_OPS[0]) for a in A_OPS] + [(A_OPS[0], b) for b in B_OPS[1:]]
    for template, meaning, kind in BINARY:
        for a, b in combos:
            n = len(EXPR_WRAP) if (a.kind, b.kind) == ("int", "int") else \
                4 if (a.kind, b.kind) in (("int", "fword"), ("int", "pct")) else 1 if "mixed" in a.kind + b.kind else 2
            body = template.format(A=a.text, B=b.text)
            for text in _wrap(template, kind, body, n):
                rows.append(Row(template, f"{a.kind}/{b.kind}", _cap(text), meaning(a, b), tuple(_plain(a, b))))
    for template, meaning, kind in UNARY:
        for a in A_OPS:
            body = template.format(A=a.text)
            for text in _wrap(template, kind, body, 3 if a.kind in ("int", "fword") else 2):
                rows.append(Row(template, a.kind, _cap(text), meaning(a), tuple(_plain(a, None))))
    for template, solve in EQUATIONS:
        for b in B_OPS:
            rows.append(Row(template, b.kind, _cap(template.format(B=b.text)), solve(b),
                            ((f"Solve for x: x + {b.plain} = 80", 80 - b.value),)))
    return rows + conversion_rows()


@pytest.fixture(scope="module")
def table():
    rows = build_table()
    keys = {r.text: canonical.canonical_key(r.text) for r in rows}
    return rows, keys


def test_table_size_and_verdicts(table):
    rows, keys = table
    verdicts = Counter()
    bad = []
    for r in rows:
        k = keys[r.text]
        if k is None:
            verdicts["refused"] += 1
            continue
        v = canonical.value(k)
        if r.meaning is BIG and v is None:
            verdicts["keyed-unbounded"] += 1
        elif r.meaning is None or r.meaning is BIG:
            bad.append(("keyed-ambiguous", r.text, k, v))
        elif v != r.meaning:
            bad.append(("keyed-wrong", r.text, k, v, r.meaning))
        else:
            verdicts["keyed-correct"] += 1
    print(f"\nframe x operand table: {len(rows)} texts, {len({r.frame for r in rows})} frames, {dict(verdicts)}")
    assert bad == []
    assert len(rows) >= 2000
    assert verdicts["keyed-correct"] >= 1000  # not vacuous: most whole-number instances are keyed


def test_whole_number_operands_are_keyed_in_most_frames(table):
    """Coverage guard: a frame whose plain whole-number instance lost its key is a regression."""
    rows, keys = table
    plain = [r for r in rows if r.kinds in ("int/int", "int") and r.meaning is not None]
    missed = sorted({r.frame for r in plain if all(keys[x.text] is None for x in plain if x.frame == r.frame)})
    assert missed == ["{B} of {A}"] or missed == [], missed


def test_the_relative_change_class_is_read_as_relative():
    for text, want in [("Increase 60 by a third.", 80), ("Decrease 60 by a third.", 40), ("Increase 60 by 5.", 65),
                       ("Reduce 60 by half.", 30), ("Increase 60 by 15%.", 69), ("What is 60 less 10%?", 54),
                       ("What is a third more than 60?", 80), ("What is 60 increased by a quarter?", 75),
                       ("Cut 60 by a third.", 40), ("What is 15% of 60?", 9)]:
        assert canonical.value(text) == want, (text, canonical.canonical_key(text))
    for text in ["Increase 60 by 1/3.", "What is 60 + 10%?", "What is 60 less a third?", "What is 1/3 more than 60?",
                 "What is 20% off 60?", "What is 60 plus 10%?"]:
        assert canonical.canonical_key(text) is None, text
    assert canonical.canonical_key("Increase 60 by a third.") != canonical.canonical_key("What is 60 + 1/3?")


def test_no_wrong_joins_among_the_table(table):
    rows, keys = table
    by_key = defaultdict(set)
    for r in rows:
        if keys[r.text] is not None:
            by_key[keys[r.text]].add(r.meaning)
    assert [(k, m) for k, m in by_key.items() if len(m) > 1] == []


def test_no_frame_text_shares_a_key_with_other_arithmetic_of_its_numbers(table):
    rows, keys = table
    bad = []
    for r in rows:
        k = keys[r.text]
        if k is None:
            continue
        for text, v in r.plain:
            if canonical.canonical_key(text) == k and v != r.meaning:
                bad.append((r.text, text, k))
    assert bad == []


def test_every_phrase_of_the_grammar_has_a_row():
    """A phrase the reader knows that no row instantiates fails here: give it a meaning first."""
    templates = " | ".join(t for t, _, _ in BINARY + UNARY) + " | " + " | ".join(t for t, _ in EQUATIONS)
    templates = templates.lower()
    phrases = {" ".join(p) for p, *_ in key_parse.ADD_OPS} | {" ".join(p) for p, *_ in key_parse.MUL_OPS}
    phrases |= {" ".join(p) for p in key_parse.POW_WORDS} | {w for w in key_parse.POSTFIX if w.isalpha()}
    phrases |= {" ".join(p) for p in key_parse.OF_WORDS}
    phrases |= set(key_parse.SCALED) | {" ".join(p) for p in key_parse.SCALE_OF} | set(key_parse.TIMES_OF)
    phrases |= {v for v in key_parse.VERBS} | {g for g, _ in GERUND.items()}
    missing = sorted(p for p in phrases if p not in templates and p not in ("\u00f7",))
    assert missing == [], f"phrases with no meaning row: {missing}"
    assert {v for v in key_parse.VERBS} <= set(GERUND), "a command verb without a gerund row"
    assert {g for g in key_parse.GERUNDS} <= {g for g in GERUND.values() if g} | {"minusing"}


def test_keys_name_the_mathematics_not_the_wording():
    K = canonical.canonical_key
    assert K("What is a third plus 1?") == K("What is 1/3 + 1?") == K("What is 2/6 + 1?")
    assert K("What is 0.75 + 1?") == K("What is 3/4 + 1?") == K("What is three quarters plus 1?")
    assert K("What is 5 cubed?") == K("What is 5 * 5 * 5?") == K("What is 5^2 * 5?")
    assert K("What is (-3) * (-3)?") == K("What is (-3)^2?")
    assert K("What is 1/3 of 27?") == K("What is a third of 27?") == K("What is 27 / 3?")
    assert K("What number is 5 less than 12?") == K("What is 5 less than 12?") == K("Find 12 - 5.")
    same = ["What is 7 + 5?", "Compute 7 + 5.", "Calculate 7 + 5.", "Find 7 + 5.", "Q: What is 7 + 5? A:",
            "What number is 7 + 5?", "7 + 5 = ?"]
    assert len({K(t) for t in same}) == 1 and K(same[0]) is not None
