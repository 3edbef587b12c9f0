"""Rendering and readings of the generated corpus's specs (tests/textgen.py).

`render(spec)` gives the tokens of a text; `readings(spec)` the set of values its English allows: one value
where the phrasing fixes the grouping, two where it does not ("two plus three times four", "twice 3 plus 4",
"the sum of 2 and 3 squared", "-5 squared", "3/4 squared", "8 / 2 * 4"). Symbols follow school precedence;
a written power ("2^3") and a braced form (\\frac, \\sqrt{}, sqrt()) are units; words group left to right only
where every reading agrees (additions and subtractions, or products, in plain infix words)."""

from __future__ import annotations

from fractions import Fraction as F

import textgen_words as W
from textgen_phrases import (
    BIN,
    IMP_FRAMES,
    ORD_SUFFIX,
    POWERS,
    SKIP,
    UN,
    UNDEF,
    absv,
    add,
    div,
    mul,
    neg,
    pw,
    sub,
)


class Reject(Exception):
    """A combination the generator leaves out."""


NAT_ADD = frozenset({"{0} plus {1}", "{0} minus {1}", "{0} + {1}", "{0} - {1}", "{0} − {1}", "{0} take away {1}",
                     "{0} increased !by {1}", "{0} decreased !by {1}", "{0} reduced !by {1}"})
NAT_MUL = frozenset({"{0} times {1}", "{0} multiplied !by {1}", "{0} * {1}", "{0} x {1}", "{0} × {1}",
                     "{0} \\cdot {1}", "{0} \\times {1}"})
RELATIVE = {"{1} more than {0}": 1, "{1} less than {0}": -1, "{1} fewer than {0}": -1,  # or by a fraction of it
            "{0} increased !by {1}": 1, "{0} decreased !by {1}": -1, "{0} reduced !by {1}": -1}
T = W.T


def _glue(toks: list) -> list:
    return [(toks[0][0], toks[0][1], True)] + toks[1:] if toks else toks


def fill(template: str, kids: dict[str, list]) -> list:
    out = []
    for w in template.split():
        glue = w.startswith("~")
        w = w.removeprefix("~")
        ctx = w.startswith("!")
        w = w.removeprefix("!")
        if w in kids:
            out += _glue(kids[w]) if glue else list(kids[w])
        else:
            out.append((w, "skip" if w.lower() in SKIP else "ctx" if ctx else "op", glue))
    return out


def _ordinal(spec: tuple) -> list:
    if spec[0] != "n" or spec[1][0] not in ("int", "words") or not 2 <= spec[1][1] <= 10:
        raise Reject
    v, var = spec[1][1], spec[1][2]
    return [T(W.ORDINAL[v] if var % 2 else f"{v}{ORD_SUFFIX.get(v, 'th')}")]


def _qty(spec: tuple, dim: str, i: int) -> list:
    one, many, _ = W.UNITS[dim][i]
    form, p, var = spec[1]
    art = "an" if one[0] in "aeiou" or one == "hour" else "a"
    if form == "fracw":
        if p == (1, 2) and var % 2:
            return [T("half"), T(art, "skip"), T(one, "unit")]
        return W.render(spec[1]) + [T("of", "ctx"), T(art, "skip"), T(one, "unit")]
    v = W.leaf_value(spec[1])[0]
    return W.render(spec[1]) + [T(one if v == 1 and form in ("int", "words") else many, "unit")]


def _juxtaposed(left: tuple, right_first: str) -> bool:
    """Whether dropping the sign between `left` and a right operand starting with `right_first` still
    multiplies: before a parenthesis, a root or a LaTeX command, but not a whole number before \\frac (that
    is a mixed number)."""
    whole = left[0] == "n" and left[1][0] == "int"
    if right_first.startswith(("\\frac", "\\dfrac")):
        return not whole
    return left[0] == "p" or right_first.startswith(("(", "\\", "√", "sqrt("))


def render(spec: tuple) -> list:
    t = spec[0]
    if t == "n":
        return W.render(spec[1])
    if t in ("p", "$"):
        o, c, kind = ("(", ")", "paren") if t == "p" else ("$", "$", "ctx")
        return [(o, kind, False)] + _glue(render(spec[1])) + [(c, kind, True)]
    if t == "u":
        return fill(spec[1], {"{0}": render(spec[2])})
    if t == "b":
        kids = {"{0}": render(spec[2]), "{1}": render(spec[3])}
        if "{1o}" in spec[1]:
            kids["{1o}"] = _ordinal(spec[3])
        out = fill(spec[1], kids)
        if BIN[spec[1]].form == "sym" and BIN[spec[1]].op == "*" and _juxtaposed(spec[2], kids["{1}"][0][0]):
            n = len(kids["{0}"])  # "2 (3 + 4)", "2 \\sqrt{4}" multiply as well: the sign adds nothing
            out[n] = (out[n][0], "ctx", out[n][2])
        return out
    if t == "F":
        return fill(spec[1], {"{0}": render(spec[2])})
    if t == "M":  # a unit word in money arithmetic adds nothing the other operand does not say
        return [(s, "ctx" if k == "unit" else k, g) for s, k, g in fill(spec[1], {"{0}": render(spec[2])})]
    if t == "C":
        _, frame, q, dim, i1, i2 = spec
        return fill(frame, {"{Q}": _qty(q, dim, i1), "{U}": [T(W.UNITS[dim][i2][1], "unit")]})
    if t == "C2":
        _, frame, q, i1, r, i2, dim, i3 = spec
        return fill(frame, {"{Q}": _qty(q, dim, i1), "{R}": _qty(r, dim, i2),
                            "{U}": [T(W.UNITS[dim][i3][1], "unit")]})
    if t in ("PI", "G"):
        return fill(spec[1], {"{0}": render(spec[2]), "{1}": render(spec[3])})
    raise ValueError(t)


def text_of(toks, spec: tuple) -> str:
    s = "".join(("" if i == 0 or g else " ") + w for i, (w, _, g) in enumerate(toks))
    if spec[0] == "F" and spec[1] in IMP_FRAMES and spec[1].startswith("{0}"):
        s = s[0].upper() + s[1:]
    return s


def leaf_alts(leaf: tuple, f, where: str, power: bool, tight: bool = False) -> set:
    """Other readings of an operator next to a leaf whose written parts can group apart: a power after
    "-5", "3/4", "2 1/2"; any operator after "two and a half"; "twice" before
    "2 1/2". A fraction or mixed number written in digits is one number to words ("3/4 squared"); only a
written power splits it ("3/4^2")."""
    form, p, _ = leaf
    v = W.leaf_value(leaf)[0]
    if where == "post":
        if form in ("int", "words", "dec", "decw") and v < 0:
            return {neg(f(-v))}
        if form == "frac" and tight:
            return {div(F(p[0]), f(F(p[1])))}
        if form == "mixedw" or (tight and form in ("mixed", "latex_mixed")):
            return {add(F(p[0]), f(F(p[1], p[2])))}
    elif where == "pre" and form == "mixedw":
        return {add(f(F(p[0])), F(p[1], p[2]))}
    return set()


def _has_fraction(spec) -> bool:
    """A written fraction in the amount ("two thirds", "2/3 tripled"): "more than" may then be relative."""
    if spec[0] == "n":
        return spec[1][0] in ("fracw", "frac", "latex_frac")
    return any(isinstance(p, tuple) and _has_fraction(p) for p in spec[1:])


def _surface(ph, spec):
    """(first operand, last operand, value as a function of the operands in the text's order)."""
    c0, c1 = spec[2], spec[3]
    return (c1, c0, lambda a, b: ph.fn(b, a)) if ph.swapped else (c0, c1, ph.fn)


def _natural(t1: str, t2: str) -> bool:
    return (t1 in NAT_ADD and t2 in NAT_ADD) or (t1 in NAT_MUL and t2 in NAT_MUL)


def _unary(s) -> set:
    ph, c = UN[s[1]], s[2]
    out = {ph.fn(x) for x in readings(c)}
    if ph.form == "braced":
        return out
    if c[0] == "n":
        short = "of" not in s[1]
        out |= leaf_alts(c[1], ph.fn, ph.form if ph.form == "post" or short else "none", ph.op in POWERS)
    elif c[0] == "b":
        B = BIN[c[1]]
        first, last, fs = _surface(B, c)
        rf, rl = readings(first), readings(last)
        if ph.form == "pre" and B.form in ("infix", "sym", "pct"):
            out |= {fs(ph.fn(x), y) for x in rf for y in rl}
        if ph.form == "post" and B.form in ("infix", "closed", "sym", "pct"):
            out |= {fs(x, ph.fn(y)) for x in rf for y in rl}
    elif c[0] == "u" and UN[c[1]].form != "braced" and {ph.form, UN[c[1]].form} == {"pre", "post"}:
        out |= {UN[c[1]].fn(ph.fn(x)) for x in readings(c[2])}
    return out


def _binary(s) -> set:
    ph, tpl, c0, c1 = BIN[s[1]], s[1], s[2], s[3]
    r0, r1 = readings(c0), readings(c1)
    pairs = [(x, y) for x in r0 for y in r1]
    # "the difference between a and b" is |a - b| as people and public generators read it ("of": a - b too)
    between = tpl.startswith("the difference between")
    out = {absv(sub(x, y)) if between else ph.fn(x, y) for x, y in pairs}
    if tpl.startswith("the quotient"):
        out |= {_floor(x, y) for x, y in pairs}
    if tpl in RELATIVE and _has_fraction(c1):
        out |= {mul(x, add(F(1), mul(F(RELATIVE[tpl]), y))) for x, y in pairs}  # "a third less than 6" = 4
    if ph.op in ("%+", "%-"):
        out |= {(add if ph.op == "%+" else sub)(y, div(x, F(100))) for x, y in pairs}
    if ph.op == "^" and ph.form in ("infix", "tight") and c0[0] == "n":
        for y in r1:
            out |= leaf_alts(c0[1], lambda b, y=y: pw(b, y), "post", True, ph.form == "tight")
    braced_exp = "^{" in tpl
    # a fraction divided by a fraction with the sign ("3/4 ÷ 1/8") is school notation: one reading
    frac_by_frac = "/" not in tpl and c0[0] == "n" and c0[1][0] == "frac"
    if c1[0] == "n" and c1[1][0] == "frac" and not braced_exp and not frac_by_frac and (
            ph.form == "tight" or (ph.form == "sym" and ph.op == "/")):
        n, d = c1[1][1]  # "8^1/3" = (8^1)/3, "6 / 3/4" = (6/3)/4
        out |= {div(ph.fn(x, F(n)), F(d)) for x in r0}
    first, last, fs = _surface(ph, s)
    for side, ch, other in (("first", first, last), ("last", last, first)):
        ro = readings(other)
        if ch[0] == "u":
            P = UN[ch[1]]
            inner = readings(ch[2])
            if P.form == "pre" and side == "first" and ph.form in ("infix", "sym", "pct"):
                out |= {P.fn(fs(x, y)) for x in inner for y in ro}
            if P.form == "post" and side == "last" and ph.form in ("infix", "closed", "imp", "sym", "pct"):
                out |= {P.fn(fs(y, x)) for x in inner for y in ro}
        elif ch[0] == "b":
            out = _chain(ph, tpl, fs, side, ch, ro, out)
    return out


def _chain(ph, tpl, fs, side, ch, ro, out) -> set:
    B1 = BIN[ch[1]]
    a, b, f1 = _surface(B1, ch)
    ra, rb = readings(a), readings(b)
    if ph.form == "tight" and B1.form == "tight" and side == "first" and "^{" not in tpl:
        return out | {pw(x, pw(y, z)) for x in ra for y in rb for z in ro}  # "2^3^2"
    if B1.form in ("tight", "braced") or ph.form == "braced":
        return out
    if ph.form in ("sym", "tight") and B1.form == "sym":  # school precedence (parentheses put by the composer);
        return out  # same-level symbols left to right: "8 / 2 * 4" = 16 (the lead's ruling, 2026-12-07)
    if side == "first":
        if ph.form in ("closed", "imp") or (B1.form != "closed" and _natural(ch[1], tpl)):
            return out
        return out | {f1(x, fs(y, z)) for x in ra for y in rb for z in ro}
    if B1.form == "closed":
        return out
    left = {f1(fs(w, x), y) for w in ro for x in ra for y in rb}
    return left if ph.form in ("infix", "sym") and _natural(tpl, ch[1]) else out | left


def _floor(x, y):
    if UNDEF in (x, y) or y == 0 or x.denominator != 1 or y.denominator != 1:
        return div(x, y)
    return F(x.numerator // y.numerator)


def readings(s: tuple) -> set:
    t = s[0]
    if t == "n":
        return {W.leaf_value(s[1])[0]}
    if t in ("p", "$"):
        return readings(s[1])
    if t == "F":
        return readings(s[2])
    if t == "u":
        return _unary(s)
    if t == "b":
        return _binary(s)
    if t == "C":
        _, _, q, dim, i1, i2 = s
        return {mul(W.leaf_value(q[1])[0], F(W.UNITS[dim][i1][2], W.UNITS[dim][i2][2]))}
    if t == "C2":
        _, _, q, i1, r, i2, dim, i3 = s
        u = W.UNITS[dim]
        return {F(W.leaf_value(q[1])[0] * u[i1][2] + W.leaf_value(r[1])[0] * u[i2][2], u[i3][2])}
    if t == "PI":
        return {div(mul(F(100), x), y) for x in readings(s[2]) for y in readings(s[3])}
    if t == "G":
        return {f(x, y) for x in readings(s[2]) for y in readings(s[3]) for f in (div, _floor)}
    raise ValueError(t)


def _money(s) -> list[tuple]:
    """The readings of money arithmetic as (value, unit) pairs."""
    if s[0] == "n":
        return [W.leaf_value(s[1])]
    ph, tpl = BIN[s[1]], s[1]
    out = []
    for (x, ux) in _money(s[2]):
        for (y, uy) in _money(s[3]):
            if ph.group == "pct":
                out.append((ph.fn(x, y), uy))
                continue
            unit = ux or uy
            if ux and uy and ux != uy:  # dollars with cents: both in cents
                x, y, unit = (x * 100 if ux == "usd" else x), (y * 100 if uy == "usd" else y), "mix"
            if ph.op == "/" and ux and uy:
                unit = None
            between = tpl.startswith("the difference between")
            out.append((absv(sub(x, y)) if between else ph.fn(x, y), unit))
            if tpl.startswith("the quotient") and unit is None:
                out.append((_floor(x, y), unit))
    return out


def money_values(expr: tuple) -> tuple[str, frozenset]:
    """(status, values): dollars stay dollars; an answer in cents may also be given in dollars."""
    sets = set()
    for v, unit in _money(expr):
        sets.add(frozenset({v}) if v is UNDEF or unit not in ("cent", "mix") else frozenset({v, v / 100}))
    if len(sets) > 1:
        return "ambiguous", frozenset().union(*sets)
    (vals,) = sets
    return ("undefined" if UNDEF in vals else "ok"), vals
