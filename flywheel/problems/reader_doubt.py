"""Token patterns writers group two ways, refused before parsing (no key): the grammar reads each text every way
it can, but where English leaves the grouping of word operators open (conventions differ from writer to writer,
not from parse to parse) only a refusal is sound. Each rule names its pattern and an example."""

from __future__ import annotations

_ADD_WORDS = {"PLUS", "MINUS", "LESS", "TAKE", "MORETHAN", "LESSTHAN", "ADDED", "SUBTRACTED", "INCREASED", "DECREASED"}
_MUL_WORDS = {"TIMES", "DIVBY", "OVER"}
_UNARY = {"NEGATIVE", "OPPOSITE", "RECIPROCAL", "ABSOLUTE", "SQRT", "CBRT", "TWICE", "DOUBLE", "TRIPLE", "HALVE",
          "SQUARE", "CUBE", "NEGATE", "SQUARED", "CUBED", "DOUBLED", "TRIPLED", "HALVED"}
_REVERSED = {"MORETHAN", "LESSTHAN", "ADDED", "SUBTRACTED", "INCREASED", "DECREASED"}
_OPERAND_END = {"NUM", "RP", "VAR", "UNIT", "IDIOM", "PCT", "FRACN", "FRAC1", "SQUARED", "CUBED"}


def _mixed_words(toks) -> bool:
    """Word operators beside an operator of another precedence level ("two plus three times four", "2 * 3
    plus 4", "3 times 4 more than 2"), a word power beside any operator ("2 to the power of 3 plus 1"), or
    an operator after a word division ("8 divided by 2 times 4"): writers group these either way."""
    kinds = [t.type for t in toks]
    adds = {k for i, k in enumerate(kinds) if k in _ADD_WORDS or k == "PLUSS"
            or (k == "DASH" and i and kinds[i - 1] in _OPERAND_END)}
    muls = {k for k in kinds if k in _MUL_WORDS or k in ("STAR", "SLASH")}
    words = bool(adds & _ADD_WORDS or muls & _MUL_WORDS)
    if "POWW" in kinds and (adds or muls):
        return True
    if {"OFF", "TIP"} & set(kinds) and _UNARY & set(kinds):
        return True  # "the negative of 15% off 18.9": the negative of the percent, or of the price
    if sum(k in _REVERSED for k in kinds) + bool(adds & {"PLUS", "MINUS", "LESS"} and adds & _REVERSED) > 1:
        return True  # "2 less than 5 less than 9", "a more than b reduced by c": chained reversed words
    after_div = [k for k in kinds[next((i for i, k in enumerate(kinds) if k in ("DIVBY", "OVER")), len(kinds)) + 1:]]
    return (words and bool(adds) and bool(muls)) or any(k in _MUL_WORDS or k in ("STAR", "SLASH") for k in after_div)


# a word or sign that takes an operand on its right ("twice 3", "the square of 3", "-3", "negative 3")
_PREFIX = {"TWICE", "DOUBLE", "TRIPLE", "HALVE", "SQUARE", "CUBE", "SQRT", "CBRT", "OPPOSITE", "RECIPROCAL",
           "ABSOLUTE", "NEGATE"}
_POSTFIX = {"SQUARED", "CUBED", "DOUBLED", "TRIPLED", "HALVED", "POWW"}
# what, standing left of a postfix word, makes its operand open: an infix operator in words, a power in words, a
# prefix word or a sign ("8 multiplied by 3 squared": 72 or 576; "-5 squared"; "a quarter to the third power
# doubled"; "twice 3 squared"; "the sum of 2 and 3 squared"; "half of 4 squared"). A symbol operator closes it:
# "4 + 3 squared" is 4 + 3^2, a postfix word binding as a written power does.
_OPENS = _ADD_WORDS | _MUL_WORDS | _PREFIX | {"MULBY", "POWW", "AND", "OF", "TO", "BY", "FROM", "INTO", "NEGATIVE", "MINUS",
                                             "TAKE", "ADD", "SUBTRACT", "MULTIPLY", "DIVIDE"}
_SYMBOL_INFIX = {"PLUSS", "STAR", "SLASH"}
_INFIX = _ADD_WORDS | _MUL_WORDS | {"MULBY", "PLUSS", "STAR", "SLASH", "TO", "BY", "FROM", "INTO"}


def _open_postfix(kinds: list[str]) -> bool:
    """A postfix word whose operand, read leftwards within its brackets and clause, meets an operator."""
    for j, k in enumerate(kinds):
        if k not in _POSTFIX:
            continue
        depth = 0
        for i in range(j - 1, -1, -1):
            t = kinds[i]
            if t == "RP":
                depth += 1
            elif t == "LP":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (t in ("SEP", "EQ") or t in _SYMBOL_INFIX
                                 or (t == "DASH" and i and kinds[i - 1] in _OPERAND_END)):
                break
            elif depth == 0 and (t in _OPENS or t == "DASH"):
                return True
    return False


_FRACTION = {"TSLASH", "FRAC1", "FRACN", "SLASH"}


def _prefix_beside_infix(kinds: list[str]) -> bool:
    """A prefix word ("twice", "the opposite of", "the negative of") with an infix operator after it, or before
    a mixed number in words: "the opposite of 4/5 added to 10", "double three and seven eighths" (2 x 31/8 or
    2 x 3 + 7/8). ("9 plus the square root of 16", "3 more than twice 5": the operand can only be 16, 5.)"""
    pre = [i for i, k in enumerate(kinds) if k in _PREFIX or (k == "NEGATIVE" and kinds[i + 1:i + 2] == ["OF"])]
    if not pre:
        return False
    after = kinds[pre[0]:]
    binary_dash = any(k == "DASH" and i and kinds[i - 1] in _OPERAND_END for i, k in enumerate(kinds) if i > pre[0])
    if binary_dash or any(k in _INFIX for k in after):
        return True
    return any(after[i:i + 2] == ["NUM", "AND"] and (after[i + 2:i + 4] in (["A", "FRAC1"], ["NUM", "FRAC1"],
                                                                            ["NUM", "FRACN"])
                                                     or after[i + 2:i + 3] == ["FRAC1"]) for i in range(len(after)))


def _fraction_relative(kinds: list[str]) -> bool:
    """A fraction as the amount of a relative change, where writers take it as a part or as a number: "1/4
    squared less than 3/5", "two thirds squared more than four", "16 reduced by (1 take away 3/6)" (the
    reader's meanings refuse a bare fraction there; these hide it inside a larger operand)."""
    for i, k in enumerate(kinds):
        if k in ("MORETHAN", "LESSTHAN") and _FRACTION & set(kinds[:i]):
            return True
        if k in ("INCREASED", "DECREASED") and _FRACTION & set(kinds[i + 1:]):
            return True
    return False


def _tight_fraction_power(kinds: list[str]) -> bool:
    """"2/5^2", "2/5**-1": the power of the fraction or of its denominator (the grammar reads both; where one
    reading drops out of a larger text, the other alone would be keyed)."""
    return any(kinds[i:i + 4] == ["NUM", "TSLASH", "NUM", "CARET"] for i in range(len(kinds)))


def doubtful(toks) -> bool:
    """A token stream with a grouping writers disagree on (see the rules above): no key."""
    kinds = [("MULBY" if t.type == "STAR" and t.value == "multiplied by" else t.type) for t in toks]
    return (_mixed_words(toks) or _open_postfix(kinds) or _prefix_beside_infix(kinds) or _fraction_relative(kinds)
            or _tight_fraction_power(kinds))
