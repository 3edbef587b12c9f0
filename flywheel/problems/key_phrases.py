"""The key reader's word constructs: noun phrases, lists and commands, as a mixin of the Grammar.

Owns "the sum/total/product of A, B and C", "the quotient of A and B", "the quotient when A is divided
by B", "the difference of/between A and B" (a - b only where a >= b, where it agrees with |a - b|, and
only for short A and B: comparing them is the one evaluation while keying), "the square/cube/Nth power
of A", "3/4 of A", "two thirds of A", "half of A", "a third of A", "twice/double/triple A", "the result
of <gerund>", and the commands and gerunds ("add A and B", "add A to B", "subtract A from B", "take A
away from B", "multiply A by B", "divide A by B", "increase A by B", "raise A to the power of B", "raise
A to the third power", "double A", ...). All of them are open-scope: their LAST operand's right end is
unmarked, so it goes through `_closed` (an unbracketed chain there makes the reading doubtful). A list
marks a whole number, 'and', a fraction ("two and a half"): a product of such a list gets no key.
"""

from __future__ import annotations

from fractions import Fraction

from galahad.flywheel.problems import key_tree as T
from galahad.flywheel.problems.key_lexer import ORDINAL_WORDS, Refuse, fraction_words
from galahad.flywheel.problems.key_parse import (
    GERUNDS,
    MAX_ALTS,
    SCALE_OF,
    TIMES_OF,
    UNARY_ACTIONS,
    VERBS,
    Parse,
    _closed,
    _dedupe,
    _doubt_if,
    _items_key,
)

MAX_COMPARED_KEY_CHARS = 64  # "the difference between A and B" is keyed only where A's and B's keys are short


class Phrases:
    """Mixed into Grammar: uses its E, lit, tick and tokens."""

    # -- noun phrases (open scope) -----------------------------------------------------------------

    def noun_phrase(self, i):
        j = i + 1 if self.lit(i, ("the",)) else i
        out = []
        for head, build in (("sum", T.add), ("total", T.add), ("product", T.mul)):
            e = self.lit(j, (head, "of"))
            if e is not None:
                out += [(e2, Parse(_doubt_if(mixed and build is T.mul,
                                             self.built(build(*(p.tree for p in items[:-1]), _closed(items[-1]))))))
                        for e2, items, mixed in self.List(e)]
        for head in ("quotient", "difference"):
            for prep in ("of", "between") if head == "difference" else ("of",):
                e = self.lit(j, (head, prep))
                if e is None:
                    continue
                for e2, items, _ in self.List(e):  # two items: "seven and a half" would be one
                    if len(items) == 2:
                        out.append((e2, Parse(self._two(head, items[0].tree, _closed(items[1])))))
        for head in ("negative", "opposite", "additive inverse"):  # the negative of 2^4: -(2^4)
            e = self.lit(j, (*head.split(), "of")) if j > i else None
            if e is not None:
                out += [(e2, Parse(T.opposite(_tight(x)), "open")) for e2, x in self.E(e)]
        for head, k in (("square root", 2), ("cube root", 3), ("fourth root", 4)):  # the square root of 49
            e = self.lit(j, (*head.split(), "of"))
            if e is not None:
                out += [(e2, Parse(T.power(_tight(x), T.num(Fraction(1, k))), "open")) for e2, x in self.E(e)]
        e = self.lit(j, ("absolute", "value", "of"))
        if e is not None:  # the absolute value of -13
            out += [(e2, Parse(T.absolute(_tight(x)), "open")) for e2, x in self.E(e)]
        for head in ("reciprocal", "multiplicative inverse"):  # the reciprocal of 4/11: 1 / (4/11)
            e = self.lit(j, (*head.split(), "of")) if j > i else None
            if e is not None:
                out += [(e2, Parse(T.div(T.num(1), _tight(x)), "open")) for e2, x in self.E(e)]
        for head in ("mean", "average", "arithmetic mean"):  # the mean of 39, 26, 49 and 4: their sum / 4
            e = self.lit(j, (*head.split(), "of")) if j > i else None
            if e is not None:
                out += [(e2, Parse(self.built(T.div(T.add(*(p.tree for p in items[:-1]), _closed(items[-1])),
                                                    T.num(len(items))))))
                        for e2, items, _ in self.List(e, commas=True)]
        for head, k in (("square", 2), ("cube", 3)):
            e = self.lit(j, (head, "of"))
            if e is not None:
                out += [(e2, Parse(T.power(_closed(x), T.num(k)))) for e2, x in self.E(e)]
        e = self.lit(j, ("quotient", "of"))
        if e is not None:  # the quotient of A divided by B
            for e1, a in self.E(e):
                e2 = self.lit(e1, ("divided", "by"))
                if e2 is not None:
                    out += [(e3, Parse(self.quotient(a.tree, _closed(b)))) for e3, b in self.E(e2)]
        e = self.lit(j, ("quotient", "when"))
        if e is not None:  # the quotient when A is divided by B
            for e1, a in self.E(e):
                e2 = self.lit(e1, ("is", "divided", "by"))
                if e2 is not None:
                    out += [(e3, Parse(self.quotient(a.tree, _closed(b)))) for e3, b in self.E(e2)]
        if j > i and j + 1 < self.n and self.lit(j + 1, ("power", "of")):  # the 3rd power of A
            n = self.ordinal(j)
            if n is not None:
                out += [(e2, Parse(T.power(_closed(x), T.num(n)))) for e2, x in self.E(j + 3)]
        if (j == i and i + 3 < self.n and self.t[i].kind == "num" and self.lit(i + 1, ("/",))
                and self.t[i + 2].kind == "num" and not self.t[i + 1].sp and not self.t[i + 2].sp
                and self.lit(i + 3, ("of",))):  # 3/4 of A
            # 2^3/4 of 8, 1/3/4 of 8: a symbol before it binds into the fraction
            f = self.t[i].value / self.t[i + 2].value if self.t[i + 2].value else None
            doubtful = self.frac_mode(i)[1] == "sym" or f is None
            out += [(e2, Parse(_doubt_if(doubtful, T.part_of(f, _closed(x)) if f is not None else T.VAR)))
                    for e2, x in self.E(i + 4)]
        if (j == i and i + 2 < self.n and self.t[i].kind == "num"
                and (self.lit(i + 1, ("%", "of")) or self.lit(i + 1, ("percent", "of")))):  # 15% of 60
            f = self.t[i].value / 100
            out += [(e2, Parse(T.part_of(f, _closed(x)))) for e2, x in self.E(i + 3)]
        e = self.lit(j, ("result", "of"))
        if e is not None and j > i:
            out += [(e2, Parse(tree)) for e2, tree in self.Action(e, gerund=True)]
        if j == i:
            for e1, a, b in fraction_words(self.t, i):  # two thirds of A, one fifth of A (as "a third of A")
                e = self.lit(e1, ("of",))
                if e is not None:
                    out += [(e2, Parse(T.part_of(Fraction(a, b), _closed(x)))) for e2, x in self.E(e)]
            for phrase, k in SCALE_OF.items():
                e = self.lit(i, phrase)
                if e is not None:
                    out += [(e2, Parse(T.div(_closed(x), T.num(k)))) for e2, x in self.E(e)]
            k = TIMES_OF.get(self.t[i].text) if self.t[i].kind == "word" else None
            if k is not None:
                out += [(e2, Parse(T.mul(T.num(k), _closed(x)))) for e2, x in self.E(i + 1)]
        return out

    def value_of(self, t: tuple):
        """T.value, with the values of subtrees kept for this text and every new one ticked: the readings
        of "the difference between A and B" share their subtrees, so evaluating them all is ~linear."""
        before = len(self._values)
        v = T.value(t, None, self._values)
        self.tick(1 + len(self._values) - before)
        return v

    def ordinal(self, i: int):
        """The power an ordinal at i names ('third', '3rd'), or None."""
        if i >= self.n:
            return None
        tok = self.t[i]
        return tok.value if tok.kind == "ord" else ORDINAL_WORDS.get(tok.text) if tok.kind == "word" else None

    def quotient(self, a: tuple, b: tuple) -> tuple:
        """'the quotient of a and b': a / b, but for whole a and b that b does not divide school books mean
        the whole-number quotient (62 and 4: 15, remainder 2) and others the exact one (15.5): a doubt.
        Like "the difference", only for short operands (comparing them is an evaluation)."""
        if len(a[1]) + len(b[1]) > MAX_COMPARED_KEY_CHARS:
            return T.doubt(T.div(a, b))
        va, vb = self.value_of(a), self.value_of(b)
        if va is None or vb is None or vb == 0:
            return T.doubt(T.div(a, b))
        inexact = va.denominator == 1 and vb.denominator == 1 and va % vb != 0
        return _doubt_if(inexact, T.div(a, b))

    def _two(self, head: str, a: tuple, b: tuple) -> tuple:
        if head == "quotient":
            return self.quotient(a, b)
        # 'the difference of/between a and b': a - b or |a - b|; only where both readings agree (a >= b),
        # and only for small operands: comparing them is the one evaluation while keying, and stays cheap
        if len(a[1]) + len(b[1]) > MAX_COMPARED_KEY_CHARS:
            return T.doubt(T.sub(a, b))
        va, vb = self.value_of(a), self.value_of(b)
        return _doubt_if(va is None or vb is None or va < vb, T.sub(a, b))

    def List(self, i, commas: bool = False):
        """Every reading of 'A and B', 'A, B and C', 'A, B, and C', 'A and B and C' (two or more items), as
        (end, items, mixed). `mixed`: a whole number, 'and', then a fraction ("two and a half", "2 and 1/2")
        where a list of three or more items could also be read with a mixed number as one item: the
        product of two and a half and four is 4 as a list, 10 as 2 1/2 * 4 (no key for products)."""
        states, done = [(e, (p,), "start", False) for e, p in self.E(i)], []
        while states:
            nxt = []
            for pos, items, mode, mixed in states:
                self.tick()
                seps = []
                if mode in ("start", "comma") and self.lit(pos, (",", "and")):
                    seps.append((pos + 2, "last"))
                elif mode in ("start", "comma") and self.lit(pos, (",",)):
                    seps.append((pos + 1, "comma"))
                if self.lit(pos, ("and",)):
                    seps.append((pos + 1, "last" if mode == "comma" else "and"))
                for start, new_mode in seps:
                    for e, p in self.E(start):
                        self.tick(1 + len(items) // 8)  # the state's key holds every item's
                        prev = items[-1].tree
                        m = mixed or (self.t[start - 1].text == "and" and p.frac and prev[0] == "n"
                                      and prev[2].denominator == 1 and prev[2] >= 0)
                        state = (e, items + (p,), new_mode, m)
                        if new_mode in ("and", "last") or (commas and new_mode == "comma"):
                            done.append(state)  # commas: "the mean of 39, 26, 49, 4" too
                        if new_mode != "last":
                            nxt.append(state)
            states = _dedupe(nxt, _items_key)
            if len(states) + len(done) > MAX_ALTS:
                raise Refuse("too many readings")
        return _dedupe(((e, items, mixed and len(items) >= 3) for e, items, _, mixed in done), _items_key)

    # -- commands and gerunds ("add 3 to 5", "subtracting 3 from 7") ------------------------------

    def Action(self, i, gerund: bool):
        """(end, tree) for an imperative ('add ...') or, with gerund, '-ing' form ('adding ...')."""
        if i >= self.n or self.t[i].kind != "word":
            return []
        verb = self.t[i].text
        table = GERUNDS if gerund else VERBS
        if verb not in table:
            return []
        name, out = table[verb], []
        j = i + 1
        if name == "put":
            j = self.lit(j, ("together",))
            name = "add" if j is not None else None
        if name == "add":
            j2 = self.lit(j, ("together",)) or self.lit(j, ("up",)) or j
            out += [(e, self.built(T.add(*(p.tree for p in items[:-1]), _closed(items[-1]))))
                    for e, items, _ in self.List(j2)]  # a sum is the same with "two and a half" as one item
            out += [(e, T.add(b, a)) for e, a, b in self._two_args(j, ("to",))]
        elif name is None:
            pass
        elif name == "subtract":
            out += [(e, T.sub(b, a)) for e, a, b in self._two_args(j, ("from",))]
        elif name == "take":
            out += [(e, T.sub(b, a)) for e, a, b in self._two_args(j, ("away", "from"))]
            out += [(e, T.sub(b, a)) for e, a, b in self._two_args(j, ("from",))]
            e0 = self.lit(j, ("away",))
            if e0 is not None:
                out += [(e, T.sub(b, a)) for e, a, b in self._two_args(e0, ("from",))]
        elif name == "multiply":
            out += [(e, _doubt_if(mixed, self.built(T.mul(*(p.tree for p in items[:-1]), _closed(items[-1])))))
                    for e, items, mixed in self.List(j)]
            out += [(e, T.mul(a, b)) for e, a, b in self._two_args(j, ("by",))]
        elif name == "divide":
            out += [(e, T.div(a, b)) for e, a, b in self._two_args(j, ("by",))]
        elif name in ("increase", "decrease"):
            out += self._change_by(j, 1 if name == "increase" else -1)
        elif name == "raise":
            out += self._change_by(j, 1)  # raise 60 by 5, raise 60 by a third
            for sep in (("to", "the", "power", "of"), ("to", "the", "power")):
                for e, a, b in self._two_args(j, sep):
                    out.append((e, T.power(a, b)))
            for e, a in self.E(j):  # raise 4 to the third (power), raise 4 to the 3rd power
                e1 = self.lit(e, ("to", "the"))
                n = self.ordinal(e1) if e1 is not None else None
                if n is not None:
                    self.tick()
                    out.append((e1 + 2 if self.lit(e1 + 1, ("power",)) else e1 + 1, T.power(a.tree, T.num(n))))
        else:  # double, triple, halve, square, cube
            for e, x in self.E(j):
                out.append((e, UNARY_ACTIONS[name](_closed(x))))
        return out

    # -- relative change ("increase 60 by a third" is 80, never 60 + 1/3) ----------------------------

    def _change_by(self, j: int, sign: int):
        """'A by B' after increase/decrease/reduce/raise/cut: (end, tree) for every reading."""
        out = []
        for e, a in self.E(j):
            e1 = self.lit(e, ("by",))
            if e1 is None:
                continue
            if self.lit(e1, ("half",)):  # reduce 60 by half
                out.append((e1 + 1, relative(a.tree, T.num(Fraction(1, 2)), sign)))
            for e2, b in self.E(e1):
                self.tick()
                out.append((e2, change(a.tree, b, sign, "by", self.decimal_at(e1, e2))))
        return out

    def decimal_at(self, i: int, e: int) -> bool:
        """toks[i:e] is one decimal literal (`2.5`, `-0.5`)."""
        if e == i + 2 and self.lit(i, ("-",)):
            i += 1
        return e == i + 1 and self.t[i].kind == "num" and "." in self.t[i].text

    def _two_args(self, j: int, sep: tuple[str, ...]):
        for e, a in self.E(j):
            e1 = self.lit(e, sep)
            if e1 is not None:
                for e2, b in self.E(e1):
                    self.tick()
                    yield e2, a.tree, _closed(b)




def _tight(p: Parse) -> tuple:
    """The tree of the operand of a word that takes the whole of a tight operand: a number, a bracket or a
    power ("the negative of 2^4" is -(2^4): a power binds tighter than any word); a chain is a doubt."""
    return p.tree if p.cls in ("atom", "post", "pow") or p.frac else T.doubt(p.tree)


def nonwhole(t: tuple) -> bool:
    """The tree holds a literal that is no whole number, a division or a doubt (structurally: no value)."""
    if t[0] == "n":
        return t[2].denominator != 1
    return t[0] in "/?" or any(nonwhole(a) for a in T.args(t))


def relative(a: tuple, f: tuple, sign: int) -> tuple:
    """a changed by the fraction f (a literal) of itself: a + f of a, or a - f of a (k5: written as the
    part, so "increase 75 by a third" and "75 plus a third of 75" share a key, "reduce 200 by 10%" and "200
    minus 10% of 200" too)."""
    if f[0] != "n":
        return T.doubt(T.mul(a, f))
    part = T.part_of(f[2], a)
    return T.add(a, part) if sign > 0 else T.sub(a, part)


def change(a: tuple, b, sign: int, how: str, decimal: bool = False) -> tuple:
    """a increased (sign 1) or decreased (sign -1) by the operand b (a Parse), as English means it.

    `how` is "by" (increase A by B, A increased by B) or "less" (A less B). A percentage or a fraction in
    words names a part of a ("increase 60 by a third" is 80, "60 less 10%" is 54): relative (a fraction
    in words of a non-whole a, "1/2 decreased by one half", is read both ways: a doubt). A whole
    number is an amount (60 + 5). Any other non-whole operand ("by 1/3", "less a third": 60 1/3 or 80?)
    is read both ways by writers: a doubt. A decimal literal after "by" (`decimal`: "increased by 0.5")
    stays an amount; after "less" only whole amounts do."""
    if b.kind == "pct":
        return relative(a, b.tree[2], sign)
    if b.kind == "fw" and how == "by":  # 1/2 decreased by one half: 0 or 1/4? a part of a whole number only
        return T.doubt(relative(a, b.tree, sign)) if nonwhole(a) else relative(a, b.tree, sign)
    absolute = T.add(a, b.tree) if sign > 0 else T.sub(a, b.tree)
    if nonwhole(b.tree) and not (decimal and how == "by"):
        return T.doubt(absolute)
    return absolute if b.cls == "atom" or b.frac else T.doubt(absolute)
