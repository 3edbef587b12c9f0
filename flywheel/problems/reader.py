"""The reader: a text's canonical key, exact value and plain reading, sound by construction.

reader_lexer turns the text into tokens (every word accounted for), reader_grammar parses them with every
parse enumerated, reader_meaning gives each parse its readings; a text is keyed only when every reading
gives one key and a defined value (reader_tree bounds the arithmetic). Anything else: None."""

from __future__ import annotations

import re
from fractions import Fraction

from lark.exceptions import LarkError

from galahad.flywheel.problems import reader_lexicon as lx
from galahad.flywheel.problems import reader_tree as rt
from galahad.flywheel.problems.reader_doubt import doubtful
from galahad.flywheel.problems.reader_grammar import parser_for
from galahad.flywheel.problems.reader_keys import key_solution
from galahad.flywheel.problems.reader_lexer import Refuse, tokens
from galahad.flywheel.problems.reader_meaning import readings

MAX_CHARS = 300




def _in_main_unit(tree, kind):
    """An amount of money with no unit asked for: in dollars (pounds, euros) where it is in dollars or in bills
    ("$50 - 18 dollars 40 cents", "4 $20 bills + 3 $10 bills"); in cents or coins it gets no key (kind "items":
    refused below): "25 cents times 8" (200 cents or $2?), "$3 + 4 cents" ($3.04 or 304 cents?), "3 dimes + 2
    dimes" (5 dimes or 50 cents?)."""
    if kind[1] >= 1:
        return (tree if kind[1] == 1 else rt.mul(tree, rt.num(kind[1]))), None
    return tree, ("items",)


def _written(text: str) -> frozenset[str]:
    """The whole numbers written in digits in a text ("12,405" is 12405)."""
    return frozenset(str(int(d)) for d in re.findall(r"\d+", re.sub(r"(?<=\d),(?=\d{3})", "", text)))


def _key_of(reading, units: set[str], letter: bool, written: frozenset[str]) -> tuple[str, Fraction] | None:
    """A reading's key, or None. A whole number alone is no question where its digits are in the text ("x = 4",
    "what is 12,405"); it is one where they are not ("twelve thousand four hundred five", "a gross", "2.5
    million as a number")."""
    (tree, kind), frame = reading
    if kind == "solved":  # x = t: an equation to solve for a letter, else (a definition, "let f = 3 + 2",
        # or an unknown in words, "what number is 3 + 2") the question t
        if tree[1][0] == "n" and tree[1][2].denominator == 1 and (letter or str(abs(tree[1][2])) in written):
            return None  # "x = 4": the answer is in the text
        (tree, kind), frame = ((tree, "eq"), "q") if letter else ((tree[1], None), frame)
    if frame == "q":
        form = rt.equation_form(*tree)
        if form is None:
            return None
        k = f"q:{form[0]}x{form[1]:+d}"
        return k, key_solution(k)
    if isinstance(kind, tuple) and kind[0] in lx.MONEY:
        tree, kind = _in_main_unit(tree, kind)
    if kind not in (None, "w", "d") and not (isinstance(kind, tuple) and kind[0] != "items" and len(units) <= 1):
        return None
    if rt.has_var(tree) or (tree[0] == "n" and tree[2].denominator == 1 and str(abs(tree[2])) in written):
        return None
    v = rt.value(tree)
    k = "e:" + rt.key(tree)
    return (k, v) if v is not None and len(k) <= rt.MAX_KEY_CHARS else None


def key_and_value(text: str) -> tuple[str, Fraction] | None:
    """(key, value) when every reading of the text agrees, else None."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None
    try:
        toks = tokens(text)
        if not toks or doubtful(toks):
            return None
        found = readings(parser_for(frozenset(t.type for t in toks)).parse(toks))
    except (Refuse, LarkError, RecursionError, ArithmeticError, ValueError, TypeError, AttributeError):
        return None  # fail closed: a text the reader cannot finish reading has no key (an AttributeError is a
        # reading rule meeting an operand it has no meaning for: "the quotient of the cube root of 77 and 5/6")
    units = {t.value for t in toks if t.type == "UNIT"}
    keyed = set()
    kinds = {t.type for t in toks}
    equation = "VAR" in kinds and not kinds & {"LET", "GIVEN"}
    written = _written(text)
    for r in found:
        if not (isinstance(r, tuple) and len(r) == 2 and r[1] in ("ask", "q")):
            continue
        got = _key_of(r, units, equation, written)
        if got is None:
            return None
        keyed.add(got)
    return keyed.pop() if len(keyed) == 1 else None
