"""What each grammar rule (reader_grammar) means: the parse forest, ambiguities included, becomes the SET
of readings of a text. A reading is (tree, kind): tree from reader_tree's canonical constructors; kind is
None (a number), "%" (a percent), "w" (a fraction in words), "d" (a fraction in digits), a unit
("dim", factor) for an amount, or "eq"/"def"/"defs" for an equation or function definitions. A rule
applied to operands it does not fit (a percent added to a number, metres plus grams) gives no reading;
an ambiguity is the union of its alternatives' readings. Past MAX_READINGS readings at one node: Refuse."""

from __future__ import annotations

import itertools
from fractions import Fraction

from lark import Token, Tree

from galahad.flywheel.problems import reader_tree as rt
from galahad.flywheel.problems.reader_lexer import Refuse
from galahad.flywheel.problems.reader_ops import (
    ONE_T,
    PLAIN,
    _add,
    _amount,
    _count,
    _div,
    _floor,
    _frac,
    _frac_kind,
    _fw,
    _idiom,
    _items,
    _mean,
    _mul,
    _nonneg,
    _part,
    _percent,
    _plain,
    _postfix,
    _pow,
    _relative,
    _remainder,
    _solved,
    _sub,
    _subst,
    _sum_amounts,
    _sum_items,
    _unary,
    _wbin,
)
from galahad.flywheel.problems.reader_phrases import (
    _amount_more,
    _as_much,
    _change,
    _cmp,
    _convert,
    _difference,
    _distance,
    _elapsed,
    _elapsed_24,
    _extreme,
    _interest,
    _money,
    _pct_change,
    _pct_of,
    _per_unit,
    _quotient,
    _rate,
    _ratio,
    _round,
    _round_unit,
    _scaled,
    _sig_unit,
    _total_list,
)

MAX_READINGS = 16
MAX_WORK = 4_000  # forest nodes read for one text (each of the 1,358 held-out texts reads at most 22)

# rule name -> meaning of its non-punctuation operands (tokens that are only words are dropped)


def _no_article(c: tuple) -> tuple:
    return tuple(x for x in c if not (isinstance(x, Token) and x.type == "A"))


def _mean_range(a: Token, b: Token):
    """The mean of the whole numbers a..b: (a + b) / 2 (a < b, both whole)."""
    x, y = Fraction(a.value), Fraction(b.value)
    if x.denominator != 1 or y.denominator != 1 or not x < y:
        return None
    return rt.div(rt.add(rt.num(x), rt.num(y)), rt.num(2)), None


def _floor_is(a, b, q: Fraction) -> bool:
    """Whether q is the whole quotient of a by b (both whole, b > 0)."""
    va, vb = rt.value(a[0]), rt.value(b[0])
    return va is not None and vb is not None and vb > 0 and va.denominator == vb.denominator == 1 and va // vb == q


def _c_divide(a, b):
    return _div(a, b if isinstance(b, tuple) else (rt.num(Fraction(b.value)), None))


def _off_amount(a, p):
    """a less p: a percent of a ("20% off $80"), or an amount of money off a larger amount ("$5 off $80")."""
    if p[1] != "%" and (not (_money(p) and _money(a)) or rt.value(p[0]) * p[1][1] > rt.value(a[0]) * a[1][1]):
        return None
    return _relative(a, p, -1)


M = {
    "num": lambda t: (rt.num(Fraction(t.value)), None),
    "frac": _frac, "add": _add, "sub": _sub, "mul": _mul, "div": _div, "pow": _pow,
    "neg": lambda a: (rt.neg(a[0]), None) if _plain(a) else None,
    "tdiv": lambda n, b: _frac_kind(_div((rt.num(Fraction(n.value)), None), b)),
    "div_chain": lambda a, n1, n2: _div(_div(a, (rt.num(Fraction(n1.value)), None)) or (None, "%"),
                                        (rt.num(Fraction(n2.value)), None)),
    "floordiv": lambda a, b: _floor(rt.div(a[0], b[0])) if _remainder(a, b) else None,
    "floor": lambda a: _floor(a[0]) if _plain(a) and _nonneg(a[0]) else None,
    "mod": _remainder, "remainder": _remainder,
    "absolute": _unary(rt.absolute), "opposite": _unary(rt.opposite), "reciprocal": _unary(rt.inv),
    "implicit": _mul, "var": lambda *t: (rt.VAR, None),
    "postfix": _postfix, "wbin": _wbin,
    "less_than": lambda a, b: _sub(b, a) if a[1] not in ("%", "w") else None,
    "more_than": lambda a, b: _add(b, a) if a[1] not in ("%", "w") else None,
    "rel_more": lambda a, b: _relative(b, a, 1), "rel_less": lambda a, b: _relative(b, a, -1),
    "increase": lambda a, b: _relative(a, b, 1), "decrease": lambda a, b: _relative(a, b, -1),
    "amount": _amount, "amount_more": _amount_more,
    "idiom": _idiom, "idiom_and": lambda *c: _add(_idiom(*c[:-1]), (rt.num(Fraction(c[-1].value)), None)),
    "idiom_half": lambda *c: _add(_idiom(*c[:-2]), (rt.part_of(Fraction(1, 2), _idiom(*c[:-2])[0]), None))
    if c[-1].value == "2" else None,
    "half_idiom": lambda *c: (rt.part_of(Fraction(1, int(next(t for t in c if t.type == "FRAC1").value)),
                                         rt.num(Fraction(c[-1].value))), None),
    "count": _count, "fw": _fw, "fw_one": lambda *c: _fw(None, c[-1]),
    "mixed": lambda n, w: (rt.num(Fraction(n.value) + rt.value(w[0])), None) if rt.value(w[0]) < 1 else None,
    "percent": _percent, "part_of": lambda *c: _part(c[0], c[-1]),
    "amount_and_half": lambda *c: _mul((rt.num(1 + Fraction(1, int(c[-1].value))), None), _amount(ONE_T, c[1])),
    "amount_list": lambda *qs: _sum_amounts(qs),
    "amount_mixed": lambda n, w, u: _mul((rt.num(Fraction(n.value) + rt.value(w[0])), None), _amount(ONE_T, u)),
    "mixed_pow": lambda n, w, e: _add((rt.num(Fraction(n.value)), None), _pow(w, e) or (None, "%")),
    "mixed_post": lambda n, w, p: _add((rt.num(Fraction(n.value)), None), _postfix(w, p)),
    "pow_div": lambda b, e, n: _div(_pow(b, e) or (None, "%"), (rt.num(Fraction(n.value)), None)),
    "off": lambda p, a: _relative(a, p, -1), "off_r": lambda a, p: _relative(a, p, -1),
    "tip_at": lambda a, p: _part(p, a), "tip_after": lambda a, p: _part(p, a),
    "frac_of": lambda a, b: _div(a, b) if _plain(a, b) else None, "frac_of_r": lambda b, a: _div(a, b),
    "as_percent": lambda a: (rt.mul(a[0], rt.num(100)), None) if _plain(a) else None,
    "pct_change": lambda a, b: _pct_change(a, b, 0), "pct_up": lambda a, b: _pct_change(a, b, 1),
    "pct_down": lambda a, b: _pct_change(a, b, -1),
    "sum": _sum_items, "product": lambda it: (rt.mul(*it[0]), None), "items": _items,
    "difference": _difference, "distance": _distance, "maximum": _extreme(">"), "minimum": _extreme("<"),
    "quotient": _quotient, "mean": _mean, "ratio": _ratio, "change": _change,
    "minus_pct": lambda a, p: _relative(a, p, -1) if _money(a) else None,
    "plus_pct": lambda a, p: _relative(a, p, 1) if _money(a) else None,
    "range": lambda it: (rt.sub(rt.extreme(">", it[0]), rt.extreme("<", it[0])), None) if len(it[0]) > 1 else None,
    "tip_total": lambda p, a: _relative(a, p, 1), "total": lambda q: q if q[1] not in PLAIN + ("%",) else None,
    "median": lambda it: (rt.median(it[0]), None), "mean_range": _mean_range,
    "per_own_unit": lambda q, p: _div(p, (q[0], None)) if _money(p) and not _money(q) and q[1] not in PLAIN else None,
    "remainder_after": lambda a, b, q: _remainder(a, b) if _floor_is(a, b, Fraction(q.value)) else None,
    "remainder_tight": lambda a, b, q: M["remainder_after"](*((rt.num(Fraction(t.value)), None) for t in (a, b)), q),
    "whole_times": lambda b, a: M["floordiv"](a, b),
    "mode": lambda it: (rt.extreme("o", it[0]), None) if len(it[0]) > 2 else None,
    "square": lambda a: _pow(a, (rt.num(2), None)), "cube": lambda a: _pow(a, (rt.num(3), None)),
    "sqrt": lambda a: _pow(a, (rt.num(Fraction(1, 2)), None)),
    "cbrt": lambda a: _pow(a, (rt.num(Fraction(1, 3)), None)),
    "twice": lambda a: _mul((rt.num(2), None), a), "thrice": lambda a: _mul((rt.num(3), None), a),
    "c_add": _add, "c_subtract_from": lambda a, b: _sub(b, a), "c_multiply": _mul,
    "c_divide": lambda *c: _c_divide(*_no_article(c)), "split_r": lambda *c: _c_divide(*_no_article(c)[::-1]),
    "c_divide_into": lambda a, b: _div(b, a), "c_halve": lambda a: _div(a, (rt.num(2), None)),
    "convert": _convert, "convert_r": lambda u, q: _convert(q, u),
    "round": lambda x, u: _round(x, u), "r_nearest": lambda n: Fraction(n.value),
    "r_nearest_frac": lambda f: Fraction(1, int(f.value)), "r_whole": lambda *_: Fraction(1),
    "r_sf": lambda n: (int(Fraction(n.value)), "sf"),
    "r_dp": lambda n: Fraction(1, 10 ** int(Fraction(n.value))) if Fraction(n.value) < 20 else None,
    "pct_of": _pct_of, "pct_of_r": lambda b, a: _pct_of(a, b),
    "at_each": lambda n, q: _mul(n if isinstance(n, tuple) else (rt.num(Fraction(n.value)), None), q),
    "rate": lambda *c: _rate(*_no_article(c)), "rate_r": lambda *c: _rate(*_no_article(c)[1:], _no_article(c)[0]),
    "interest": _interest, "interest_r": lambda p, t, r: _interest(p, r, t), "total_list": _total_list,
    "as_much": _as_much, "per_unit": _per_unit,
    "change_each": lambda paid, n, q: _change(paid, _mul((rt.num(Fraction(n.value)), None), q) or (None, "%")), "r_nearest_unit": lambda u: (u, "unit"),
    "pct_more": lambda a, b: _pct_change(b, a, 1), "pct_less": lambda a, b: _pct_change(b, a, -1),
    "clock": lambda n: Fraction(n.value), "elapsed": _elapsed, "elapsed_r": lambda t1, t2, u: _elapsed(u, t1, t2),
    "elapsed_24": _elapsed_24,
    "plus_part": lambda a, p: _relative(a, p, 1),
    "part_unit": lambda f, _a, u: _mul((rt.num(Fraction(1, int(f.value))), None), _amount(ONE_T, u)),
    "at_value": _subst, "let_value": lambda e: _solved(e[0]) if _plain(e) and not rt.has_var(e[0]) else None, "value_at": lambda x, e: _subst(e, x),
    "cmp_more": _cmp, "cmp_less": lambda a, b: _cmp(b, a),
    "cmp_times": _ratio, "cmp_times_r": lambda b, a: _ratio(a, b), "goes_into": lambda b, a: _quotient(a, b),
    "off_amount": lambda p, a: _off_amount(a, p), "off_amount_r": lambda a, p: _off_amount(a, p),
    "given": lambda n, q: ((Fraction(n.value), q), "given"), "given_r": lambda q, n: ((Fraction(n.value), q), "given"),
    "ask_n": lambda n: (Fraction(n.value), "ask_n"), "price_ask": lambda: (Fraction(1), "ask_n"),
    "scaled": _scaled, "scaled_r": lambda a, g: _scaled(g, a),
    "at_each_money": lambda c, q: _mul(c, q) if _money(q) and _plain(c) else None,
    "at_each_if": lambda c, one, q: _mul(c, q) if one.value == "1" and _plain(c) else None,
    "per_unit_r": lambda *c: _per_unit(*_no_article(c)[:0:-1], _no_article(c)[0]),
    "equation": lambda a, b: ((a[0], b[0]), "eq") if _plain(a, b) or a[1] == b[1] else None,
    "call": lambda f, a: (("F", f"F{f.value}({a[0][1]})", f.value, a[0]), None) if _plain(a) else None,
    "fdef": lambda f, _v, body: ((f.value, body[0]), "def") if _plain(body) else None,
    "fdefs": lambda *ds: (tuple(d[0] for d in ds if isinstance(d, tuple)), "defs"),
}


_KEEP_TOKENS = {"NUM", "UNIT", "IDIOM", "FRAC1", "FRACN", "FUNC", "A", "VAR"}


_WANT_TOKEN = {"num", "frac", "amount", "amount_more", "idiom", "idiom_and", "idiom_half", "half_idiom", "count",
               "fw", "fw_one", "mixed", "percent", "r_nearest", "r_nearest_frac", "r_dp", "r_sf", "at_each",
               "call", "fdef", "convert", "convert_r", "var", "tdiv", "mixed_post", "pow_div", "mixed_pow", "div_chain", "amount_mixed", "c_divide", "amount_and_half",
               "clock", "elapsed", "elapsed_r", "elapsed_24",
               "part_unit", "rate", "rate_r", "as_much", "r_nearest_unit",
               "per_unit", "change_each", "split_r", "given", "given_r", "ask_n", "at_each_if",
               "per_unit_r", "mean_range", "remainder_after", "remainder_tight"}


def readings(tree) -> set:
    """All readings of a parse forest (a lark tree with `_ambig` nodes). Bounded: a subtree the forest shares
    is read once (memo by identity), and past MAX_WORK node visits the text is refused, so a hostile text's
    exponential forest costs a fixed amount of work, never its size."""
    return _readings(tree, {}, [MAX_WORK])


def _readings(tree, memo: dict, budget: list[int]):
    if isinstance(tree, Token):
        return tree
    got = memo.get(id(tree))
    if got is not None:
        return got[1]
    budget[0] -= 1
    if budget[0] < 0:
        raise Refuse("too much work")
    out = _read_node(tree, [_readings(c, memo, budget) for c in tree.children])
    memo[id(tree)] = (tree, out)  # the tree is kept alive beside its id, so the id is never reused
    return out


def _read_node(tree, kids):
    data = tree.data
    if data == "_ambig":
        out = set().union(*[k for k in kids if isinstance(k, set)])
        if len(out) > MAX_READINGS:
            raise Refuse("too many readings")
        return out
    if data in ("wadd", "wmul", "post", "loosepost"):
        return tree
    if data == "implicit":
        kids = [k if not isinstance(k, Token) else
                {(rt.num(Fraction(k.value)), None)} if k.type == "NUM" else {(rt.VAR, None)} if k.type == "VAR"
                else k for k in kids]
    keep = data in _WANT_TOKEN
    args = [k for k in kids if isinstance(k, (set, Tree)) or (keep and k.type in _KEEP_TOKENS)
            or (data in ("convert", "convert_r") and k.type == "UNIT")]
    if data in ("start", "ask", "equation_q", "functions_q", "rounding"):
        return _top(data, args)
    f = M.get(data)
    if f is None:
        if len(args) == 1 and isinstance(args[0], set):
            return args[0]
        raise Refuse(f"no meaning for {data}")
    return _combine(f, args, data)


def _combine(f, args, data) -> set:
    pools = [a if isinstance(a, set) else [a] for a in args]
    out = set()
    for combo in itertools.product(*pools):
        if data == "round" and isinstance(combo[1], tuple) and combo[1][1] == "unit":
            combo = _round_unit(combo[0], combo[1][0])
            if combo is None:
                continue
        elif data == "round":
            combo = (combo[0], combo[1] if not (isinstance(combo[1], tuple) and combo[1][1] == "sf")
                     else _sig_unit(combo[0][0], combo[1][0]))
        got = f(*combo)
        if got is not None:
            out.add(got)
    if len(out) > MAX_READINGS:
        raise Refuse("too many readings")
    return out


def _top(data, args) -> set:
    if data == "rounding":
        raise Refuse("unreachable")
    pools = [a for a in args if isinstance(a, set)]
    out = set()
    if data == "start" or data == "ask":
        for p in pools:
            out |= {(r, "ask") if data == "ask" else r for r in p}
        return out
    if data == "equation_q":
        for r in (r for p in pools for r in p if r[1] == "eq"):
            lhs, rhs = r[0]
            if lhs == rt.VAR and not rt.has_var(rhs) or rhs == rt.VAR and not rt.has_var(lhs):
                out.add((_solved(rhs if lhs == rt.VAR else lhs), "ask"))  # "what number is 5 + 3": 5 + 3
            elif rt.has_var(lhs) or rt.has_var(rhs):
                out.add((r, "q"))
        return out
    defs_pool = [p for p in pools if any(r[1] == "defs" for r in p)]
    call_pool = [p for p in pools if p not in defs_pool]
    for d in (defs_pool[0] if defs_pool else ()):
        names = [name for name, _ in d[0]]
        for c in (call_pool[0] if call_pool else ()):
            if len(set(names)) != len(names) or any(f"F{n}(" not in c[0][1] for n in names):
                continue  # a function defined twice, or one never used: words unaccounted for
            got = _resolve(c[0], dict(d[0]), 0)
            if got is not None:
                out.add(((got, None), "ask"))
    return out


def _resolve(t, defs, depth):
    if depth > 8:
        return None
    if t[0] == "F":
        if t[2] not in defs:
            return None
        arg = _resolve(t[3], defs, depth + 1)
        return None if arg is None else rt.substitute(defs[t[2]], arg)
    if t[0] in ("n", "v"):
        return t
    kids = [_resolve(a, defs, depth + 1) for a in rt.args(t)]
    return None if None in kids else rt.rebuild(t[0], kids)
