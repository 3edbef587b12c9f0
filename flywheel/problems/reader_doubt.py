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


# a word that takes an operand on its right ("twice 3", "the square of 3", "the negative of 3"); LINEAR ones
# commute with a scaling ("twice 3 over 4" is 6/4 read either way)
_PREFIX = {"TWICE", "DOUBLE", "TRIPLE", "HALVE", "SQUARE", "CUBE", "SQRT", "CBRT", "OPPOSITE", "RECIPROCAL",
           "ABSOLUTE", "NEGATE", "NEGOF"}
_LINEAR = {"TWICE", "DOUBLE", "TRIPLE", "HALVE", "OPPOSITE", "NEGATE", "NEGOF", "ABSOLUTE", "SIGN"}
_SCALING = {"TIMES", "MULBY", "STAR", "OVER", "DIVBY", "SLASH"}
_POSTFIX = {"SQUARED", "CUBED", "DOUBLED", "TRIPLED", "HALVED", "POWW"}
# what, standing left of a postfix word, makes its operand open: an infix operator in words, a power in words, a
# prefix word or a sign ("8 multiplied by 3 squared": 72 or 576; "-5 squared"; "a quarter to the third power
# doubled"; "twice 3 squared"; "the sum of 2 and 3 squared"; "half of 4 squared"). A symbol operator closes it:
# "4 + 3 squared" is 4 + 3^2, a postfix word binding as a written power does. A scaling postfix ("doubled")
# meets a sign, a product or a linear prefix with one value either way ("negative 15 doubled", "8 times 3
# doubled").
_OPENS = _ADD_WORDS | _MUL_WORDS | _PREFIX | {"MULBY", "POWW", "AND", "OF", "TO", "BY", "FROM", "INTO", "SIGN"}
_SYMBOL_INFIX = {"PLUSS", "STAR", "SLASH", "BDASH"}
# an infix operator after a prefix word opens its operand ("twice 3 plus 4"); a command's "to", "by", "from" only
# close it ("divide twice 9 by 5", "take 11 away from the opposite of 5")
_INFIX = _ADD_WORDS | _MUL_WORDS | {"MULBY", "PLUSS", "STAR", "SLASH", "BDASH"}
_FRAME = {"WHAT", "IS", "HOW", "MUCH", "COLON", "SEP", "COMMA", "EQUALS", "EQ"}
# "the sum of a and b", "the quotient of a and b": "of" opens a list whose "and" closes the first operand
_LIST_PHRASE = {"SUM", "PRODUCT", "DIFFERENCE", "QUOTIENT", "MEAN", "MEDIAN", "RATIO", "MORE", "LESS", "MAXIMUM",
                "MINIMUM", "RANGE", "REMAINDER", "DISTANCE"}


def _roles(toks) -> list[str]:
    """Token types with their role where the type has two: a sign or a binary minus (SIGN, BDASH), "the
    negative of" (NEGOF), "take" as a command or an infix, "of" in a frame ("what is the value of"),
    "multiplied by" (MULBY, a word operator the grammar reads as `*`)."""
    out: list[str] = []
    for i, t in enumerate(toks):
        k, prev = t.type, (out[-1] if out else None)
        after_operand = i > 0 and toks[i - 1].type in _OPERAND_END
        if k == "STAR" and t.value == "multiplied by":
            k = "MULBY"
        elif k in ("DASH", "MINUS"):
            k = ("BDASH" if k == "DASH" else "MINUS") if after_operand else "SIGN"
        elif k == "NEGATIVE":
            k = "NEGOF" if i + 1 < len(toks) and toks[i + 1].type == "OF" else "SIGN"
        elif k == "TAKE" and not after_operand:
            k = "TAKECMD"
        elif k == "OF" and (prev is None or prev in _FRAME):
            k = "OFFRAME"
        elif k == "OF" and prev in _LIST_PHRASE:
            k = "OFLIST"
        out.append(k)
    return out


def _open_postfix(kinds: list[str]) -> bool:
    """A postfix word whose operand, read leftwards within its brackets and clause, meets an operator."""
    for j, k in enumerate(kinds):
        if k not in _POSTFIX:
            continue
        opens = _OPENS - _LINEAR - _SCALING if k in ("DOUBLED", "TRIPLED", "HALVED") else _OPENS
        depth = 0
        for i in range(j - 1, -1, -1):
            t = kinds[i]
            if t == "RP":
                depth += 1
            elif t == "LP":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (t in ("SEP", "EQ") or t in _SYMBOL_INFIX):
                break
            elif depth == 0 and t in opens:
                return True
    return False


_FRACTION = {"TSLASH", "FRAC1", "FRACN", "SLASH"}


def _prefix_beside_infix(kinds: list[str]) -> bool:
    """A prefix word ("twice", "the opposite of", "the negative of") with an infix operator after it, outside
    brackets, or a bare one ("twice", not "the cube of") just before a mixed number in words: "the opposite of
    4/5 added to 10", "double three and seven eighths" (2 x 31/8 or 2 x 3 + 7/8). ("9 plus the square root
    of 16", "3 more than twice 5", "the negative of (2 / 4)", "the cube of three and one half": the operand
    can only be 16, 5, the bracket, the mixed number.)"""
    for p, k in enumerate(kinds):
        if k not in _PREFIX:
            continue
        depth = 0
        for t in kinds[p + 1:]:
            depth += (t == "LP") - (t == "RP")
            if depth == 0 and t in _INFIX and not (k in _LINEAR and t in _SCALING):
                return True
        after = kinds[p + 1:p + 5]
        if after[:2] == ["NUM", "AND"] and (after[2:4] in (["A", "FRAC1"], ["NUM", "FRAC1"], ["NUM", "FRACN"])
                                           or after[2:3] == ["FRAC1"]):
            return True
    return False


def _fractions(kinds: list[str]) -> list[int]:
    """Where a fraction stands alone: not in a mixed number ("four and a fifth"), "half a dozen", a percent."""
    out = []
    for i, k in enumerate(kinds):
        if k not in _FRACTION:
            continue
        before, nxt = kinds[max(0, i - 2):i], kinds[i + 1:i + 3]
        if "AND" in before or nxt[:1] in (["PCT"], ["PERCENT"]) or nxt == ["A", "IDIOM"] or \
                (k == "TSLASH" and nxt[1:2] in (["PCT"], ["PERCENT"])):
            continue
        out.append(i)
    return out


def _fraction_relative(kinds: list[str]) -> bool:
    """A fraction as the amount of a relative change, where writers take it as a part or as a number: "1/4
    squared less than 3/5", "two thirds squared more than four", "16 reduced by (1 take away 3/6)" (the
    reader's meanings refuse a bare fraction there; these hide it inside a larger operand)."""
    fr = _fractions(kinds)
    for i, k in enumerate(kinds):
        if k in ("MORETHAN", "LESSTHAN") and any(f < i for f in fr):
            return True
        if k in ("INCREASED", "DECREASED") and any(f > i for f in fr):
            return True
    return False


def _tight_fraction_power(kinds: list[str]) -> bool:
    """"2/5^2", "2/5**-1": the power of the fraction or of its denominator (the grammar reads both; where one
    reading drops out of a larger text, the other alone would be keyed)."""
    return any(kinds[i:i + 4] == ["NUM", "TSLASH", "NUM", "CARET"] for i in range(len(kinds)))


def doubtful(toks) -> bool:
    """A token stream with a grouping writers disagree on (see the rules above): no key."""
    kinds = _roles(toks)
    return (_mixed_words(toks) or _open_postfix(kinds) or _prefix_beside_infix(kinds) or _fraction_relative(kinds)
            or _tight_fraction_power(kinds))
