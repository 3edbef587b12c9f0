"""The key reader's quantities with units: conversions ("How many minutes are in 3 hours?", "Convert 3050 g
to kg", "$44.29 in cents", "How many cents are 8 quarters, 2 dimes and 6 nickels?", "Nine gross is how
many dozens?", "six score and five") and arithmetic on amounts of one unit ("$41.75 + $31.40").

Only exact, unambiguous factors within one dimension: time (seconds, minutes, hours, days, weeks; never
months or years), metric length, imperial length (inches, feet, yards, miles; never mixed with metric),
metric mass, ounces/pounds, volume (millilitres, centilitres, litres), money (cents, dollars, pennies,
nickels, dimes, quarters) and counts (dozen, score, gross, and a counted noun). A "ton" (short, long or
metric) is no unit here: no key. The key carries the mathematics: 3 hours in minutes is 3 * 60 (it joins
"3 * 60"), 7 minutes in hours is 7 / 60, 2 h 10 min in minutes is 2 * 60 + 10.

`strip_units(toks)` is the token list of an amount-only text without its unit marks when every number in
it carries the one same unit ("$41.75 + $31.40", "41.75 dollars + 31.40 dollars": 41.75 + 31.40, the
answer in that unit), else None.
"""

from __future__ import annotations

from fractions import Fraction

from galahad.flywheel.problems import key_tree as T
from galahad.flywheel.problems.key_lexer import Tok


def _names(dim: str, factor, *names: str) -> dict:
    return {n: (dim, Fraction(factor)) for n in names}


UNITS = {
    **_names("time", 1, "s", "sec", "secs", "second", "seconds"),
    **_names("time", 60, "min", "mins", "minute", "minutes"),
    **_names("time", 3600, "h", "hr", "hrs", "hour", "hours"),
    **_names("time", 86400, "day", "days"), **_names("time", 604800, "week", "weeks"),
    **_names("length", 1, "mm", "millimetre", "millimetres", "millimeter", "millimeters"),
    **_names("length", 10, "cm", "centimetre", "centimetres", "centimeter", "centimeters"),
    **_names("length", 1000, "m", "metre", "metres", "meter", "meters"),
    **_names("length", 10 ** 6, "km", "kilometre", "kilometres", "kilometer", "kilometers"),
    **_names("imperial length", 1, "inch", "inches"), **_names("imperial length", 12, "ft", "foot", "feet"),
    **_names("imperial length", 36, "yd", "yds", "yard", "yards"),
    **_names("imperial length", 63360, "mile", "miles"),
    **_names("mass", 1, "mg", "milligram", "milligrams"), **_names("mass", 1000, "g", "gram", "grams"),
    **_names("mass", 10 ** 6, "kg", "kilogram", "kilograms"), **_names("mass", 10 ** 9, "tonne", "tonnes"),
    **_names("imperial mass", 1, "oz", "ounce", "ounces"),
    **_names("imperial mass", 16, "lb", "lbs", "pound", "pounds"),
    **_names("volume", 1, "ml", "millilitre", "millilitres", "milliliter", "milliliters"),
    **_names("volume", 10, "cl", "centilitre", "centilitres", "centiliter", "centiliters"),
    **_names("volume", 1000, "l", "litre", "litres", "liter", "liters"),
    **_names("money", 1, "cent", "cents", "penny", "pennies"), **_names("money", 100, "dollar", "dollars", "$"),
    **_names("money", 5, "nickel", "nickels"), **_names("money", 10, "dime", "dimes"),
    **_names("money", 25, "quarter", "quarters"),
    **_names("count", 12, "dozen", "dozens"), **_names("count", 20, "score"), **_names("count", 144, "gross"),
}
COINS = {"penny", "pennies", "nickel", "nickels", "dime", "dimes", "quarter", "quarters"}
GENERIC = {"items", "things", "objects", "eggs", "pieces"}  # what a bare count ("half a dozen") counts
# amount-only arithmetic ("$41.75 + $31.40"): the unit marks that may be dropped (one-letter units never:
# "5 m" may be an unknown's product)
_STRIPPABLE = {n for n, (d, _) in UNITS.items() if len(n) > 1 and n not in COINS and d != "count"} | {"$"}
_SAME = {"dollar": "dollars", "$": "dollars", "cent": "cents"}


def unit_at(toks: list[Tok], i: int) -> tuple[str, str, Fraction] | None:
    """(name, dimension, factor) for a unit word at i."""
    if i >= len(toks) or toks[i].kind not in ("word",):
        return None
    got = UNITS.get(toks[i].text)
    return None if got is None else (toks[i].text, *got)


def strip_units(toks: list[Tok]) -> list[Tok] | None:
    marks, keep = set(), []
    nums = 0
    for i, t in enumerate(toks):
        if t.kind == "num":
            nums += 1
            before = i > 0 and toks[i - 1].kind == "sym" and toks[i - 1].text == "$" and not t.sp
            after = i + 1 < len(toks) and toks[i + 1].kind == "word" and toks[i + 1].text in _STRIPPABLE
            if before == after:
                return None  # a number without its unit, or with two
            mark = "$" if before else toks[i + 1].text
            marks.add(_SAME.get(mark, mark.rstrip("s") if len(mark) > 3 else mark))
    if nums == 0 or len(marks) != 1:
        return None
    for i, t in enumerate(toks):
        if t.kind == "sym" and t.text == "$":
            continue
        if t.kind == "num" and i > 0 and toks[i - 1].text == "$":
            t = t._replace(sp=True)
        if t.kind == "word" and t.text in _STRIPPABLE and i > 0 and toks[i - 1].kind == "num":
            continue
        if t.kind == "word" and (t.text in UNITS or t.text == "$"):
            return None  # a unit word elsewhere ("in cents"): a conversion, not an amount
        keep.append(t)
    return keep


def convert(parts: tuple, target: tuple) -> tuple:
    """The tree of a quantity (parts: ((number tree, unit | None, noun | None), ...)) in the target unit
    ((name, dimension, factor) or ("noun", word)); a doubt where the units do not convert exactly."""
    dims = {UNITS[u][0] if u else "count" for _, u, _ in parts}
    nouns = {n for _, _, n in parts if n}
    if len(dims) != 1 or len(nouns) > 1:
        return T.doubt(T.num(0))
    dim = dims.pop()
    if target[0] == "noun":  # how many eggs: a count in items
        if dim != "count" or (target[1] not in nouns and (nouns or target[1] not in GENERIC)):
            return T.doubt(T.num(0))
        tdim, tf = "count", Fraction(1)
    else:
        _, tdim, tf = target
        if nouns and tdim == "count":
            return T.doubt(T.num(0))  # six dozen eggs in dozens: fine, but keep the reader simple
    if tdim != dim:
        return T.doubt(T.num(0))
    terms = []
    for n, u, _ in parts:
        r = (UNITS[u][1] if u else Fraction(1)) / tf
        if r == 1:
            terms.append(n)
        elif r.denominator == 1:
            terms.append(T.mul(n, T.num(r)))
        elif r.numerator == 1:
            terms.append(T.div(n, T.num(r.denominator)))
        else:
            terms.append(T.mul(n, T.num(r.numerator), T.inv(T.num(r.denominator))))
    return terms[0] if len(terms) == 1 else T.add(*terms)


_NOT_NOUNS = {"and", "is", "are", "in", "to", "into", "as", "equals", "equal", "worth", "make", "makes", "of", "a",
              "an", "the", "how", "many", "what", "there", "be", "it", "that", "this", "thanks", "please"}


def _numbers(g, i: int) -> list[tuple[int, tuple]]:
    """Literal numbers at i (digits, decimals, words, fractions, mixed numbers), 'a'/'an' (one), 'half a/an'."""
    out = [(e, p.tree) for e, p in g.Atom(i) if p.tree[0] == "n"]
    if g.lit(i, ("a",)) or g.lit(i, ("an",)):
        out.append((i + 1, T.num(1)))
    if g.lit(i, ("half", "a")) or g.lit(i, ("half", "an")):
        out.append((i + 2, T.ratio(Fraction(1), Fraction(2))))  # as "a half" (a folded numeral)
    return out


def _part(g, i: int) -> list[tuple[int, tuple]]:
    """One 'number unit [noun]' (or '$number') at i: (end, (number tree, unit, noun))."""
    t, out = g.t, []
    if g.lit(i, ("$",)) and i + 1 < g.n and t[i + 1].kind == "num" and not t[i + 1].sp:
        return [(i + 2, (T.num(t[i + 1].value), "$", None))]
    for e, n in _numbers(g, i):
        u = unit_at(t, e)
        if u is None:
            continue
        e1 = e + 1
        ends = [(e1, n)]
        if g.lit(e1, ("and", "a", "half")) and n[2].denominator == 1:  # a dozen and a half, an hour and a half
            ends.append((e1 + 3, T.num(n[2] + Fraction(1, 2))))
        for e2, m in ends:
            out.append((e2, (m, u[0], None)))
            if u[1] == "count" and e2 < g.n and t[e2].kind == "word" and t[e2].text not in UNITS \
                    and t[e2].text not in _NOT_NOUNS and len(t[e2].text) > 2:
                out.append((e2 + 1, (m, u[0], t[e2].text)))  # six dozen eggs
    return out


def QTY(g, i: int) -> list[tuple[int, tuple]]:
    """A quantity: one or more parts of one dimension, each unit once ('2 h 10 min', '8 quarters, 2 dimes and
    6 nickels'), and for a count a last whole number below the unit ('six score and five')."""
    out, frontier = [], [(e, (p,)) for e, p in _part(g, i)]
    while frontier:
        out += frontier
        nxt = []
        for e, parts in frontier:
            g.tick()
            for sep in ((), ("and",), (",",), (",", "and")):
                e1 = g.lit(e, sep) if sep else e
                if e1 is None:
                    continue
                for e2, p in _part(g, e1):
                    if p[1] not in {q[1] for q in parts} and len(parts) < 6:
                        nxt.append((e2, parts + (p,)))
                last = parts[-1]
                if sep == ("and",) and UNITS.get(last[1], ("",))[0] == "count" and last[2] is None:
                    for e2, n in _numbers(g, e1):  # six score and five
                        if 0 < n[2] < UNITS[last[1]][1] and n[2].denominator == 1 and g.t[e1].text not in ("a", "an"):
                            nxt.append((e2, parts + ((n, None, None),)))
        frontier = nxt
    return [(e, _cap("q", parts)) for e, parts in out]


def _cap(kind: str, payload: tuple) -> tuple:
    """A frame capture (key_frames.match compares captures by their second item, a string)."""
    if kind == "q":
        text = ";".join(f"{n[1]} {u} {w}" for n, u, w in payload)
    else:
        text = " ".join(str(x) for x in payload)
    return (kind, f"{kind}:{text}", payload)


def UNIT(g, i: int) -> list[tuple[int, tuple]]:
    """A target unit at i: (name, dimension, factor), or ('noun', word) for a count ('how many eggs')."""
    u = unit_at(g.t, i)
    if u is not None:
        return [(i + 1, _cap("u", u))]
    if i < g.n and g.t[i].kind == "word" and g.t[i].text not in _NOT_NOUNS and len(g.t[i].text) > 2:
        return [(i + 1, _cap("u", ("noun", g.t[i].text)))]
    return []


def QTYC(g, i: int) -> list[tuple[int, tuple]]:
    """A count quantity whose unit is the answer's: 'six dozen', 'nine gross', 'six score and five'."""
    return [(e, q) for e, q in QTY(g, i) if all(UNITS.get(p[1], ("count",))[0] == "count" for p in q[2])]


def conversion(*caps) -> tuple:
    """The frame's tree from its captures (a quantity and a target, in either order, or a count alone)."""
    parts = next(c[2] for c in caps if c[0] == "q")
    targets = [c[2] for c in caps if c[0] == "u"]
    if targets:
        return convert(parts, targets[0])
    nouns = [p[2] for p in parts if p[2]]
    return convert(parts, ("noun", nouns[0] if nouns else "items"))
