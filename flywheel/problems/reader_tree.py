"""The reader's trees (reader_grammar builds them): canonical construction, the key string, exact bounded values, the linear normal
form of a one-unknown equation (key strings are read back by reader_keys.py).

A tree is a nested tuple, built only through the constructors here, which canonicalize structurally and
soundly (never by evaluating): `+` and `*` are flattened and their arguments sorted (exact rational
arithmetic is associative and commutative), `a - b` is `a + (-b)`, `a / b` is `a * (/b)`, `neg` of a
literal is the negative literal (unary minus only: subtraction keeps `("-", b)` even for a literal, so
`5 - 3` and `5 + -3` stay apart), `neg(neg(t))` is `t`; `inv` is never folded (`inv(inv(t))` would be
wrong at t = 0, and `6 / 2` stays apart from `6 * 0.5`).

  ("n", k, Fraction)   a number        ("v", "x")          the unknown (always printed `x`)
  ("+", k, t, ...)     sum             ("*", k, t, ...)    product
  ("-", k, t)          negation        ("/", k, t)         reciprocal
  ("^", k, base, exp)  power

where k is the node's canonical key string, built once with the node (so comparing and hashing readings
never walks a tree).

Values, the linear form and equations: reader_value.py (re-exported here: `value`, `linear`, `equation_form`).
"""

from __future__ import annotations

from fractions import Fraction

from galahad.flywheel.problems.reader_value import (  # noqa: F401 (the tree API in one place)
    MAX_BITS,
    MAX_EXPONENT,
    args,
    equation_form,
    has_var,
    linear,
    value,
)

MAX_KEY_CHARS = 480  # the catalog column holds 500


def num(q) -> tuple:
    q = Fraction(q)
    return ("n", str(q), q)


VAR = ("v", "x")


def key(t: tuple) -> str:
    """The canonical string of a tree (stored in the node when it is built: hashing never recurses)."""
    return t[1]


def _node(kind: str, children) -> tuple:
    return (kind, f"{kind}({','.join(c[1] for c in children)})", *children)


def _assoc(kind: str, items) -> tuple:
    flat = []
    for a in items:
        flat.extend(a[2:] if a[0] == kind else (a,))
    return _node(kind, sorted(flat, key=key))


def add(*items) -> tuple:
    return _assoc("+", items)


def _pos_int_exp(t: tuple) -> int | None:
    """The exponent of a power with a positive whole literal exponent (`^(5,2)`: 2), else None."""
    if t[0] == "^" and t[3][0] == "n" and t[3][2].denominator == 1 and t[3][2] > 0:
        return int(t[3][2])
    return None


def mul(*items) -> tuple:
    """A flattened, sorted product; equal factors are one power (`5 * 5 * 5` is `5^3`, `5^2 * 5` too): exact
    for positive whole exponents (x^m * x^n = x^(m+n) for every x, 0 included). Summed exponents stay
    within MAX_EXPONENT, so the merged power has the value the factors have."""
    flat = []
    for a in items:
        if a[0] == "n" and len(a) > 3:
            a = a[3]  # a folded numeral as a factor is its written division: 0 * (1/2) is 0 * 1 / 2
        flat.extend(a[2:] if a[0] == "*" else (a,))
    groups: dict[str, list] = {}  # base key -> [base, total exponent, how many factors]
    for a in flat:
        k = _pos_int_exp(a)
        base, e = (a[2], k) if k is not None else (a, 1)
        g = groups.setdefault(base[1], [base, 0, 0])
        g[1] += e
        g[2] += 1
    if all(g[2] == 1 for g in groups.values()):
        return _node("*", sorted(flat, key=key)) if len(flat) > 1 else flat[0]
    out = []
    for a in flat:
        k = _pos_int_exp(a)
        base = a[2] if k is not None else a
        g = groups[base[1]]
        if g[2] == 1 or g[1] > MAX_EXPONENT:
            out.append(a)
        elif g[2] > 0:  # the first factor of a group stands for the whole group
            out.append(power(base, num(g[1])))
            g[2] = 0
    return out[0] if len(out) == 1 else _node("*", sorted(out, key=key))


def ratio(a: Fraction, b: Fraction) -> tuple:
    """A fraction written with two literals ("two thirds", `2/3`): `div` of the two numbers."""
    return div(num(a), num(b))


def unfold(t: tuple) -> tuple:
    """The tree with every folded numeral written out again as its division (`1/3` -> `*(1,/(3))`), rebuilt
    through the constructors: two readings of one text that differ only in how a fraction's literals
    group ("3/4 of 1/2": (3/4)*(1/2) or (3/4 of 1)/2) unfold to one tree."""
    kind = t[0]
    if kind == "n":
        return unfold(t[3]) if len(t) > 3 else t
    if kind == "v":
        return t
    kids = [unfold(a) for a in args(t)]
    if kind == "+":
        return add(*kids)
    if kind == "*":
        return mul(*kids)
    return _node(kind, kids)


def part_of(f: Fraction, x: tuple) -> tuple:
    """"f of x" for a literal fraction f (in lowest terms): a unit fraction is a division ("a third of 27" is
    27 / 3, as "1/3 of 27" and "27 divided by 3"), any other the product p * x / q ("two thirds of 9",
    "4/6 of 9" and "2/3 * 9" are 2 * 9 / 3)."""
    if f.numerator == 1 and f.denominator > 1:
        return div(x, num(f.denominator))
    return mul(num(f.numerator), x) if f.denominator == 1 else mul(num(f.numerator), inv(num(f.denominator)), x)


def neg(t: tuple) -> tuple:
    if t[0] == "n":
        # a folded numeral's written form is negated by the same rule (the sign onto its first plain literal):
        # -(1/2) written `-1/2` and (-1)/2 unfold to one product, `*(-1,/(2))`
        return num(-t[2]) if len(t) == 3 else (*num(-t[2]), neg(t[3]))
    if t[0] == "-":
        return t[2]
    if t[0] == "*":  # -(a * b) = (-a) * b: the sign goes onto the product's first plain literal
        for i, a in enumerate(t[2:]):
            if a[0] == "n" and len(a) == 3:
                return mul(*t[2:2 + i], num(-a[2]), *t[3 + i:])
    return _node("-", (t,))


def opposite(t: tuple) -> tuple:
    """"The negative/opposite of t", "negate t": a negation kept as a node even for a literal (the opposite
    of -6 is a question, `-(-6)`, not the bare number 6)."""
    return _node("-", (t,))


def absolute(t: tuple) -> tuple:
    """|t|, abs(t)."""
    return _node("|", (t,))


def inv(t: tuple) -> tuple:
    return _node("/", (t,))  # never folded, not even for literals: 6 / 2 stays apart from 6 * 0.5


def sub(a: tuple, b: tuple) -> tuple:
    return add(a, _node("-", (b,)))


def div(a: tuple, b: tuple) -> tuple:
    """a / b. A division of two literals is the numeral it names when that is no whole number (`2/6`, "two
    sixths", `2 / 6`, "2 divided by 6" are all `1/3`, as 0.333... is not but 0.75 is `3/4`): every
    numeral of one rational has one key. The numeral remembers how it was written (see `unfold`). A
    whole quotient (`6 / 2`) and a zero divisor stay a division: "What is 6/2?" is a question."""
    if a[0] == "n" and b[0] == "n" and b[2] != 0 and (a[2] / b[2]).denominator != 1:
        return (*num(a[2] / b[2]), mul(a, inv(b)))
    return mul(a, inv(b))


def power(base: tuple, exp: tuple) -> tuple:
    return _node("^", (base, exp))


def mod(a: tuple, b: tuple) -> tuple:
    """a mod b, the remainder of whole a >= 0 divided by whole b > 0 (`%(17,5)`; the caller checks the
    operands are such literals: for negatives writers' conventions differ)."""
    return _node("%", (a, b))


def floor_div(a: tuple) -> tuple:
    """floor(a) (`_(..)`): "17 // 5" is floor(17/5), as "floor(17/5)"."""
    return _node("_", (a,))


def round_to(x: tuple, unit: Fraction) -> tuple:
    """x rounded to the nearest multiple of `unit` (a power of ten: 1/100 for two decimal places, 10 for the
    nearest ten) (`~(x,unit)`); the caller refuses exact ties (conventions differ: half up, half even)."""
    return _node("~", (x, num(unit)))


def substitute(t: tuple, by: tuple) -> tuple:
    """t with the unknown replaced by the tree `by`, rebuilt through the constructors (f(x) = 2x + 3 at 4)."""
    kind = t[0]
    if kind == "v":
        return by
    if kind == "n":
        return t
    kids = [substitute(a, by) for a in args(t)]
    if kind == "+":
        return add(*kids)
    if kind == "*":
        return mul(*kids)
    if kind == "-":
        return neg(kids[0]) if kids[0][0] != "n" else _node("-", kids)
    return _node(kind, kids)


def median(items) -> tuple:
    """The median of a list (`m(...)`, its items sorted by key: the order they were written in is no matter)."""
    return _node("m", sorted(items, key=key))


def extreme(kind: str, items) -> tuple:
    """The larger (`>(...)`), smaller (`<(...)`) or most frequent (`o(...)`) of a list, its items sorted by key
    like the median's."""
    return _node(kind, sorted(items, key=key))


def rebuild(kind: str, children: list) -> tuple:
    """A parsed key's node, through the constructors (a canonical key rebuilds to itself)."""
    if kind in "+*":
        return (add if kind == "+" else mul)(*children) if len(children) >= 2 else ("bad", "")
    if kind == "m":
        return median(children) if len(children) >= 2 else ("bad", "")
    if kind in "<>o":
        return extreme(kind, children) if len(children) >= 2 else ("bad", "")
    if kind in "-/|_":
        return _node(kind, children) if len(children) == 1 else ("bad", "")
    return _node(kind, children) if len(children) == 2 else ("bad", "")
