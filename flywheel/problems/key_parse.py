"""The key reader's parse records and tables: what a reading carries, the operator phrases, the memoizing
rule decorator, and how readings are deduplicated and marked doubtful.

Owns `Parse` (a tree plus the facts the ambiguity guards need: its unparenthesized top class, whether its
chain uses word operators, reversed operands, divisions, literal fractions), the phrase tables of the
expression grammar and of commands, `_dedupe` (by key strings, so hashing never walks a tree),
`_doubt_if`/`_closed` (a doubtful reading stays, so that the text gets no key, rather than being
dropped, which could let another reading through), and `rule` (memo per (rule, position), the nesting
bound MAX_DEPTH and the readings-per-span bound MAX_ALTS).
"""

from __future__ import annotations

from typing import NamedTuple

from galahad.flywheel.problems import key_tree as T
from galahad.flywheel.problems.key_lexer import Refuse

MAX_ALTS = 300
MAX_DEPTH = 90  # nested rule computations (about 15 levels of brackets or open-scope words)


class Parse(NamedTuple):
    tree: tuple
    cls: str = "atom"  # the unparenthesized top: atom | post (tight power) | wpost (24 doubled) | pow | mul | add
    # | open (a word whose operand runs on to the right, "the negative of 2^4": never a power's base)
    word: bool = False  # its top-level chain uses a word operator
    rev: bool = False  # its top operator takes its operands in reversed order ("3 less than 8")
    div: int = 0  # its top-level product chain contains a division: 1 written `/` or `÷`, 2 in words
    frac: bool = False  # an unspaced literal fraction `3/4`: atomic next to a word operator
    kind: str = ""  # "fw": a fraction said in words ("a third"); "pct": a percentage ("15%", its tree a doubt)


def _p(*phrases: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(p.split()) for p in phrases)


# (phrase, kind, is a word operator, reversed operands)
ADD_OPS = [(p, k, w, r) for ps, k, w, r in (
    (_p("+"), "+", False, False), (_p("-"), "-", False, False),
    (_p("plus", "add", "increased by"), "+", True, False),
    (_p("minus", "less", "subtract", "take away", "decreased by", "reduced by"), "-", True, False),
    (_p("added to", "more than"), "+", True, True),
    (_p("subtracted from", "less than", "fewer than"), "-", True, True),
) for p in ps]
MUL_OPS = [(p, k, w) for ps, k, w in (
    (_p("*"), "*", False), (_p("/", "\u00f7"), "/", False),
    (_p("times", "multiplied by"), "*", True), (_p("divided by", "over"), "/", True),
) for p in ps]
POW_WORDS = _p("to the power of", "raised to the power of", "raised to", "to the power", "raised to the power")
ORD_POW = _p("to the", "raised to the")
POSTFIX = {"squared": 2, "cubed": 3, "\u00b2": 2, "\u00b3": 3}
SCALED = {"doubled": (2, 1), "tripled": (3, 1), "halved": (1, 2)}  # "24 doubled": a word, so not tight
TIGHT = ("atom", "post")
# The word operators around a symbolic fraction `3/4` (key_grammar.Grammar.frac_mode): phrases that may end
# right before it, and phrases that may start right after it.
OF_WORDS = _p("negative of", "opposite of", "additive inverse of", "reciprocal of", "multiplicative inverse of",
              "square root of", "cube root of", "fourth root of", "absolute value of")
WORD_OPS_BEFORE = ({p for p, _, w, _ in ADD_OPS if w} | {p for p, _, w in MUL_OPS if w} | set(POW_WORDS)
                   | set(OF_WORDS))  # "the reciprocal of 4/11" is 11/4
WORD_OPS_AFTER = (WORD_OPS_BEFORE | set(ORD_POW) | {(w,) for w in POSTFIX if w.isalpha()}
                  | {(w,) for w in SCALED})
SCALE_OF = {("half", "of"): 2, ("one", "half", "of"): 2, ("a", "third", "of"): 3, ("one", "third", "of"): 3,
            ("a", "quarter", "of"): 4, ("one", "quarter", "of"): 4, ("a", "fourth", "of"): 4,
            ("one", "fourth", "of"): 4, ("one-half", "of"): 2, ("one-third", "of"): 3, ("one-quarter", "of"): 4,
            ("one-fourth", "of"): 4}
TIMES_OF = {"twice": 2, "double": 2, "triple": 3, "thrice": 3}
VAR_PHRASES = {"#what": _p("what number", "which number"), "#a": _p("a number", "the number")}


def _pkey(item: tuple[int, Parse]) -> tuple:
    e, p = item
    return e, p.tree[1], p.cls, p.word, p.rev, p.div, p.frac, p.kind


def _dedupe(items, keyf=_pkey):
    """Items in order, without repeats; compared by `keyf` (key strings: hashing never walks a tree)."""
    seen, out = set(), []
    for it in items:
        k = keyf(it)
        if k not in seen:
            seen.add(k)
            out.append(it)
    return out


def _items_key(state: tuple) -> tuple:
    return (state[0], tuple(p.tree[1] for p in state[1]), *state[2:])


def _doubt_if(flag: bool, tree: tuple) -> tuple:
    return T.doubt(tree) if flag else tree


def _closed(p: Parse) -> tuple:
    """The tree of the LAST operand of a word construct (its right end is unmarked): an unparenthesized
    chain or power there ("multiply 2 by 3 + 4", "double 3 squared") is bracketed differently by different
    writers, so that reading is marked as doubtful (no key for the text)."""
    return p.tree if p.cls == "atom" or p.frac else T.doubt(p.tree)


def rule(fn):
    name = fn.__name__

    def wrapped(self, i):
        k = (name, i)
        self.tick()
        if k in self.memo:
            return self.memo[k]
        if self.depth >= MAX_DEPTH:
            raise Refuse("nesting too deep")
        self.memo[k] = []
        self.depth += 1
        try:
            raw = fn(self, i)
            self.tick(len(raw))  # every reading a rule returns is work too
            out = _dedupe(raw)
        finally:
            self.depth -= 1
        if len(out) > MAX_ALTS:
            raise Refuse("too many readings")
        self.memo[k] = out
        return out

    return wrapped


VERBS = {"add": "add", "sum": "add", "put": "put", "minus": "subtract", "subtract": "subtract", "take": "take",
         "multiply": "multiply", "divide": "divide", "increase": "increase", "decrease": "decrease",
         "reduce": "decrease", "cut": "decrease", "lower": "decrease", "raise": "raise", "double": "double", "triple": "triple", "halve": "halve",
         "square": "square", "cube": "cube", "negate": "negate"}  # imperative -> the action it names (Phrases.Action)
GERUNDS = {"adding": "add", "summing": "add", "putting": "put", "subtracting": "subtract", "taking": "take",
           "multiplying": "multiply", "dividing": "divide", "increasing": "increase", "decreasing": "decrease",
           "reducing": "decrease", "cutting": "decrease", "lowering": "decrease", "raising": "raise", "doubling": "double", "tripling": "triple",
           "halving": "halve", "squaring": "square", "cubing": "cube", "negating": "negate"}
UNARY_ACTIONS = {"double": lambda t: T.mul(T.num(2), t), "triple": lambda t: T.mul(T.num(3), t),
                 "halve": lambda t: T.div(t, T.num(2)), "square": lambda t: T.power(t, T.num(2)),
                 "cube": lambda t: T.power(t, T.num(3)), "negate": T.opposite}
