"""Operator phrasings and question frames for the generated key-reader corpus (tests/textgen.py), with exact
Fraction arithmetic. Written from how English and school notation say + - x / and powers, never from the
reader's grammar.

A template is words split on spaces: `{0}`/`{1}` are the operands in the spec's order (a reversed phrasing
such as "{1} less than {0}" names them the other way round), `{1o}` an ordinal ("third"), a leading `~` glues
a word to the one before it, a leading `!` marks a word meaningless where it stands ("the sum !of")."""

from __future__ import annotations

from fractions import Fraction as F
from typing import NamedTuple

UNDEF = "undefined"
BOUND = 10 ** 30  # past this numerator/denominator the generator drops the item (no reader owes a value)


class TooBig(Exception):
    """A value past BOUND: the item is not generated."""


# Words that cannot carry meaning anywhere (the property tests may delete them). Chosen from English.
SKIP = frozenset("""what what's whats is are the a an please compute calculate evaluate find work out how
much many can you tell me value does do equal equals get if result there convert express thanks
= ? . , !""".split())


def _chk(x):
    if x is not UNDEF and (abs(x.numerator) > BOUND or x.denominator > BOUND):
        raise TooBig
    return x


def _root(a: F, k: int):
    """The exact rational k-th root of a, or UNDEF (negative under an even root, or not rational)."""
    if a < 0:
        if k % 2 == 0:
            return UNDEF
        r = _root(-a, k)
        return UNDEF if r is UNDEF else -r
    out = []
    for n in (a.numerator, a.denominator):
        r = round(n ** (1.0 / k)) if n < 2 ** 1000 else None
        if r is None:
            return UNDEF
        r = next((c for c in (r - 1, r, r + 1) if c >= 0 and c ** k == n), None)
        if r is None:
            return UNDEF
        out.append(r)
    return F(out[0], out[1])


def _pow(a: F, b: F):
    if abs(b) > 64 or b.denominator > 64 or (a != 0 and abs(a) != 1 and abs(b) * max(abs(a.numerator), a.denominator).bit_length()
                       > 100):
        raise TooBig
    if b.denominator != 1:
        if a < 0:
            return UNDEF  # a negative base under a fractional power: not generated as defined
        a = _root(a, b.denominator)
        if a is UNDEF:
            return UNDEF
        b = F(b.numerator)
    if a == 0 and b <= 0:
        return UNDEF
    return a ** int(b)


def lift(f):
    def g(*xs):
        return UNDEF if any(x is UNDEF for x in xs) else _chk(f(*xs))
    return g


add, sub, mul = lift(lambda a, b: a + b), lift(lambda a, b: a - b), lift(lambda a, b: a * b)
div = lift(lambda a, b: UNDEF if b == 0 else a / b)
pw = lift(_pow)
pct_of = lift(lambda p, b: p * b / 100)
pct_up = lift(lambda p, b: b * (1 + p / 100))
pct_down = lift(lambda p, b: b * (1 - p / 100))
sq, cube = lift(lambda a: a * a), lift(lambda a: a ** 3)
dbl, tpl, half = lift(lambda a: 2 * a), lift(lambda a: 3 * a), lift(lambda a: a / 2)
neg, absv = lift(lambda a: -a), lift(abs)
recip = lift(lambda a: UNDEF if a == 0 else 1 / a)
sqrt, cbrt = lift(lambda a: _root(a, 2)), lift(lambda a: _root(a, 3))


class Ph(NamedTuple):
    fn: object
    template: str
    form: str   # infix | closed | imp | sym | tight | braced | pct | fracof | pre | post
    group: str  # what it may be swapped with in a near miss: arith | pct | fracof | unary
    op: str     # + - * / ^ or the unary's name: chains and ambiguity rules look at it

    @property
    def swapped(self) -> bool:
        return self.template.find("{1") < self.template.find("{0}")


def _b(fn, op, form, *templates, group="arith"):
    return [Ph(fn, t, form, group, op) for t in templates]


BIN = {ph.template: ph for ph in [
    *_b(add, "+", "infix", "{0} plus {1}", "{1} added to {0}", "{1} more than {0}", "{0} increased !by {1}"),
    *_b(add, "+", "closed", "the sum !of {0} and {1}", "the total !of {0} and {1}"),
    *_b(add, "+", "imp", "add {1} to {0}", "!add {0} and {1}"),
    *_b(sub, "-", "infix", "{0} minus {1}", "{1} less than {0}", "{1} fewer than {0}",
        "{1} subtracted from {0}", "{0} take away {1}", "{0} decreased !by {1}", "{0} reduced !by {1}"),
    *_b(sub, "-", "closed", "the difference !of {0} and {1}", "the difference between {0} and {1}"),
    *_b(sub, "-", "imp", "subtract {1} from {0}", "take {1} !away from {0}", "take !away {1} from {0}"),
    *_b(mul, "*", "infix", "{0} times {1}", "{0} multiplied !by {1}"),
    *_b(mul, "*", "closed", "the product !of {0} and {1}"),
    *_b(mul, "*", "imp", "multiply {0} !by {1}", "multiply {0} and {1}"),
    *_b(div, "/", "infix", "{0} divided !by {1}", "{0} over {1}"),
    *_b(div, "/", "closed", "the quotient !of {0} and {1}"),
    *_b(div, "/", "imp", "divide {0} !by {1}", "divide {1} into {0}"),
    *_b(pw, "^", "infix", "{0} to the power !of {1}", "{0} !raised to the power !of {1}", "{0} raised to {1}",
        "{0} to the {1o} !power"),
    *_b(pw, "^", "closed", "the {1o} power !of {0}"),
    *_b(add, "+", "sym", "{0} + {1}"),
    *_b(sub, "-", "sym", "{0} - {1}", "{0} − {1}"),
    *_b(mul, "*", "sym", "{0} * {1}", "{0} x {1}", "{0} × {1}", "{0} \\cdot {1}", "{0} \\times {1}"),
    *_b(div, "/", "sym", "{0} / {1}", "{0} ÷ {1}", "{0} \\div {1}", "{0} ~/ ~{1}"),  # "5/0": whole numbers only
    *_b(pw, "^", "tight", "{0} ~^ ~{1}", "{0} ^ {1}", "{0} ~** ~{1}", "{0} ~^{ ~{1} ~}"),
    *_b(div, "/", "braced", "\\frac{ ~{0} ~}{ ~{1} ~}"),
    *_b(pct_of, "%", "pct", "{0} ~% of {1}", "{0} percent of {1}", "a {0} ~% tip on {1}", group="pct"),
    *_b(pct_down, "%", "pct", "{0} ~% off {1}", "{0} percent off {1}", "{0} ~% less than {1}",
        "{1} decreased !by {0} ~%", "{0} percent less than {1}", group="pct"),
    *_b(pct_up, "%", "pct", "{0} ~% more than {1}", "{1} increased !by {0} ~%", "{0} percent more than {1}",
        group="pct"),
    *_b(pct_up, "%+", "pct", "{1} plus {0} ~%", group="pct"),     # ambiguous: b + p/100 or b(1 + p/100)
    *_b(pct_down, "%-", "pct", "{1} minus {0} ~%", group="pct"),
    *_b(mul, "*", "fracof", "{0} of {1}", group="fracof"),
]}

UN = {ph.template: ph for ph in [
    Ph(sq, "{0} squared", "post", "unary", "sq"), Ph(cube, "{0} cubed", "post", "unary", "cube"),
    Ph(dbl, "{0} doubled", "post", "unary", "dbl"), Ph(tpl, "{0} tripled", "post", "unary", "tpl"),
    Ph(half, "{0} halved", "post", "unary", "half"),
    Ph(dbl, "twice {0}", "pre", "unary", "dbl"), Ph(dbl, "double {0}", "pre", "unary", "dbl"),
    Ph(tpl, "triple {0}", "pre", "unary", "tpl"), Ph(tpl, "thrice {0}", "pre", "unary", "tpl"),
    Ph(half, "half !of {0}", "pre", "unary", "half"),
    Ph(sq, "the square !of {0}", "pre", "unary", "sq"), Ph(cube, "the cube !of {0}", "pre", "unary", "cube"),
    Ph(sqrt, "the square root !of {0}", "pre", "unary", "sqrt"),
    Ph(cbrt, "the cube root !of {0}", "pre", "unary", "cbrt"),
    Ph(neg, "the negative !of {0}", "pre", "unary", "neg"), Ph(neg, "the opposite !of {0}", "pre", "unary", "neg"),
    Ph(recip, "the reciprocal !of {0}", "pre", "unary", "recip"),
    Ph(absv, "the absolute value !of {0}", "pre", "unary", "abs"),
    Ph(sqrt, "sqrt( ~{0} ~)", "braced", "unary", "sqrt"), Ph(sqrt, "√( ~{0} ~)", "braced", "unary", "sqrt"),
    Ph(sqrt, "\\sqrt{ ~{0} ~}", "braced", "unary", "sqrt"), Ph(cbrt, "\\sqrt[3]{ ~{0} ~}", "braced", "unary", "cbrt"),
    Ph(neg, "-( ~{0} ~)", "braced", "unary", "neg"),
]}
NEGATIONS = ("the negative !of {0}", "the opposite !of {0}", "-( ~{0} ~)")
POWERS = frozenset({"sq", "cube"})
ORD_SUFFIX = {2: "nd", 3: "rd"}

NOMINAL_FRAMES = ("What is {0} ~?", "What's {0} ~?", "what is {0}", "Compute {0} ~.", "Calculate {0} ~.",
                  "Evaluate {0} ~.", "How much is {0} ~?", "{0}", "{0} = ?", "{0} =", "Please compute {0} ~.",
                  "What is {0} ~, please ~?", "Can you tell me what {0} is ~?", "Find {0} ~.", "Work out {0} ~.",
                  "What is the value !of {0} ~?", "Find the value !of {0} ~.", "What does {0} equal ~?")
IMP_FRAMES = ("{0} ~.", "Please {0} ~.", "{0}", "What do you get if you {0} ~?", "If you {0} ~, what do you get ~?",
              "What is the result if you {0} ~?")
CONV_FRAMES = ("How many {U} are !in {Q} ~?", "How many {U} are there in {Q} ~?", "How many {U} is {Q} ~?",
               "How many {U} in {Q} ~?", "Convert {Q} !to {U} ~.", "Convert {Q} !into {U} ~.",
               "What is {Q} !in {U} ~?", "{Q} is how many {U} ~?", "Express {Q} !in {U} ~.")
CONV2_FRAMES = ("What is {Q} plus {R} !in {U} ~?", "How many {U} are !in {Q} !and {R} ~?",
                "Convert {Q} !and {R} !to {U} ~.")
PINV_FRAMES = ("What percent of {1} is {0} ~?", "{0} is what percent of {1} ~?",
               "What percentage of {1} is {0} ~?")
GOES_FRAMES = ("How many !times does {1} go into {0} ~?", "How many !times will {1} go into {0} ~?")
