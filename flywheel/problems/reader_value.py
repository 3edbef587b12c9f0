"""Exact bounded values of the reader's trees (reader_tree.py builds them), the linear form of a tree in the
unknown and the normal form of a one-unknown linear equation.

`value(tree)` is exact (`Fraction`) under explicit bounds: an intermediate numerator or denominator over
`MAX_BITS` bits (about 1000 digits), an exponent that is not an integer of at most `MAX_EXPONENT`, a power
whose result would exceed the bit bound, or a division by zero give None. It never builds a big number
first and checks afterwards. `linear(tree)` is (a, b) with tree = a*x + b, or None when it is not linear.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from math import gcd

MAX_BITS = 3400  # ~1000 decimal digits for any numerator or denominator
MAX_EXPONENT = 10_000


def args(t: tuple) -> tuple:
    return () if t[0] in ("n", "v") else t[2:]


def has_var(t: tuple) -> bool:
    return t[0] == "v" or any(has_var(a) for a in args(t))


def _small(q: Fraction) -> Fraction | None:
    return q if q.numerator.bit_length() <= MAX_BITS and q.denominator.bit_length() <= MAX_BITS else None


def _root(q: int, k: int) -> int | None:
    """The whole k-th root of q >= 0, or None when q is no k-th power."""
    r = round(q ** (1 / k)) if q.bit_length() < 1000 else None
    if r is None:
        lo, hi = 0, 1 << (q.bit_length() // k + 1)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if mid ** k < q else (lo, mid)
        r = lo
    for c in (r - 1, r, r + 1):
        if c >= 0 and c ** k == q:
            return c
    return None


def _pow(b: Fraction, e: Fraction) -> Fraction | None:
    if e.denominator != 1:  # a root: exact only for a k-th power of a non-negative base (49^(1/2) = 7)
        k = e.denominator
        if b < 0 or k > 64 or abs(e) > MAX_EXPONENT:
            return None  # (-8)^(1/3): -2 in school, no real principal value elsewhere
        num_r, den_r = _root(b.numerator, k), _root(b.denominator, k)
        if num_r is None or den_r is None:
            return None  # irrational
        return _pow(Fraction(num_r, den_r), Fraction(e.numerator))
    if abs(e) > MAX_EXPONENT:
        return None  # towers are refused
    k = int(e)
    if b == 0:
        return None if k <= 0 else Fraction(0)  # 0^0 and 0 to a negative power are undefined
    if b in (1, -1):
        return b ** k
    size = max(b.numerator.bit_length(), b.denominator.bit_length())
    if (size - 1) * abs(k) > MAX_BITS:  # |b| >= 2^(size-1): the result is at least that big
        return None
    return _small(b ** k)


def value(t: tuple, x: Fraction | None = None, memo: dict | None = None) -> Fraction | None:
    """The exact value of a tree (the unknown standing for `x`), or None when undefined or out of bounds.
    `memo` (key string -> value, for one `x`) keeps the values of subtrees already computed."""
    kind = t[0]
    if kind == "n":
        return t[2]
    if kind == "v":
        return x
    if memo is not None:
        if t[1] in memo:
            return memo[t[1]]
        memo[t[1]] = got = _value(t, x, memo)
        return got
    return _value(t, x, None)


def _value(t: tuple, x: Fraction | None, memo: dict | None) -> Fraction | None:
    kind = t[0]
    vals = []
    for a in args(t):
        v = value(a, x, memo)
        if v is None:
            return None
        vals.append(v)
    if kind == "+":
        out = Fraction(0)
        for v in vals:
            out = _small(out + v)
            if out is None:
                return None
        return out
    if kind == "*":
        out = Fraction(1)
        for v in vals:
            out = _small(out * v)
            if out is None:
                return None
        return out
    if kind == "-":
        return -vals[0]
    if kind == "/":
        return None if vals[0] == 0 else 1 / vals[0]
    if kind == "|":
        return abs(vals[0])
    if kind == "^":
        return _pow(vals[0], vals[1])
    if kind == "%":
        a, b = vals
        ok = a.denominator == 1 and b.denominator == 1 and a >= 0 and b > 0
        return Fraction(a.numerator % b.numerator) if ok else None
    if kind == "_":
        return Fraction(vals[0].numerator // vals[0].denominator)
    if kind == "m":
        vals.sort()
        n = len(vals)
        return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
    if kind == "o":  # the mode: the one most frequent value (a tie: none)
        top = Counter(vals).most_common(2)
        return top[0][0] if len(top) == 1 or top[0][1] > top[1][1] else None
    if kind == ">":
        return max(vals)
    if kind == "<":
        return min(vals)
    if kind == "~":
        x, unit = vals
        if unit <= 0:
            return None
        q = x / unit
        lo = q.numerator // q.denominator
        if q - lo == Fraction(1, 2):
            return None  # a tie: half up or half to even
        return _small((lo + (1 if q - lo > Fraction(1, 2) else 0)) * unit)
    return None


def linear(t: tuple) -> tuple[Fraction, Fraction] | None:
    """(a, b) with t = a*x + b exactly, or None (not linear in x, undefined, or out of bounds)."""
    kind = t[0]
    if kind == "n":
        return Fraction(0), t[2]
    if kind == "v":
        return Fraction(1), Fraction(0)
    if not has_var(t):
        v = value(t)
        return None if v is None else (Fraction(0), v)
    if kind == "+":
        a, b = Fraction(0), Fraction(0)
        for arg in args(t):
            r = linear(arg)
            if r is None:
                return None
            a, b = _small(a + r[0]), _small(b + r[1])
            if a is None or b is None:
                return None
        return a, b
    if kind == "*":
        a, b = Fraction(0), Fraction(1)  # running product: a*x + b, at most one factor with x
        for arg in args(t):
            r = linear(arg)
            if r is None or (a != 0 and r[0] != 0):
                return None  # x * x is not linear
            a, b = _small(a * r[1] + b * r[0]), _small(b * r[1])
            if a is None or b is None:
                return None
        return a, b
    if kind == "-":
        r = linear(t[2])
        return None if r is None else (-r[0], -r[1])
    if kind == "^":  # a base with x only to the literal power 1
        return linear(t[2]) if t[3][1] == "1" else None
    return None  # 1 / (expression in x)


def equation_form(lhs: tuple, rhs: tuple) -> tuple[int, int] | None:
    """lhs = rhs as the primitive integer equation A*x + B = 0 (A > 0, gcd 1): the same solution set
    gives the same form. None when not linear or when there is no unique solution."""
    lin_l, lin_r = linear(lhs), linear(rhs)
    if lin_l is None or lin_r is None:
        return None
    a, b = lin_l[0] - lin_r[0], lin_l[1] - lin_r[1]
    if a == 0:
        return None  # no solution, or every x
    d = a.denominator * b.denominator // gcd(a.denominator, b.denominator)
    big_a, big_b = int(a * d), int(b * d)
    g = gcd(big_a, big_b)
    big_a, big_b = big_a // g, big_b // g
    if big_a < 0:
        big_a, big_b = -big_a, -big_b
    return big_a, big_b
