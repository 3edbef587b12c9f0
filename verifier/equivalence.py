"""Symbolic equivalence of two answer strings, for the worker process only (it may be slow or hang).

Two independent judges must both say "equal": math-verify's verdict on the parsed answers, and our own
confirmation, which is exact where math-verify is approximate. The confirmation closes math-verify's
known traps: floats are read as exact decimals and compared without tolerance (so `1/2^99` is not
`1/2^98`), an interval is never a set, an equation is never its right-hand side unless the left-hand
side is a lone variable or a true computation, and symbolic identities are checked at random points
with 60-digit arithmetic. Anything neither judge can settle is "not equal".
"""

from __future__ import annotations

import random
from functools import lru_cache

import mpmath
import sympy
from antlr4.atn.PredictionMode import PredictionMode
from latex2sympy2_extended.latex2sympy2 import ConversionConfig, NormalizationConfig, normalize_latex
from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy as Latex2Sympy
from math_verify import grader as mv_grader
from math_verify.grader import should_treat_as_complex
from math_verify.parser import parse_latex_cached
from sympy import (
    And,
    Basic,
    Eq,
    Expr,
    FiniteSet,
    Float,
    Interval,
    MatrixBase,
    Ne,
    Or,
    Rational,
    Set,
    Symbol,
    Tuple,
    Union,
)
from sympy.core.relational import Relational

from galahad.verifier.normalize import to_latex

# Our pool enforces time limits; math-verify's signal.alarm ones are off, and so is its warning.
mv_grader.TIMEOUT_WARNING_SHOWN = True
NORMALIZE = NormalizationConfig(
    basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="all", equations=False
)
DIGITS = 60
TOLERANCE = mpmath.mpf(10) ** -40
POINTS = 8


class _FastParser(Latex2Sympy):
    """ANTLR's SLL prediction: about seven times faster than the default LL on our answers. ANTLR
    guarantees that an SLL parse, when it succeeds, is the tree LL would build; when it fails (a
    syntax error, real or only SLL's), we parse again exactly as math-verify does."""

    def create_parser(self, latex_str: str):
        parser = super().create_parser(latex_str)
        parser._interp.predictionMode = PredictionMode.SLL
        return parser


@lru_cache(maxsize=2048)
def parse_math(answer: str) -> Basic | MatrixBase | None:
    """The sympy object for a whole answer string, or None when it does not parse as one."""
    latex = normalize_latex(to_latex(answer), NORMALIZE)
    try:
        expr = _FastParser(None, not should_treat_as_complex(latex), False, config=ConversionConfig()).parse(latex)
    except Exception:
        try:
            expr = parse_latex_cached(latex)
        except Exception:
            return None
    return expr if isinstance(expr, (Basic, MatrixBase)) else None


def _exact(expr):
    floats = expr.atoms(Float)
    if not floats:
        return expr
    exact = {f: Rational(str(f)) for f in floats}
    if isinstance(expr, MatrixBase):
        return expr.applyfunc(lambda e: e.xreplace(exact))
    return expr.xreplace(exact)


def _num(expr) -> mpmath.mpc | None:
    try:
        value = sympy.N(expr, DIGITS)
        if not value.is_number or value.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo):
            return None
        re_, im_ = (sympy.N(part, DIGITS) for part in value.as_real_imag())
        if not (re_.is_Number and im_.is_Number):
            return None
        with mpmath.workdps(DIGITS):
            return mpmath.mpc(mpmath.mpf(Float(re_, DIGITS)._mpf_), mpmath.mpf(Float(im_, DIGITS)._mpf_))
    except Exception:
        return None


def _close(x: mpmath.mpc, y: mpmath.mpc) -> bool:
    with mpmath.workdps(DIGITS):
        scale = max(abs(x), abs(y))
        return scale == 0 or abs(x - y) <= TOLERANCE * scale


def _points(symbols: set) -> list[dict]:
    rng = random.Random(20240601)  # fixed: a verdict must not depend on the run
    ordered = sorted(symbols, key=str)
    return [{s: Rational(rng.randint(-97, 97), rng.randint(1, 13)) for s in ordered} for _ in range(POINTS)]


def same_value(a, b) -> bool:
    """Equal as numbers or as functions of their variables; exact wherever sympy can decide."""
    if a == b:
        return True
    if not (isinstance(a, Expr) and isinstance(b, Expr)):
        return False
    if a.is_Rational and b.is_Rational:
        return False
    if a.is_infinite or b.is_infinite:
        return False
    diff = a - b
    if diff == 0:
        return True
    if diff.is_Rational:
        return False
    symbols = a.free_symbols | b.free_symbols
    if not symbols:
        x, y = _num(a), _num(b)
        if x is None or y is None:
            return False
        if x == 0 or y == 0:  # no relative scale: only a proof will do
            return x == y or sympy.simplify(diff) == 0
        return _close(x, y)
    checked = 0
    for point in _points(symbols):
        x, y = _num(a.subs(point)), _num(b.subs(point))
        if x is None or y is None:
            continue
        if not _close(x, y):
            return False
        checked += 1
    return checked >= 3


def _relation(rel) -> tuple[Expr, str] | None:
    kinds = {sympy.Eq: "eq", sympy.Ne: "ne", sympy.StrictGreaterThan: "gt", sympy.GreaterThan: "ge"}
    flipped = {sympy.StrictLessThan: "gt", sympy.LessThan: "ge"}
    try:
        if type(rel) in kinds:
            return rel.lhs - rel.rhs, kinds[type(rel)]
        if type(rel) in flipped:
            return rel.rhs - rel.lhs, flipped[type(rel)]
    except Exception:
        return None
    return None


def _same_relation(g, p) -> bool:
    if isinstance(g, (Eq, Ne)) and type(g) is type(p) and (isinstance(g.rhs, Set) or isinstance(p.rhs, Set)):
        return same(g.lhs, p.lhs) and same(g.rhs, p.rhs)
    gf, pf = _relation(g), _relation(p)
    if gf is None or pf is None or gf[1] != pf[1]:
        return False
    (d1, kind), (d2, _) = gf, pf
    symbols = d1.free_symbols | d2.free_symbols
    if not symbols:
        return False
    ratios = []
    for point in _points(symbols):
        x, y = _num(d1.subs(point)), _num(d2.subs(point))
        if x is None or y is None or y == 0:
            continue
        ratios.append(x / y)
    if len(ratios) < 3 or ratios[0] == 0 or not all(_close(r, ratios[0]) for r in ratios):
        return False
    return kind in ("eq", "ne") or (abs(ratios[0].imag) == 0 and ratios[0].real > 0)


def _is_relation(x) -> bool:
    return isinstance(x, (Relational, And, Or))


def _as_tuple(x):
    if isinstance(x, Tuple):
        return tuple(x)
    # "(a, b)" parses as an open interval when a < b: the notation is shared with points.
    if isinstance(x, Interval) and x.left_open and x.right_open:
        return (x.start, x.end)
    return None


def _matched(gs, ps) -> bool:
    ps = list(ps)
    if len(gs) != len(ps):
        return False
    for g in gs:
        hit = next((i for i, p in enumerate(ps) if same(g, p)), None)
        if hit is None:
            return False
        ps.pop(hit)
    return True


def same(g, p) -> bool:
    """Structural equality with `same_value` at the leaves; anything unrecognised is not equal."""
    if isinstance(g, MatrixBase) or isinstance(p, MatrixBase):
        return (
            isinstance(g, MatrixBase) and isinstance(p, MatrixBase) and g.shape == p.shape
            and all(same_value(a, b) for a, b in zip(g, p, strict=True))
        )
    if isinstance(g, Tuple) or isinstance(p, Tuple):
        gt, pt = _as_tuple(g), _as_tuple(p)
        return gt is not None and pt is not None and len(gt) == len(pt) and all(map(same, gt, pt))
    if isinstance(g, FiniteSet) and isinstance(p, FiniteSet):
        return _matched(g.args, p.args)
    if isinstance(g, Interval) and isinstance(p, Interval):
        return (g.left_open, g.right_open) == (p.left_open, p.right_open) and (
            same_value(g.start, p.start) and same_value(g.end, p.end)
        )
    if isinstance(g, Union) and isinstance(p, Union):
        return _matched(g.args, p.args)
    if isinstance(g, Set) or isinstance(p, Set):
        return g == p
    if isinstance(g, Relational) and isinstance(p, Relational):
        return _same_relation(g, p)
    if _is_relation(g) and _is_relation(p):
        try:
            return same(g.as_set(), p.as_set())
        except Exception:
            return False
    return same_value(g, p)


def confirm(gold, pred) -> tuple[bool, str]:
    """Our own verdict on two parsed answers, with the reason when they differ."""
    g, p = _exact(gold), _exact(pred)
    if isinstance(g, Eq) and isinstance(g.lhs, Symbol) and not _is_relation(p):
        g = g.rhs
    if isinstance(p, Eq) and not _is_relation(g):
        if isinstance(p.lhs, Symbol):
            p = p.rhs
        elif isinstance(p.lhs, Expr) and not p.lhs.free_symbols and same_value(p.lhs, p.rhs):
            p = p.rhs
        else:
            return False, "not equal: answer is an equation, gold is not"
    try:  # "x <= 3" and "(-oo, 3]" describe one set; a relation in several variables raises here
        if _is_relation(g) and isinstance(p, Set):
            g = g.as_set()
        elif isinstance(g, Set) and _is_relation(p):
            p = p.as_set()
    except Exception:
        return False, "not equal: a relation that is not a set"
    if same(g, p):
        return True, "equal"
    return False, "not equal"


# One of each construction: ANTLR builds its prediction tables lazily, per construction, and the first
# parse of each kind costs tens of milliseconds. A worker runs these before it says it is ready.
WARM_UP = (
    ("\\frac{\\sqrt{3}}{2}", "\\sqrt{3}/2"), ("2\\pi", "2 \\cdot \\pi"), ("(1, 2)", "[1, 2)"),
    ("\\{1, 2\\}", "1, 2"), ("x = 5", "5"), ("y = 2x + 3", "y=2*x+3"), ("2 \\le x < 5", "(-\\infty, 3]"),
    ("x^2 - 1", "(x-1)(x+1)"), ("e^{i\\pi}", "-1"), ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "\\log_2 8"),
    ("10\\%", "\\text{odd}"), ("3!", "\\binom{5}{2}"), ("\\sin(\\pi/6)", "0.5"), ("-\\frac{7}{3}", "2^{10}"),
)


def warm_up() -> None:
    for gold, answer in WARM_UP:
        equivalent(gold, answer)


@lru_cache(maxsize=4096)  # the flywheel asks the same question often; the answer never changes
def equivalent(gold: str, answer: str) -> tuple[bool, str]:
    """(verified, reason) for two extracted, unit-free answer strings."""
    g = parse_math(gold)
    if g is None:
        return False, "parse error: gold"
    p = parse_math(answer)
    if p is None:
        return False, "parse error: answer"
    ok, reason = confirm(g, p)
    if not ok:
        return False, reason
    # Exact decimals for math-verify too: its float rounding is one of the traps closed here.
    if not mv_grader.verify(_exact(g), _exact(p), strict=True, allow_set_relation_comp=True, timeout_seconds=None):
        return False, "unsure: math-verify rejects what the confirmation accepts"
    return True, "equal: symbolic"
