"""The key reader's expression grammar: an all-parses, memoized recursive-descent parser over tokens.

Owns how an arithmetic expression reads, in symbols and in words. Every rule returns EVERY way it can
read a span (a list of (end, Parse)), so an English phrase with two readings yields two trees and the
caller refuses the text when their keys differ. Precedence is the standard one (powers, then unary minus,
then * / and implicit multiplication, then + -, left-associative). Where writers disagree, the reading is
kept but marked doubtful (`key_tree.doubt`: no key, and a text with a doubtful reading gets no key;
dropping it instead could let another reading through):

- a word operator (plus, times, divided by, less than, to the power of, ...) whose operand is an
  unparenthesized chain of another precedence class, or vice versa ("two plus three times four",
  "2 * 3 plus 4", "2 to the power of 3 plus 1");
- reversed word operators in a chain ("2 less than 5 less than 9"), and any operator after a word
  division ("8 divided by 2 times 4", "8 divided by 2 * 4");
- unary minus on a power ("-3^2", "negative 2 squared": the power_function generator means (-3)^2);
- chained powers ("2^3^2", "3 squared squared") and implicit multiplication after a division or a power
  ("6/2(1+2)", "1/2x");
- a symbolic fraction `a/b` whose grouping writers disagree on, and a slash touching a number word
  (`frac_mode`: next to a word operator `a/b` is one number, "3/4 divided by 2/3" is 9/8).

Open-scope words ("the sum of", "the product of", "twice", "half of", commands "multiply A by B", ...)
take any expression, so their scope ambiguity shows up as several readings, and an unbracketed chain as
their LAST operand is doubtful ("multiply 2 by 3 + 4", "double 3 squared"). Work is bounded
deterministically: every combination step ticks a counter (`MAX_STEPS`, shared by every reading of one
text; building a flattened sum or product of k terms ticks k / 8 more, a list state with k items 1 + k / 8),
a span with more than `MAX_ALTS` readings refuses, and so does nesting deeper than `MAX_DEPTH` rules
(which bounds the Python stack). The bound was set by wall clock (bench/bench_keys.py): the costliest
texts a search found take about 5 us of CPU per step, so MAX_STEPS keeps any text well under 50 ms on a
loaded machine, while normal texts take at most ~250 steps.
"""

from __future__ import annotations

from fractions import Fraction

from galahad.flywheel.problems import key_tree as T
from galahad.flywheel.problems.key_lexer import (
    Refuse,
    Tok,
    fraction_words,
    number_words,
    point_digits,
)
from galahad.flywheel.problems.key_parse import (
    ADD_OPS,
    MAX_ALTS,
    MUL_OPS,
    ORD_POW,
    POSTFIX,
    POW_WORDS,
    SCALED,
    TIGHT,
    VAR_PHRASES,
    WORD_OPS_AFTER,
    WORD_OPS_BEFORE,
    Parse,
    _dedupe,
    _doubt_if,
    rule,
)
from galahad.flywheel.problems.key_phrases import Phrases, change, nonwhole, relative

ROOT_SIGNS = {"\u221a": 2, "\u221b": 3, "\u221c": 4}
ROOT_WORDS = {"sqrt": 2, "cbrt": 3}
MAX_STEPS = 3_000  # grammar and normal-form steps for one text, every mode together (normal texts: < 300)
_SIGNS = ("-", "negative")  # unary signs between an operator and a fraction: "divided by -3/4"
_BINDS_BEFORE = ("/", "^", "\u00f7")  # symbols before `a/b` whose standard reading splits it: 6/2/3, 2^3/4
_BINDS_AFTER = ("^", "\u00b2", "\u00b3", "(")  # ... and after it: 3/4^2, 3/4\u00b2, 3/4(2)
_SAME_AFTER = ("*", "/", "\u00f7")  # after it, left to right gives what the fraction read as one number gives
_POW_OPS = [(("^",), False)] + [(p, True) for p in POW_WORDS]
_ORD_OPS = [(p,) for p in ORD_POW]
_RELATIVE_OPS = {("increased", "by"), ("decreased", "by"), ("reduced", "by"), ("less",), ("more", "than"),
                 ("less", "than"), ("fewer", "than")}


class Grammar(Phrases):
    """All readings of expressions over `toks`; `var` is the unknown's letter, '#what'/'#a' for the phrases
    'what number' / 'a number', or None (constant expressions only, and a spaced `x` means times)."""

    def __init__(self, toks: list[Tok], var: str | None = None, work: list[int] | None = None):
        self.t, self.n, self.var = toks, len(toks), var
        self.memo: dict = {}
        self.depth = 0  # rules being computed, one inside another (bounds the Python stack)
        self.work = [0] if work is None else work  # shared by every Grammar reading one text
        self._fracs: dict[int, tuple[str, str | None] | None] = {}
        self._at: dict[tuple[str, int], list] = {}  # operator phrases found at a position (see ops_at)
        self._values: dict[str, object] = {}  # subtree values for "the difference" (Phrases.value_of)

    @property
    def steps(self) -> int:
        return self.work[0]

    def built(self, tree: tuple) -> tuple:
        """`tree`, with the work of building it ticked: flattening a sum or product of k terms sorts and
        joins k keys (a chain of n terms costs about n^2 / 2 of them, not n steps)."""
        top = tree[2] if tree[0] == "?" else tree
        if top[0] in "+*":
            self.tick(len(top) // 8)
        return tree

    def tick(self, k: int = 1) -> None:
        self.work[0] += k
        if self.work[0] > MAX_STEPS:
            self.work[0] = MAX_STEPS + 1  # reader_work reports the bound crossed, not how far
            raise Refuse("work bound")

    def lit(self, i: int, phrase: tuple[str, ...]) -> int | None:
        """The end of `phrase` (words and symbols) read at i, or None."""
        if i + len(phrase) > self.n:
            return None
        for j, w in enumerate(phrase):
            tok = self.t[i + j]
            if tok.kind not in ("word", "sym") or tok.text != w:
                return None
        return i + len(phrase)

    def is_var(self, i: int) -> int | None:
        if self.var is None or i >= self.n:
            return None
        if len(self.var) == 1:
            tok = self.t[i]
            return i + 1 if tok.kind == "word" and tok.text == self.var else None
        for ph in VAR_PHRASES[self.var]:
            e = self.lit(i, ph)
            if e is not None:
                return e
        return None

    def ops_at(self, name: str, table, e: int) -> list[tuple]:
        """(end, phrase, *info) for every entry (phrase, *info) of `table` that reads at e; computed once
        per position, so trying operators after each of many readings ending at e costs no phrase tests."""
        k = (name, e)
        got = self._at.get(k)
        if got is None:
            got = []
            for entry in table:
                e1 = self.lit(e, entry[0])
                if e1 is not None:
                    got.append((e1, *entry))
            self._at[k] = got
        return got

    # -- symbolic fractions next to words -----------------------------------------------------------

    def _word_op_ends(self, j: int) -> bool:
        """A word operator ('divided by', 'times', 'to the power of', 'plus', spaced 'x') ends at token j."""
        if self.var is None and self.t[j].kind == "word" and self.t[j].text == "x" and self.t[j].sp \
                and j + 1 < self.n and self.t[j + 1].sp:
            return True
        return any(j + 1 >= len(p) and self.lit(j + 1 - len(p), p) == j + 1 for p in WORD_OPS_BEFORE)

    def _word_op_starts(self, k: int) -> bool:
        """A word operator ('divided by', 'squared', 'to the', 'doubled', 'plus', ...) starts at token k."""
        if self.var is None and self.t[k].kind == "word" and self.t[k].text == "x" and self.t[k].sp \
                and k + 1 < self.n and self.t[k + 1].sp:
            return True
        return any(self.lit(k, p) is not None for p in WORD_OPS_AFTER)

    def frac_mode(self, i: int) -> tuple[str, str | None] | None:
        """How the unspaced literal fraction `a/b` starting at token i reads, with what stands before it
        ('word', 'sym' or None); None when no such fraction starts at i.

        'fuse': one number, (a/b). Next to a word operator a writer means the fraction as a number: "3/4
        divided by 2/3" is (3/4) / (2/3) = 9/8, "6 divided by 2/3" is 9, "3/4 squared" is 9/16, "2 to the
        power of 1/2" is 2^(1/2). Standard precedence would read 3/4/2/3, 6/2/3, 3/4^2, 2^1/2.
        'std': standard precedence; only where no word operator touches it, where the symbols around it
        are unspaced too (1/2/3, 2^3/4, 3/4^2) or where both readings agree (3/4 * 2, 3/4 / 2, 1 + 3/4).
        'doubt' (the text gets no key): a word operator on one side and a symbol that binds into the
        fraction on the other ("6 divided by 2/3 * 4", "2 times 3/4^2", "6 divided by 1/2/3"); a spaced
        symbol that binds into it ("1/2 / 3/4", "2 ^ 3/4", "3/4 ^ 2": the spacing groups the fraction, the
        precedence does not); `\u00f7` right before it ("6 \u00f7 2/3")."""
        if i in self._fracs:
            return self._fracs[i]
        t, n, got = self.t, self.n, None
        if (i + 2 < n and t[i].kind == "num" and t[i + 1].kind == "sym" and t[i + 1].text == "/"
                and t[i + 2].kind == "num" and not t[i + 1].sp and not t[i + 2].sp):
            j = i - 1
            while j >= 0 and t[j].kind in ("sym", "word") and t[j].text in _SIGNS:
                j -= 1
            before = before_sp = None
            if j >= 0 and t[j].kind == "sym" and t[j].text in _BINDS_BEFORE:
                before = "sym"
                before_sp = t[j].text == "\u00f7" or any(t[k].sp for k in range(j, i + 1))
            elif j >= 0 and self._word_op_ends(j):
                before = "word"
            k, after = i + 3, None
            if k < n and t[k].kind == "sym" and t[k].text in _BINDS_AFTER:
                after = "sym-sp" if t[k].sp or (t[k].text == "^" and k + 1 < n and t[k + 1].sp) else "sym"
            elif k < n and t[k].kind == "sym" and t[k].text in _SAME_AFTER:
                after = "same"
            elif k < n and t[k].kind == "word" and len(t[k].text) == 1 and not t[k].sp:
                after = "sym"  # 3/4x: implicit multiplication binds into the fraction
            elif k < n and self._word_op_starts(k):
                after = "word"
            if "word" in (before, after):
                clash = before == "sym" or after in ("sym", "sym-sp") or (before == "word" and after == "same")
                got = ("doubt" if clash else "fuse", before)
            else:
                got = ("doubt" if before_sp or after == "sym-sp" else "std", before)
        self._fracs[i] = got
        return got

    # -- expressions ------------------------------------------------------------------------------

    def E(self, i: int) -> list[tuple[int, Parse]]:
        return self.Add(i)

    def _chain(self, i, first, steps):
        out = list(first(i))
        frontier = out
        while frontier:
            nxt = []
            for e, left in frontier:
                self.tick()
                for e2, p in steps(e, left):
                    self.tick()
                    nxt.append((e2, p))
            frontier = _dedupe(nxt)
            out += frontier
            if len(out) > MAX_ALTS:
                raise Refuse("too many readings")
        return out

    @rule
    def Add(self, i):
        def steps(e, left):
            for e1, phrase, kind, word, rev in self.ops_at("add", ADD_OPS, e):
                for e2, right in self.Mul(e1):
                    p = self._add(left, kind, word, rev, right)
                    if phrase in _RELATIVE_OPS:
                        p = self._relative(p, phrase, left, (i, e), right, (e1, e2))
                    yield e2, p
        return self._chain(i, self.Mul, steps)

    def _relative(self, p: Parse, phrase, left: Parse, lspan, right: Parse, rspan) -> Parse:
        """The additive word operators that English also uses for a relative change: "60 increased by a
        third" is 80, "60 less 10%" 54, "a third more than 60" 80, "15% more than 60" 69 (key_phrases.change).
        A fraction in digits before "more/less than" a whole number ("1/3 more than 60") is read both
        ways: a doubt; between fractions ("1/4 less than 3/4") it is an amount."""
        doubtful = p.tree[0] == "?"
        if phrase in (("increased", "by"), ("decreased", "by"), ("reduced", "by"), ("less",)):
            sign = 1 if phrase[0] == "increased" else -1
            how = "less" if phrase == ("less",) else "by"
            tree = change(left.tree, right, sign, how, self.decimal_at(*rspan))
            if how == "less" and left.cls == "add":
                tree = T.doubt(tree)  # 5 + 60 less 10%
        else:  # A more/less/fewer than B, A the part
            sign = 1 if phrase == ("more", "than") else -1
            a, b = right.tree, left.tree
            if left.cls not in TIGHT or left.word:
                return p
            if left.kind == "pct" or (left.kind == "fw" and not nonwhole(a)):
                tree = relative(a, b[2] if left.kind == "pct" else b, sign)
            elif left.kind == "fw" or (nonwhole(b) and not self.decimal_at(*lspan) and not nonwhole(a)):
                tree = T.doubt(p.tree)  # 1/3 more than 60, a quarter less than three quarters
            else:
                return p
        return p._replace(tree=T.doubt(tree) if doubtful and tree[0] != "?" else tree)

    def _add(self, left, kind, word, rev, right):
        # "5 more than 3 times 4" is 3*4 + 5 (the textbook reading): a product may follow a reversed word
        mixed = any(x.cls not in (*TIGHT, "add") and not x.frac and (word or x.word)
                    and not (x is right and rev and x.cls == "mul") for x in (left, right))
        chained_rev = left.cls == "add" and (rev or left.rev)
        a, b = (right.tree, left.tree) if rev else (left.tree, right.tree)
        tree = self.built(T.add(a, b) if kind == "+" else T.sub(a, b))  # subtraction keeps its own node
        return Parse(_doubt_if(mixed or chained_rev, tree), "add", word or (left.word and left.cls == "add"), rev)

    @rule
    def Mul(self, i):
        def steps(e, left):
            for e1, phrase, kind, word in self.ops_at("mul", self._mul_ops(e), e):
                for e2, right in self.Unary(e1):
                    frac = (phrase == ("/",) and e2 == e1 + 1 and self._literal_at(e - 1, left)
                            and self._literal_at(e1, right) and not self.t[e].sp and not self.t[e1].sp)
                    # two/three, 6/three: a slash touching a number word is no notation anyone agrees on
                    worded = phrase == ("/",) and (
                        (self.t[e - 1].kind == "word" and left.tree[0] == "n" and not self.t[e].sp)
                        or (self.t[e1].kind == "word" and right.tree[0] == "n" and not self.t[e1].sp))
                    yield e2, self._mul(left, kind, word, right, frac=frac, worded=worded)
            if self._implicit_ok(e):
                for e2, right in self.Pow(e):
                    yield e2, self._mul(left, "*", False, right, implicit=True)
        return self._chain(i, self.Unary, steps)

    def _mul_ops(self, e):
        yield from MUL_OPS
        if self.var is None and e + 1 < self.n and self.t[e].sp and self.t[e + 1].sp:
            yield ("x",), "*", True  # 4 x 3 (spaced, and only where there is no unknown)

    def _implicit_ok(self, e: int) -> bool:
        """2x, 3(x+1), (x+1)(x-1), x(2): a number or ')' then '(' or the unknown (unspaced)."""
        if e >= self.n or e == 0 or (self.var is not None and len(self.var) > 1):
            return False
        prev, nxt = self.t[e - 1], self.t[e]
        prev_ok = prev.kind == "num" or (prev.kind == "sym" and prev.text == ")")
        if nxt.kind == "sym" and nxt.text == "(":
            return prev_ok or (self.is_var(e - 1) is not None and not nxt.sp)
        return self.is_var(e) is not None and not nxt.sp and prev_ok

    def _literal_at(self, i: int, p: Parse) -> bool:
        return p.tree[0] == "n" and p.cls == "atom" and self.t[i].kind == "num"

    def _mul(self, left, kind, word, right, implicit=False, frac=False, worded=False):
        chain = left.cls == "mul"
        div = left.div if chain else 0
        doubtful = (any(x.cls not in (*TIGHT, "mul") and (word or x.word) for x in (left, right))
                    or div & 2  # 8 divided by 2 times 4, 8 divided by 2 * 4: anything after a word division
                    or worded
                    or (div and implicit)  # 6/2(1+2), 1/2x
                    or (implicit and left.cls in ("pow", "post")))  # 2^3(4)
        tree = self.built(T.mul(left.tree, right.tree) if kind == "*" else T.div(left.tree, right.tree))
        div |= (2 if word else 1) if kind == "/" else 0
        return Parse(_doubt_if(doubtful, tree), "mul", word or (chain and left.word), False, div, frac)

    @rule
    def Unary(self, i):
        out = []
        if self.lit(i, ("-",)) or self.lit(i, ("minus",)) or self.lit(i, ("negative",)):
            for e, u in self.Unary(i + 1):  # -3^2: (-3)^2 or -(3^2)? writers differ
                out.append((e, Parse(_doubt_if(u.cls in ("pow", "post"), T.neg(u.tree)))))
        return out + self.Pow(i)

    @rule
    def Pow(self, i):
        out = []
        for e, base in self.Postfix(i):
            out.append((e, base))
            self.tick()
            if base.cls == "open":
                continue  # the negative of 2^4: a power after an open word is inside its scope
            for e1, _, word in self.ops_at("pow", _POW_OPS, e):
                for e2, ex in self.Unary(e1):  # 2^3^2, 3 squared ^ 2: chained powers
                    chained = base.cls != "atom" or ex.cls in ("pow", "post")
                    out.append((e2, Parse(_doubt_if(chained, T.power(base.tree, ex.tree)), "pow", word)))
            for e1, _ in self.ops_at("ord", _ORD_OPS, e):  # to the 4th power, to the fourth power
                n = self.ordinal(e1)
                if n is None:
                    continue  # "6 to the 2": no ordinal, no power
                tree = _doubt_if(base.cls != "atom", T.power(base.tree, T.num(n)))
                end = e1 + 2 if self.lit(e1 + 1, ("power",)) else e1 + 1  # to the 4th (power)
                out.append((end, Parse(tree, "post")))
        return out

    @rule
    def Postfix(self, i):
        out = []
        for e, a in self.Atom(i):
            out.append((e, a))
            if a.cls != "atom" or e >= self.n or self.t[e].kind not in ("word", "sym"):
                continue
            w = self.t[e].text
            if w in POSTFIX:
                out.append((e + 1, Parse(T.power(a.tree, T.num(POSTFIX[w])), "post")))
            elif w in SCALED:
                k, d = SCALED[w]
                tree = T.mul(T.num(k), a.tree) if d == 1 else T.div(a.tree, T.num(d))
                out.append((e + 1, Parse(tree, "wpost", True)))
        return out

    @rule
    def Atom(self, i):
        if i >= self.n:
            return []
        tok, out = self.t[i], []
        frac = self.frac_mode(i)
        if frac is not None and frac[0] != "std":  # 3/4 as one number (see frac_mode)
            tree = T.ratio(tok.value, self.t[i + 2].value)
            out.append((i + 3, Parse(_doubt_if(frac[0] == "doubt", tree), frac=True)))
        elif tok.kind == "num":
            out.append((i + 1, Parse(T.num(tok.value))))
            out += self.mixed_digits(i)
            # 15%, 15 percent: a number only inside a construct that says what it is a percentage of
            # ("15% of 60", "increase 60 by 15%"); anywhere else ("60 + 10%": 60.1 or 66?) it is a doubt
            if self.lit(i + 1, ("%",)) or self.lit(i + 1, ("percent",)):
                out.append((i + 2, Parse(T.doubt(T.num(tok.value / 100)), kind="pct")))
        elif tok.kind == "word":
            for e, v in number_words(self.t, i):
                point = point_digits(self.t, e)  # three point two five
                out.append((e, Parse(T.num(v))) if point is None else (point[0], Parse(T.num(v + point[1]))))
            out += self.mixed_words(i)
            if tok.text in ROOT_WORDS and self.lit(i + 1, ("(",)):  # sqrt(169), cbrt(27)
                out += self.root_of(i + 1, ROOT_WORDS[tok.text])
            if tok.text == "abs" and self.lit(i + 1, ("(",)):  # abs(-13)
                out += [(e, Parse(T.absolute(a.tree))) for e, a in self.Atom(i + 1)]
            for e, a, b in fraction_words(self.t, i):  # three quarters, a half ("a half" with the unknown a: doubt)
                tree = _doubt_if(tok.text == "a" and self.var == "a", T.ratio(a, b))
                out.append((e, Parse(tree, frac=True, kind="fw")))
        e = self.is_var(i)
        if e is not None:
            out.append((e, Parse(T.VAR)))
        if self.lit(i, ("(",)):
            for e, inner in self.E(i + 1):
                if self.lit(e, (")",)):
                    out.append((e + 1, Parse(inner.tree)))
        if tok.kind == "sym" and tok.text in ROOT_SIGNS:  # √49, ∛216, ∜2401, √(81 + 144)
            out += self.root_of(i + 1, ROOT_SIGNS[tok.text])
        if tok.kind == "sym" and tok.text == "|":  # |-13|
            for e, inner in self.E(i + 1):
                if self.lit(e, ("|",)):
                    out.append((e + 1, Parse(T.absolute(inner.tree))))
        out += self.noun_phrase(i)
        return out

    def root_of(self, i: int, k: int) -> list[tuple[int, Parse]]:
        """The k-th root of the atom at i, as the power 1/k ("√49" is 49^(1/2)). Tight: never a power's base
        (√4^2 is a doubt) and never given a postfix (√4² is no reading); a number right before an unspaced
        `/` (√1/25: 1/5 or 1/25?) is a doubt."""
        out = []
        for e, a in self.Atom(i):
            slash = e < self.n and self.t[e].text == "/" and self.t[e].kind == "sym" and not self.t[e].sp
            doubtful = slash and a.tree[0] == "n" and self.t[i].kind == "num"
            out.append((e, Parse(_doubt_if(doubtful, T.power(a.tree, T.num(Fraction(1, k)))), "post")))
        return out

    def mixed_digits(self, i: int) -> list[tuple[int, Parse]]:
        """`2 7/8`: a whole number, a space, a proper fraction (unspaced slash) is the mixed number 23/8. Not
        after a `/`, `^` or a number (1/2 3/4), and a doubt before a symbol that would bind into the fraction
        (2 3/4^2, 2 3/4/5, 2 3/4(1))."""
        t, n = self.t, self.n
        if not (i + 3 < n and "." not in t[i].text and t[i + 1].kind == "num" and t[i + 1].sp
                and t[i + 2].kind == "sym" and t[i + 2].text == "/" and not t[i + 2].sp
                and t[i + 3].kind == "num" and not t[i + 3].sp and "." not in t[i + 1].text + t[i + 3].text):
            return []
        if i > 0 and t[i - 1].kind in ("num", "ord") or (t[i - 1].kind == "sym" and t[i - 1].text in "/^÷"):
            return []
        a, b = t[i + 1].value, t[i + 3].value
        if not 0 < a < b:
            return []
        k = i + 4
        binds = k < n and ((t[k].kind == "sym" and t[k].text in ("^", "/", "(", "²", "³"))
                           or (t[k].kind in ("num", "word") and not t[k].sp))
        return [(k, Parse(_doubt_if(binds, T.num(t[i].value + a / b)), frac=True))]

    def mixed_words(self, i: int) -> list[tuple[int, Parse]]:
        """"four and seven eighths", "two and a half": a whole number in words, 'and', a proper fraction in
        words is one number (in a list "the product of two and a half and four" stays a doubt: List)."""
        out = []
        for e, v in number_words(self.t, i):
            if self.lit(e, ("and",)):
                for e2, a, b in fraction_words(self.t, e + 1):
                    if a < b:
                        out.append((e2, Parse(T.num(v + Fraction(a, b)), frac=True)))
        return out
