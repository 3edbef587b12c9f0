"""What the reader's phrases mean (reader_meaning.py's table): comparisons (difference, distance, the larger of,
how much more, how many times), money (change), ratios, time elapsed, unit conversions, rounding and percent
changes, on readings as reader_ops.py defines them."""

from __future__ import annotations

from fractions import Fraction

from lark import Token

from galahad.flywheel.problems import reader_tree as rt
from galahad.flywheel.problems.reader_lexer import Refuse
from galahad.flywheel.problems.reader_ops import (
    MONEY,
    PLAIN,
    _add,
    _amount,
    _div,
    _dollars_and_cents,
    _money,
    _mul,
    _part,
    _plain,
    _sub,
)


def _difference(a, b):
    va, vb = rt.value(a[0]), rt.value(b[0])
    if va is None or vb is None:
        return None
    if va < vb:
        raise Refuse("a - b or |a - b|: writers disagree when a < b")
    return _sub(a, b)


def _distance(a, b):
    """The distance between a and b, how far apart they are: |a - b|, read as the larger less the smaller."""
    va, vb = rt.value(a[0]), rt.value(b[0])
    if va is None or vb is None:
        return None
    return _sub(a, b) if va >= vb else _sub(b, a)


def _extreme(kind: str):
    """The larger (smaller) of a and b, or of a list ("the largest of 3, 9 and 4"): plain numbers only; a tie
    for it gets no key (either, or "they are equal")."""
    def read(*rs):
        trees = rs[0][0] if len(rs) == 1 and rs[0][1] == "items" else tuple(r[0] for r in rs)
        if len(rs) != 1 and not _plain(*rs):
            return None
        vals = [rt.value(t) for t in trees]
        if None in vals or len(vals) < 2:
            return None
        if vals.count(max(vals) if kind == ">" else min(vals)) > 1:
            raise Refuse("the larger of two equal numbers: either, or 'they are equal'")
        return rt.extreme(kind, trees), None
    return read


def _amount_more(q, n, u):
    """"3 ft 8 in", "18 dollars and 40 cents": each unit smaller than the last."""
    b = _amount(n, u)
    if q[1] in PLAIN + ("%",) or b[1][0] != q[1][0] or b[1][1] >= q[1][1]:
        return None
    return _dollars_and_cents(q, b) or _add(q, b)


def _change(paid, price):
    """The change from paying `paid` for `price`: both money, paid >= price."""
    if not (_money(paid) and _money(price)):
        return None
    vp, vq = rt.value(paid[0]) * paid[1][1], rt.value(price[0]) * price[1][1]
    if vp < vq:
        raise Refuse("paid less than the price: no change")
    return _sub(paid, price)


def _ratio(a, b):
    """The ratio of a to b as a number: a / b (b not zero)."""
    vb = rt.value(b[0])
    return _div(a, b) if _plain(a, b) and vb else None


def _elapsed(unit: Token, t1: Fraction, t2: Fraction, wrap: bool = True):
    """The time from clock time t1 to t2 (minutes after midnight) in a unit of time: past midnight when t2 is
    not after t1 (with am/pm), refused when they are equal (no time or a whole day) or not wrapping."""
    dim, f = unit.value.split(":")
    if dim != "time" or t1 == t2 or (t2 < t1 and not wrap):
        return None
    if t2 < t1:
        t2 += 24 * 60
    d = rt.sub(rt.num(t2), rt.num(t1))
    ratio = Fraction(60) / Fraction(f)
    return (d if ratio == 1 else rt.mul(d, rt.num(ratio))), None


def _elapsed_24(unit: Token, a: Token, b: Token):
    h1, h2 = Fraction(a.value), Fraction(b.value)
    if not (h1.denominator == h2.denominator == 1 and 0 <= h1 < h2 <= 24):
        return None
    return _elapsed(unit, h1 * 60, h2 * 60, wrap=False)


def _quotient(a, b):
    va, vb = rt.value(a[0]), rt.value(b[0])
    if not _plain(a, b) or not vb:
        return None
    if va.denominator == vb.denominator == 1 and (va / vb).denominator != 1:
        raise Refuse("15 or 15.5: two whole numbers are read only where the quotient is whole")
    return _div(a, b)


def _cmp(a, b):
    """How much more is a than b: a - b where a >= b."""
    return _difference(a, b)


def _convert(q, unit: Token):
    if q[1] in PLAIN or q[1] == "%":
        return None
    dim, f = unit.value.split(":")
    if {dim, q[1][0]} == {"degf", "degc"}:  # a temperature written, not a difference of two ("68°F - 10°F")
        return _temperature(q[0], dim) if q[0][0] == "n" else None
    if dim != q[1][0]:
        return None
    ratio = q[1][1] / Fraction(f)
    if not (_decimal(ratio, 4) or ratio.numerator == 1):
        raise Refuse("km to miles: an exact value nobody writes (3.1068...); a gold 3.11 would be refused")
    got = q[0] if ratio == 1 else rt.mul(q[0], rt.num(ratio))
    if dim in MONEY and Fraction(f) not in (1, Fraction(1, 100)):
        v = rt.value(got)
        if v is None or v.denominator != 1:
            raise Refuse("how many quarters in $5.10: 20, or 20.4?")
    return got, None


def _temperature(t, to: str):
    """Fahrenheit to Celsius, (F - 32) * 5/9, or back, F = C * 9/5 + 32; a value past 4 decimal places (100 F is
    37.777... C) gets no key: writers round it."""
    got = (rt.mul(rt.sub(t, rt.num(32)), rt.num(Fraction(5, 9))) if to == "degc"
           else rt.add(rt.mul(t, rt.num(Fraction(9, 5))), rt.num(32)))
    v = rt.value(got)
    if v is None or not _decimal(v, 4):
        raise Refuse("a temperature with no short decimal: writers round it")
    return got, None


def _decimal(q: Fraction, places: int) -> bool:
    return (q * 10**places).denominator == 1


def _round(x, unit):
    v = rt.value(x[0])
    if not _plain(x) or v is None or unit is None:
        return None
    q = v / unit
    if q - (q.numerator // q.denominator) == Fraction(1, 2):
        raise Refuse("a tie: half up and half even disagree")
    return rt.round_to(x[0], unit), None


def _sig_unit(x: tuple, n: int) -> Fraction | None:
    v = rt.value(x)
    if v is None or v == 0 or not 1 <= n <= 20:
        return None
    v, e = abs(v), 0
    while Fraction(10) ** (e + 1) <= v:
        e += 1
    while Fraction(10) ** e > v:
        e -= 1
    return Fraction(10) ** (e - n + 1)


def _pct_change(a, b, direction):
    """Percent change from a to b: (b - a) / a * 100; an increase needs b >= a, a decrease a >= b (then
    (a - b) / a * 100)."""
    va, vb = rt.value(a[0]), rt.value(b[0])
    if not _plain(a, b) or va is None or vb is None:
        return None
    if va <= 0 or direction * (vb - va) < 0:
        raise Refuse("a percent change against its direction, or from zero or below")
    d = rt.sub(a[0], b[0]) if direction < 0 else rt.sub(b[0], a[0])
    return rt.mul(d, rt.inv(a[0]), rt.num(100)), None


def _pct_of(a, b):
    """a is what percent of b: a / b * 100."""
    return (rt.mul(a[0], rt.inv(b[0]), rt.num(100)), None) if _plain(a, b) else None


def _in_unit(q, unit: str, short: bool = True) -> tuple | None:
    """An amount's number in another unit of its dimension ("8 hours" in hours, "6 months" in years), where the
    factor is a short decimal; None otherwise."""
    dim, f = unit.split(":")
    if q[1] in PLAIN or q[1] == "%" or q[1][0] != dim:
        return None
    ratio = q[1][1] / Fraction(f)
    if short and not _decimal(ratio, 4):
        raise Refuse("an amount in a unit with no short factor")
    return q[0] if ratio == 1 else rt.mul(q[0], rt.num(ratio))


def _rate(price, unit: Token, q):
    """A price per unit times an amount in that unit: "3 pounds at $2.40 per pound" (money per a unit of
    another dimension)."""
    if not _money(price) or unit.value.split(":")[0] in MONEY:
        return None
    n = _in_unit(q, unit.value)
    return None if n is None else _mul(price, (n, None))


def _interest(p, r, t):
    """Simple interest on a principal p at a yearly rate r (a percent) for a time t in years or months:
    p * r * t."""
    if not _money(p) or r[1] != "%":
        return None
    years = _in_unit(t, "calendar:12", short=False)
    part = None if years is None else _part(r, p)
    got = None if part is None else _mul(part, (years, None))
    v = None if got is None else rt.value(got[0])
    if v is not None and (v * 100 * got[1][1]).denominator != 1:
        raise Refuse("interest in fractions of a cent: writers round it")
    return got


def _total_list(q):
    """The total of a list of amounts ("add $3.49, $2.99 and $1.25"): a sum, not one amount."""
    return q if _money(q) and q[0][0] == "+" else None


def _as_much(f, x):
    """"twice as much as 37", "3 times as many as 12", "half as big as 58": the factor times x."""
    if isinstance(f, Token):
        f = (rt.num(2 if f.type == "TWICE" else Fraction(f.value)), None)
    if f[1] == "w":
        return _part(f, x)
    return _mul(f, x) if f[1] is None else None


def _round_unit(x, unit: Token):
    """Rounding to the nearest cent or dollar: an amount in dollars (pounds, euros) or a number, as
    (x, unit) for _round; None for any other unit."""
    dim, f = unit.value.split(":")
    f = Fraction(f)
    if dim not in MONEY or f not in (1, Fraction(1, 100)):
        return None
    if x[1] in PLAIN or x[1] == (dim, 1):
        return (x[0], None), f
    return None


def _per_unit(price, q, unit: Token):
    """The price of one unit: "$4.80 for 16 ounces, what is the price per ounce?" (price / the amount in that
    unit)."""
    if not _money(price) or unit.value.split(":")[0] in MONEY:
        return None
    n = _in_unit(q, unit.value)
    return None if n is None or not rt.value(n) else _div(price, (n, None))


def _scaled(given, ask):
    """The price of m things when n cost q: q / n * m ("3 for $4.50, how much for 7?"); q / n for one."""
    (n, q), m = given[0], ask[0]
    if not _money(q) or n <= 0 or n.denominator != 1 or m <= 0:
        return None
    one = _div(q, (rt.num(n), None))
    return one if m == 1 else _mul(one, (rt.num(m), None))
