"""What an operation means on the reader's readings (reader_meaning.py): a reading is (tree, kind), tree from
reader_tree's constructors, kind None (a number), "%" (a percent), "w" (a fraction in words), "d" (a fraction
in digits) or a unit ("dim", factor) for an amount. An operation on operands it does not fit (a percent added
to a number, metres plus grams) gives None (no reading); one writers read two ways raises Refuse (no key)."""

from __future__ import annotations

from fractions import Fraction

from lark import Token, Tree

from galahad.flywheel.problems import reader_lexicon as lx
from galahad.flywheel.problems import reader_tree as rt
from galahad.flywheel.problems.reader_lexer import Refuse

PLAIN = (None, "w", "d")


ONE = rt.num(1)


def _n(t: tuple) -> Fraction | None:
    return t[2] if t[0] == "n" else None


def _plain(*rs) -> bool:
    return all(r[1] in PLAIN for r in rs)


def _amount_op(a, b, plain_op, same_op) -> tuple | None:
    """+/- of two readings: numbers, or amounts of one dimension (converted to the smaller unit)."""
    if _plain(a, b):
        return plain_op(a[0], b[0]), None
    if a[1] in PLAIN or b[1] in PLAIN or "%" in (a[1], b[1]) or a[1][0] != b[1][0]:
        return None
    fa, fb = a[1][1], b[1][1]
    f = min(fa, fb)
    ta = a[0] if fa == f else rt.mul(a[0], rt.num(fa / f))
    tb = b[0] if fb == f else rt.mul(b[0], rt.num(fb / f))
    return same_op(ta, tb), (a[1][0], f)


def _add(a, b):
    return _amount_op(a, b, rt.add, rt.add)


def _sub(a, b):
    return _amount_op(a, b, rt.sub, rt.sub)


def _mul(a, b):
    if _plain(a, b):
        return rt.mul(a[0], b[0]), None
    if _plain(a) and b[1] != "%":
        return rt.mul(a[0], b[0]), b[1]
    if _plain(b) and a[1] != "%":
        return rt.mul(a[0], b[0]), a[1]
    return None


def _div(a, b):
    if _plain(a, b):
        return rt.div(a[0], b[0]), None
    if _plain(b) and a[1] != "%":
        return rt.div(a[0], b[0]), a[1]
    return None


def _part(f, x):
    """"f of x": a percent, a fraction in words or digits, of a number or an amount."""
    if x[1] == "%" or f[1] not in ("%", "w", "d"):
        return None
    q = rt.value(f[0])
    if q is None:
        return None
    return rt.part_of(q, x[0]), x[1]


def _relative(a, b, sign):
    """Increase/decrease a by b: a percent is a part of a; a number is added; a fraction (in words or
    digits) is read both ways by writers ("reduce 1/2 by a half": 1/4 or 0): no key."""
    if b[1] in ("w", "d"):
        raise Refuse("a fraction as a part or an amount")
    if b[1] == "%":
        p = _part(b, a)
        return None if p is None else ((rt.add if sign > 0 else rt.sub)(a[0], p[0]), a[1])
    return (_add if sign > 0 else _sub)(a, b)


def _unary(f):
    def apply(a):
        if a[1] == "%":
            raise Refuse("the negative of a percent: whose scope?")
        return (f(a[0]), None) if _plain(a) else None
    return apply


def _whole(t) -> int | None:
    v = rt.value(t)
    return int(v) if v is not None and v.denominator == 1 else None


def _subst(e, x):
    if not _plain(e, x) or rt.has_var(x[0]) or not rt.has_var(e[0]):
        return None
    if e[0] == rt.VAR:
        return _solved(x[0])  # "If x = 7 - 3, what is x?": the equation x = 7 - 3
    return rt.substitute(e[0], x[0]), None


def _solved(t) -> tuple:
    """The reading of an equation solved for its unknown, `x = t` with no unknown in t ("Solve for x:
    x = 7 - 3", "If x = 7 - 3, what is x?", "What number is 7 - 3?"): reader.py keys it as the equation
    when the unknown is a letter (as "x + 3 = 7" is keyed), and as the question t when it is in words."""
    return (rt.VAR, t), "solved"


def _nonneg(t) -> bool:
    v = rt.value(t)
    if v is None or v < 0:
        raise Refuse("floor of a negative or undefined value")
    return True


def _floor(t):
    return rt.floor_div(t), None


def _remainder(a, b, *_):
    if not _plain(a, b):
        return None
    x, y = _whole(a[0]), _whole(b[0])
    if x is None or y is None or x < 0 or y <= 0:
        raise Refuse("a remainder of a negative or a fraction: conventions differ")
    return rt.mod(a[0], b[0]), None


def _items(*parts):
    out = [p for p in parts if isinstance(p, tuple)]
    return None if not _plain(*out) else (tuple(r[0] for r in out), "items")


def _sum_items(items):
    return rt.add(*items[0]), None


def _mean(items):
    return rt.mul(rt.add(*items[0]), rt.inv(rt.num(len(items[0])))), None


def _pow(a, b):
    return (rt.power(a[0], b[0]), None) if _plain(a, b) else None


def _postfix(a, p: Tree):
    w = p.children[0].type
    op = {"SQUARED": lambda t: rt.power(t, rt.num(2)), "CUBED": lambda t: rt.power(t, rt.num(3)),
          "DOUBLED": lambda t: rt.mul(rt.num(2), t), "TRIPLED": lambda t: rt.mul(rt.num(3), t),
          "HALVED": lambda t: rt.div(t, rt.num(2))}[w]
    if w in ("DOUBLED", "TRIPLED", "HALVED"):
        return (op(a[0]), a[1]) if a[1] != "%" else None
    return (op(a[0]), None) if _plain(a) else None


def _wbin(a, op: Tree, b):
    kind = op.children[0].type
    f = {"PLUS": _add, "MINUS": _sub, "LESS": _sub, "TAKE": _sub, "TIMES": _mul, "DIVBY": _div, "OVER": _div}[kind]
    return f(a, b)


def _fw(n, d):
    num_ = Fraction(n.value) if isinstance(n, Token) and n.type == "NUM" else Fraction(1)
    if num_.denominator != 1 or (d.type == "FRACN") != (num_ != 1):
        raise Refuse("'one thirds', 'two third': the number of the fraction word disagrees")
    return rt.ratio(num_, Fraction(d.value)), "w"


def _frac(a: Token, b: Token):
    if Fraction(b.value) == 0:
        raise Refuse("a zero denominator")
    return rt.ratio(Fraction(a.value), Fraction(b.value)), "d"


def _idiom(*ch):
    count = [c for c in ch if isinstance(c, tuple)]
    idiom = next(c for c in ch if isinstance(c, Token) and c.type == "IDIOM")
    size = rt.num(Fraction(idiom.value))
    return (rt.mul(count[0][0], size) if count and count[0][0] != ONE else size), None


def _count(t: Token):
    return (rt.num(Fraction(t.value)) if t.type == "NUM" else ONE), None


def _amount(n: Token, u: Token):
    dim, f = u.value.split(":")
    return rt.num(Fraction(n.value) if n.type == "NUM" else 1), (dim, Fraction(f))


def _percent(p):
    p = p if isinstance(p, tuple) else (rt.num(Fraction(p.value)), None)
    v = rt.value(p[0])
    return (rt.num(v / 100), "%") if v is not None else None


ONE_T = Token("NUM", "1")


MONEY = lx.MONEY


def _money(r) -> bool:
    return isinstance(r[1], tuple) and r[1][0] in MONEY


def _dollars_and_cents(q, b):
    """Whole dollars (pounds, euros) then whole cents under 100 are one literal in dollars: "18 dollars (and)
    40 cents" is $18.40, the same key as "$18.40"; None for any other pair."""
    if not (_money(q) and b[1] == (q[1][0], Fraction(1, 100)) and q[1][1] == 1 and q[0][0] == "n"
            and len(q[0]) == 3 and b[0][0] == "n" and len(b[0]) == 3):
        return None
    d, c = q[0][2], b[0][2]
    if d.denominator != 1 or c.denominator != 1 or not 0 <= c < 100:
        return None
    return rt.num(d + c / 100), q[1]


def _sum_amounts(qs):
    out = qs[0]
    for q in qs[1:]:
        out = (_dollars_and_cents(out, q) or _add(out, q)) if out is not None else None
    return out if out is not None and out[1] not in PLAIN else None


def _frac_kind(r):
    return None if r is None else (r[0], "d" if r[1] is None else r[1])
