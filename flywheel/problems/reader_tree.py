"""The reader's trees (reader_grammar builds them): canonical construction, the key string, exact bounded values, the linear normal
form of a one-unknown equation, and reading a key string back into a tree.

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

`value(tree)` is exact (`Fraction`) under explicit bounds: an intermediate numerator or denominator over
`MAX_BITS` bits (about 1000 digits), an exponent that is not an integer of at most `MAX_EXPONENT`, a power
whose result would exceed the bit bound, or a division by zero give None. It never builds a big number
first and checks afterwards. `linear(tree)` is (a, b) with tree = a*x + b, or None when it is not linear.
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import gcd

MAX_BITS = 3400  # ~1000 decimal digits for any numerator or denominator
MAX_EXPONENT = 10_000
MAX_KEY_CHARS = 480  # the catalog column holds 500


def num(q) -> tuple:
    q = Fraction(q)
    return ("n", str(q), q)


VAR = ("v", "x")


def key(t: tuple) -> str:
    """The canonical string of a tree (stored in the node when it is built: hashing never recurses)."""
    return t[1]


def args(t: tuple) -> tuple:
    return () if t[0] in ("n", "v") else t[2:]


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
    """The larger (`>(...)`) or smaller (`<(...)`) of a list, its items sorted by key like the median's."""
    return _node(kind, sorted(items, key=key))


def has_var(t: tuple) -> bool:
    return t[0] == "v" or any(has_var(a) for a in args(t))


# -- exact bounded arithmetic ---------------------------------------------------------------------------

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


# -- keys back into trees ---------------------------------------------------------------------------------

_KEY_TOKEN = re.compile(r"-?\d+(?:/\d+)?|x|[+*\-/^|%_~m<>]\(|,|\)")
_EQ_KEY = re.compile(r"q:(\d+)x([+-]\d+)")


def parse_key(k: str) -> tuple | None:
    """The tree of an `e:` key or None; bounded like the reader (a key is at most MAX_KEY_CHARS)."""
    if not k.startswith("e:") or len(k) > MAX_KEY_CHARS:
        return None
    toks = _KEY_TOKEN.findall(k, 2)
    if "".join(toks) != k[2:]:
        return None
    stack: list[list] = [["root"]]
    for tok in toks:
        if tok.endswith("("):
            stack.append([tok[0]])
        elif tok == ")":
            if len(stack) < 2:
                return None
            node = stack.pop()
            stack[-1].append(rebuild(node[0], node[1:]))
        elif tok == ",":
            continue
        elif tok == "x":
            stack[-1].append(VAR)
        else:
            stack[-1].append(num(Fraction(tok)))
    if len(stack) != 1 or len(stack[0]) != 2:
        return None
    tree = stack[0][1]
    return tree if tree[1] == k[2:] else None  # only canonical keys (a malformed one gives None)


def rebuild(kind: str, children: list) -> tuple:
    """A parsed key's node, through the constructors (a canonical key rebuilds to itself)."""
    if kind in "+*":
        return (add if kind == "+" else mul)(*children) if len(children) >= 2 else ("bad", "")
    if kind == "m":
        return median(children) if len(children) >= 2 else ("bad", "")
    if kind in "<>":
        return extreme(kind, children) if len(children) >= 2 else ("bad", "")
    if kind in "-/|_":
        return _node(kind, children) if len(children) == 1 else ("bad", "")
    return _node(kind, children) if len(children) == 2 else ("bad", "")


def key_solution(k: str) -> Fraction | None:
    m = _EQ_KEY.fullmatch(k) if len(k) <= MAX_KEY_CHARS else None
    return None if m is None or int(m.group(1)) == 0 else Fraction(-int(m.group(2)), int(m.group(1)))
