"""Composers of the generated corpus's shapes (tests/textgen.py): which phrasings meet which quantity phrases,
where parentheses go, and which combinations are left out (an "and" inside a number inside "the sum of _ and
_", a word operator on a symbol operand). Each composer returns a top-level spec from a seeded Random."""

from __future__ import annotations

import random
from fractions import Fraction as F

import textgen_words as W
from textgen_phrases import (
    BIN,
    CONV2_FRAMES,
    CONV_FRAMES,
    GOES_FRAMES,
    IMP_FRAMES,
    NOMINAL_FRAMES,
    PINV_FRAMES,
    UN,
)
from textgen_render import Reject, render


def _latex(t: str) -> bool:
    return "\\" in t or "^{" in t


WORD_BIN = [t for t, p in BIN.items() if p.group == "arith" and p.form in ("infix", "closed", "imp")]
SLASH = "{0} ~/ ~{1}"  # "5/0" reads like the fraction 5/0: only between whole numbers, alone
SYM_BIN = [t for t, p in BIN.items() if p.form in ("sym", "tight") and not _latex(t) and t != SLASH]
LATEX_BIN = [t for t, p in BIN.items() if _latex(t)] + ["{0} + {1}", "{0} - {1}"]
PCT_BIN = [t for t, p in BIN.items() if p.group == "pct" and "tip" not in t]
WORD_UN = [t for t, p in UN.items() if p.form in ("pre", "post")]
SYM_UN = [t for t, p in UN.items() if p.form == "braced" and not _latex(t)]
LATEX_UN = [t for t, p in UN.items() if _latex(t)]
FORMS = {"word": ("int",) * 5 + ("words",) * 4 + ("fracw", "mixedw", "dec", "decw", "idiom", "idiom", "frac",
                                                   "mixed"),
         "sym": ("int",) * 8 + ("dec", "frac", "mixed", "dec"),
         "latex": ("int",) * 4 + ("latex_frac", "latex_frac", "latex_mixed", "dec")}
LEVEL = {"+": 1, "-": 1, "*": 2, "/": 2, "^": 3}


def _var(rng: random.Random) -> int:
    return rng.randrange(1 << 30)


def leaf(style: str, rng: random.Random, forms: tuple | None = None) -> tuple:
    return ("n", W.sample(rng.choice(forms or FORMS[style]), rng))


def _has_and(spec: tuple) -> bool:
    return any(t[0] == "and" for t in render(spec))


def _style(rng: random.Random, weights=(6, 3, 1)) -> str:
    return rng.choices(("word", "sym", "latex"), weights)[0]


def _pool(style: str, imp: bool = True) -> list[str]:
    pool = {"word": WORD_BIN, "sym": SYM_BIN, "latex": LATEX_BIN}[style]
    return [t for t in pool if imp or BIN[t].form != "imp"]


def _pow_operands(tpl: str, style: str, rng: random.Random) -> tuple:
    ints = ("int", "words") if style == "word" else ("int",)
    if "{1o}" in tpl:
        return leaf(style, rng), ("n", (rng.choice(ints), rng.randint(2, 6), _var(rng)))
    if rng.random() < 0.12:  # a rational exponent over a perfect power
        n, d = rng.choice([(1, 2), (1, 3), (3, 2), (2, 3), (1, 2)])
        base = rng.choice([0, 1, 2, 3, 4, 5, 10]) ** d if rng.random() < 0.85 else rng.randint(2, 30)
        form = rng.choice(["frac", "fracw"]) if style == "word" and n < d else "frac"
        return ("n", ("int", base, _var(rng))), ("n", (form, (n, d), _var(rng)))
    e = rng.choice([-2, -1, 0, 1, 2, 2, 2, 3, 3, 4, 5])
    for _ in range(20):
        base = leaf(style, rng)
        if abs(W.leaf_value(base[1])[0]) <= 25:
            return base, ("n", (rng.choice(ints), e, _var(rng)))
    raise Reject


def binary_node(tpl: str, style: str, rng: random.Random) -> tuple:
    ph = BIN[tpl]
    if ph.op == "^":
        a, b = _pow_operands(tpl, style, rng)
    elif ph.form == "fracof":
        a, b = leaf(style, rng, ("fracw", "frac", "fracw")), leaf(style, rng)
    else:
        a, b = leaf(style, rng), leaf(style, rng)
    if " and " in tpl and (_has_and(a) or _has_and(b)):
        raise Reject
    if ph.form == "sym" and ph.op == "/" and b[1][0] == "mixed":
        raise Reject
    return ("b", tpl, a, b)


def _top(expr: tuple, style: str, rng: random.Random) -> tuple:
    if expr[0] == "b" and BIN[expr[1]].form == "imp":
        return ("F", rng.choice(IMP_FRAMES), expr)
    if style == "latex" and rng.random() < 0.6 and all(
            (BIN.get(t) or UN.get(t)).form in ("sym", "tight", "braced") for t in _templates(expr)):
        expr = ("$", expr)
    return ("F", rng.choice(NOMINAL_FRAMES), expr)


def _first_index(tpl: str) -> int:
    return 1 if BIN[tpl].swapped else 0


def compose_leaf(rng: random.Random) -> tuple:
    style = _style(rng, (6, 2, 2))
    return _top(leaf(style, rng), style, rng)


def _root_leaf(style: str, k: int, rng: random.Random) -> tuple:
    m, n = rng.randint(0, 12), rng.randint(2, 6)
    if style != "word" and rng.random() < 0.25:
        form = "latex_frac" if style == "latex" else "frac"
        return ("n", (form, (m ** k, n ** k), _var(rng)))
    v = m ** k * (-1 if k == 3 and rng.random() < 0.2 else 1)
    return ("n", (rng.choice(("int", "words")) if style == "word" else "int", v, _var(rng)))


def compose_unary(rng: random.Random) -> tuple:
    style = _style(rng)
    tpl = rng.choice({"word": WORD_UN, "sym": SYM_UN + ["-( ~{0} ~)"], "latex": LATEX_UN}[style])
    ph = UN[tpl]
    c = leaf(style, rng)
    if ph.op in ("sqrt", "cbrt") and rng.random() < 0.7:
        c = _root_leaf(style, 2 if ph.op == "sqrt" else 3, rng)
    return _top(("u", tpl, c), style, rng)


def compose_unary_binary(rng: random.Random) -> tuple:
    style = _style(rng)
    mode = rng.choice(("outer", "outer", "first", "last"))
    tpl = rng.choice(_pool(style, imp=mode != "outer"))
    node = binary_node(tpl, style, rng)
    if mode == "outer":
        utpl = rng.choice({"word": WORD_UN, "sym": WORD_UN + SYM_UN, "latex": LATEX_UN}[style])
        ph = BIN[tpl]
        if UN[utpl].form != "braced" and (style != "word" or rng.random() < 0.1) and \
                ph.form not in ("tight", "braced") and rng.random() < 0.75:
            node = ("p", node)
        return _top(("u", utpl, node), style, rng)
    utpl = rng.choice(WORD_UN if style == "word" else SYM_UN if style == "sym" else LATEX_UN)
    i = _first_index(tpl) if mode == "first" else 1 - _first_index(tpl)
    child = ("u", utpl, node[2 + i])
    if BIN[tpl].form == "tight" and UN[utpl].form != "braced":
        child = ("p", child)
    node = node[:2 + i] + (child,) + node[3 + i:]
    return _top(node, style, rng)


def _needs_paren(outer: str, inner: str, i: int) -> bool:
    po, pi = BIN[outer], BIN[inner]
    if pi.form == "braced" or po.form == "braced" or (po.form == "tight" and "^{" in outer and i == 1):
        return False
    if po.form == "tight":
        return True
    return LEVEL[pi.op] < LEVEL[po.op] if i == 0 else LEVEL[pi.op] <= LEVEL[po.op]


def compose_chain(rng: random.Random) -> tuple:
    style = _style(rng, (5, 4, 1))
    outer = rng.choice(_pool(style))
    node = binary_node(outer, style, rng)
    slots = (0, 1) if style != "word" and rng.random() < 0.3 else (rng.choice((0, 1)),)
    for i in slots:
        inner = binary_node(rng.choice(_pool(style, imp=False)), style, rng)
        if style == "word":
            first = i == _first_index(outer)
            if BIN[outer].form == "closed" and first and BIN[inner[1]].form == "closed":
                raise Reject  # "the sum of the product of 2 and 3 and 4"
            if rng.random() < 0.15:
                inner = ("p", inner)
        elif _needs_paren(outer, inner[1], i) and not (
                BIN[outer].form == BIN[inner[1]].form == "tight" and i == 0 and rng.random() < 0.3):
            inner = ("p", inner)
        node = node[:2 + i] + (inner,) + node[3 + i:]
    if style == "word" and _has_and(node) and any(" and " in t for t in _templates(node)):
        raise Reject
    return _top(node, style, rng)


def _templates(spec) -> list[str]:
    own = [spec[1]] if spec[0] in ("b", "u") else []
    return own + [t for p in spec[1:] if isinstance(p, tuple) for t in _templates(p)]


def _pct_leaf(sym: bool, rng: random.Random) -> tuple:
    roll = rng.random()
    if roll < 0.65:
        v = rng.choice([5, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 12, 3, 1, 0])
        return ("n", ("int" if sym or rng.random() < 0.5 else "words", v, _var(rng)))
    if roll < 0.8:
        return ("n", ("dec" if sym or rng.random() < 0.5 else "decw", rng.choice([F(25, 2), F(15, 2), F(1, 2),
                                                                               F(33, 10)]), _var(rng)))
    if sym:
        return ("n", rng.choice([("frac", (3, 4)), ("frac", (1, 2)), ("mixed", (2, 1, 2)), ("mixed", (33, 1, 3))])
                + (_var(rng),))
    return ("n", ("mixedw", rng.choice([(12, 1, 2), (2, 1, 2), (33, 1, 3)]), _var(rng)))


def compose_percent(rng: random.Random) -> tuple:
    tpl = rng.choice(PCT_BIN)
    base = leaf("word", rng, ("int", "int", "int", "words", "dec", "idiom"))
    return _top(("b", tpl, _pct_leaf("~%" in tpl, rng), base), "word", rng)


def _money(rng: random.Random) -> tuple:
    return ("n", W.sample(rng.choice(("usd", "usd", "usd", "cent")), rng))


def compose_money(rng: random.Random) -> tuple:
    kind = rng.choice(("+-", "+-", "*", "/", "$/$", "%"))
    count = ("n", (rng.choice(("int", "int", "words")), rng.randint(2, 12), _var(rng)))
    if kind == "%":
        tpl = rng.choice(PCT_BIN + ["a {0} ~% tip on {1}"] * 3)
        expr = ("b", tpl, _pct_leaf(True, rng), _money(rng))
    else:
        ops = {"+-": "+-", "*": "*", "/": "/", "$/$": "/"}[kind]
        tpl = rng.choice([t for t in WORD_BIN + SYM_BIN if BIN[t].op in ops and BIN[t].form != "tight"
                          and "between" not in t and "quotient" not in t and "{1o}" not in t])
        a, b = _money(rng), (_money(rng) if kind in ("+-", "$/$") else count)
        if kind == "*" and rng.random() < 0.5:
            a, b = b, a
        expr = ("b", tpl, a, b)
    if BIN[expr[1]].form == "imp":
        return ("M", rng.choice(IMP_FRAMES), expr)
    return ("M", rng.choice(NOMINAL_FRAMES), expr)


def compose_units(rng: random.Random) -> tuple:
    dim = rng.choice(list(W.UNITS))
    i1, i2 = rng.sample(range(len(W.UNITS[dim])), 2)
    form = rng.choice(("int", "int", "int", "words", "dec", "mixed", "mixedw", "fracw"))
    if form in ("fracw", "mixed", "mixedw"):
        q = ("n", W.sample(form, rng))
    else:
        q = ("n", (form, rng.choice([1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 24, 36, 100]) if form != "dec"
                   else rng.choice([F(5, 2), F(3, 2), F(1, 4), F(75, 100)]), _var(rng)))
    if rng.random() < 0.2:
        i3 = min(i1, i2)
        r = ("n", ("int", rng.randint(1, 11), _var(rng)))
        return ("C2", rng.choice(CONV2_FRAMES), ("n", ("int", rng.randint(1, 9), _var(rng))), max(i1, i2), r, i3,
                dim, i3)
    return ("C", rng.choice(CONV_FRAMES), q, dim, i1, i2)


def compose_percent_inverse(rng: random.Random) -> tuple:
    b = rng.choice([10, 20, 25, 40, 50, 80, 200, 0, 30, 12])
    a = rng.choice([1, 2, 5, 6, 10, 12, 15, 20])
    form = rng.choice(("int", "int", "words"))
    return ("PI", rng.choice(PINV_FRAMES), ("n", (form, a, _var(rng))), ("n", (form, b, _var(rng))))


def compose_goes_into(rng: random.Random) -> tuple:
    b = rng.choice([2, 3, 4, 5, 6, 7, 8, 12, 0])
    a = b * rng.randint(1, 12) + (rng.randint(1, b - 1) if b > 1 and rng.random() < 0.3 else 0)
    form = rng.choice(("int", "int", "words"))
    return ("G", rng.choice(GOES_FRAMES), ("n", (form, a, _var(rng))), ("n", (form, b, _var(rng))))


def negation(spec: tuple, rng: random.Random) -> tuple | None:
    """The same question about the negative of the expression ("the negative of ...", "-( ... )")."""
    if spec[0] != "F" or spec[1] in IMP_FRAMES:
        return None
    expr, dollars = (spec[2][1], True) if spec[2][0] == "$" else (spec[2], False)
    symbolic = dollars or any(BIN.get(t, UN.get(t)).form in ("sym", "tight", "braced") for t in _templates(expr))
    tpl = "-( ~{0} ~)" if symbolic else rng.choice(("the negative !of {0}", "the opposite !of {0}"))
    out = ("u", tpl, expr)
    return ("F", spec[1], ("$", out) if dollars else out)


def compose_binary(rng: random.Random) -> tuple:
    style = _style(rng)
    if style == "sym" and rng.random() < 0.1:
        a, b = (("n", ("int", rng.choice([rng.randint(1, 30), 0]), _var(rng))) for _ in range(2))
        return _top(("b", SLASH, a, b), style, rng)
    tpl = rng.choice(_pool(style) + (["{0} of {1}"] * 2 if style == "word" else []))
    return _top(binary_node(tpl, style, rng), style, rng)


COMPOSERS = {"leaf": compose_leaf, "unary": compose_unary, "binary": compose_binary,
             "unary+binary": compose_unary_binary, "chain": compose_chain, "percent": compose_percent,
    "money": compose_money, "units": compose_units, "percent-inverse": compose_percent_inverse,
    "goes-into": compose_goes_into}
