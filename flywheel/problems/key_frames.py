"""The key reader's question frames: the whole-sentence shapes around an expression or an equation.

Owns which sentences are questions the reader answers ("What is E?", "Calculate E.", "E = ?", "Add A and
B.", "Take A away from B. What is left?", "Solve for x: EQ", "If EQ, what is x?", "What number plus A
gives B?", ...) and `readings(toks)`: every reading of the whole token list, as ("e", tree) for an
expression to evaluate or ("q", lhs, rhs) for a one-unknown equation to solve. A frame must cover every
token; the only material it may drop is punctuation at sentence ends and a fixed list of sentences that
add no mathematics (PREAMBLES, TRAILERS, "What is left?"). Anything else a text says means no reading.
"""

from __future__ import annotations

from fractions import Fraction

from galahad.flywheel.problems import key_tree as T
from galahad.flywheel.problems.key_grammar import Grammar
from galahad.flywheel.problems.key_lexer import Tok, number_words
from galahad.flywheel.problems.key_parse import _dedupe
from galahad.flywheel.problems.key_phrases import nonwhole
from galahad.flywheel.problems.key_units import QTY, QTYC, UNIT, UNITS, conversion, strip_units

MAX_LETTERS = 3  # distinct one-letter words a text may hold and still be read as an equation


def L(*alts: str):
    """Alternatives of literal phrases ('' = nothing)."""
    phrases = [tuple(a.split()) for a in alts]
    empty = () in phrases
    table = [(ph,) for ph in phrases if ph]
    name = f"L{id(table)}"  # the phrases found at a position are looked up once per Grammar (ops_at)

    def m(g: Grammar, i: int):
        found = [(e, None) for e, _ in g.ops_at(name, table, i)]
        return [(i, None), *found] if empty else found
    return m


def E(g: Grammar, i: int):
    return [(e, p.tree) for e, p in g.E(i)]


def V(g: Grammar, i: int):
    e = g.is_var(i) if g.var is not None and len(g.var) == 1 else None
    return [] if e is None else [(e, None)]


def CMD(g: Grammar, i: int):
    return g.Action(i, gerund=False)


def GER(g: Grammar, i: int):
    return g.Action(i, gerund=True)


def EQ(*rels: str):
    rel = L(*rels)

    def m(g: Grammar, i: int):
        out = []
        for e, lhs in g.E(i):
            for e1, _ in rel(g, e):
                for e2, rhs in g.E(e1):
                    g.tick()
                    out.append((e2, (lhs.tree, rhs.tree)))
        return out
    return m


PRE = L("", "please", "state the final answer to the following arithmetic problem :",
        "solve the following multiplication :", "solve the following :", "solve the following problem :",
        "question :", "problem :", "q :", "quick question :", "quick question", "question", "hey ,", "hi ,",
        "hey", "hi")
TRAILERS = L("", "give only the result as your final answer", "only reply with the final value", "a :",
             "answer :", "thanks", "thanks !", "thank you", "thank you !", ", please", "please", ", thanks",
             ", thanks !")
END = [L("", "?", "."), TRAILERS, L("", ".")]
ASK = L("what is", "what's", "whats", "how much is", "calculate", "compute", "evaluate", "find", "work out",
        "determine", "give", "tell me", "solve", "what is the value of", "what's the value of",
        "find the value of", "calculate the value of", "compute the value of", "determine the value of",
        "give the value of", "evaluate the expression", "what is the result of", "what's the result of",
        "find the result of", "calculate the result of", "compute the result of", "what is the answer to",
        "simplify", "what number is", "which number is", "what number is equal to")
COLON = L("", ":")
SEP = L(".", ",", ";")
GET = L("what do you get", "what number do you get", "what is the result", "what's the result",
        "what is the answer", "what is left", "what's left", "how much is left", "what remains",
        "what is the total", "what is the sum", "what is the product", "what is the quotient")
POLITE = L("", "please", "can you", "could you", "now")
LEFT = L("what is left", "what's left", "how much is left", "what remains", "what do you get",
         "what is the result", "what's the result", "what is the answer", "what is the total",
         "what number do you get")
AND_TELL = L("and tell me the result", "and tell me the answer", "and give the result", "and give the answer",
             "and state the result", "and state the answer", "and write the result", "and write the answer")
AS_FRACTION = L("an improper fraction", "a fraction", "a simplified fraction", "a fraction in simplest form",
                "a fraction in lowest terms", "simplest form", "lowest terms", "a common fraction",
                "an improper fraction in simplest form", "a simple fraction")
EQF = EQ("=", "equals", "is equal to")
EQI = EQ("=", "equals", "is equal to", "is")
RELS = ("=", "equals", "is", "is equal to", "gives", "makes", "gives you", "results in", "yields", "will give")
EQN = EQ(*RELS)
ASKV = [L("", "what is", "what's", "find", "solve for", "calculate", "determine", "compute", "then", "then what is",
          "what does", "what is the value of", "what's the value of", "find the value of", "determine the value of",
          "calculate the value of", "then what is the value of", "give"), V, L("", "equal", "=")]
FIND_V = L("find", "determine", "calculate", "compute", "work out", "what is", "what's", "give", "solve for")
GIVEN = L(":", ",", "if", "when", "given", "given that", "such that", "where", "in", "in the equation",
          "that satisfies", "satisfying", "provided that", "if we know that")
ASKN = L("what is the number", "what's the number", "find the number", "what is that number",
         "find that number", "what number is it", "what is it")

MAX_COMPARED_KEY_CHARS = 64


def _compared(a: tuple, b: tuple) -> tuple | None:
    """The values of two short operands (comparing them is an evaluation: bounded like "the difference")."""
    if len(a[1]) + len(b[1]) > MAX_COMPARED_KEY_CHARS:
        return None
    va, vb = T.value(a), T.value(b)
    return None if va is None or vb is None else (va, vb)


def gap(big: tuple, small: tuple) -> tuple:
    """'How much more is A than B?': A - B where A >= B; the other way round writers answer B - A or the
    negative: a doubt."""
    v = _compared(big, small)
    return T.sub(big, small) if v is not None and v[0] >= v[1] else T.doubt(T.sub(big, small))


def percent_of(a: tuple, b: tuple) -> tuple:
    """'What percent of B is A?': the number of percent, A / B * 100."""
    return T.mul(T.div(a, b), T.num(100))


def percent_change(sign: int):
    """'The percent increase (sign 1) / decrease (-1) from A to B': |B - A| / A * 100, only in its direction."""
    def build(a: tuple, b: tuple) -> tuple:
        v = _compared(a, b)
        tree = T.mul(T.div(T.sub(b, a) if sign > 0 else T.sub(a, b), a), T.num(100))
        ok = v is not None and v[0] > 0 and (v[1] >= v[0] if sign > 0 else v[1] <= v[0])
        return tree if ok else T.doubt(tree)
    return build


def _rev(f):
    return lambda a, b: f(b, a)


MORE = L("more", "bigger", "larger", "greater", "higher")
LESS = L("less", "smaller", "lower", "fewer")
PCT = L("percent", "percentage", "%")
DOWN = L("decrease", "drop", "fall", "decline", "reduction")
UP = L("increase", "rise", "growth", "gain")
COMPARE_FRAMES = [
    (gap, [PRE, POLITE, L("how much", "by how much", "how many"), MORE, L("is", "are"), E, L("than"), E, *END]),
    (gap, [PRE, E, L("is how much", "is by how much", "is how many"), MORE, L("than"), E, *END]),
    (gap, [PRE, L("by how much", "how much"), L("does"), E, L("exceed", "go over"), E, *END]),
    (gap, [PRE, L("by how much is"), E, MORE, L("than"), E, *END]),
    (_rev(gap), [PRE, POLITE, L("how much", "by how much", "how many"), LESS, L("is", "are"), E, L("than"), E,
                 *END]),
    (_rev(gap), [PRE, E, L("is how much", "is by how much", "is how many"), LESS, L("than"), E, *END]),
    (_rev(gap), [PRE, L("by how much is"), E, LESS, L("than"), E, *END]),
    (lambda a, b: T.div(a, b), [PRE, E, L("is how many times", "is how many times as big as",
                                          "is how many times as large as", "is how many times as much as",
                                          "is how many times the size of"), E, *END]),
    (_rev(lambda a, b: T.div(a, b)), [PRE, L("how many times", "how many times as big as",
                                             "how many times as large as", "how many times as much as"), E,
                                      L("is", "is there in"), E, *END]),
    (percent_of, [PRE, POLITE, L("what"), PCT, L("is"), E, L("of"), E, *END]),
    (_rev(percent_of), [PRE, POLITE, L("what"), PCT, L("of"), E, L("is"), E, *END]),
    (percent_of, [PRE, E, L("is what"), PCT, L("of"), E, *END]),
    (percent_of, [PRE, POLITE, L("express", "write"), E, L("as a percentage of", "as a percent of"), E, *END]),
    (lambda a, b: T.div(a, b), [PRE, E, L("is what fraction of"), E, *END]),
    (_rev(lambda a, b: T.div(a, b)), [PRE, L("what fraction of"), E, L("is"), E, *END]),
    (percent_change(-1), [PRE, L("what is the", "find the", "calculate the", "what's the"), PCT, DOWN,
                          L("from"), E, L("to"), E, *END]),
    (percent_change(1), [PRE, L("what is the", "find the", "calculate the", "what's the"), PCT, UP,
                         L("from"), E, L("to"), E, *END]),
    (percent_change(-1), [PRE, E, L("drops to", "falls to", "decreases to", "goes down to", "is reduced to"), E,
                          SEP, L("what is the", "find the", "calculate the", "what's the"), PCT, DOWN, *END]),
    (percent_change(1), [PRE, E, L("rises to", "grows to", "increases to", "goes up to"), E,
                         SEP, L("what is the", "find the", "calculate the", "what's the"), PCT, UP, *END]),
    (percent_change(-1), [PRE, L("by what"), PCT, L("does"), E, L("drop to", "fall to", "decrease to",
                                                                  "go down to"), E, *END]),
    (percent_change(1), [PRE, L("by what"), PCT, L("does"), E, L("rise to", "grow to", "increase to",
                                                                 "go up to"), E, *END]),
]
HOW_MANY = L("how many", "how much")
UNIT_FRAMES = [  # (parts): a quantity converted to a unit, see key_units
    [PRE, POLITE, HOW_MANY, UNIT, L("are in", "are there in", "in", "is", "are", "is in", "is there in", "make",
                                    "make up", "are equal to", "is equal to", "equal"), QTY, L("", "worth"), *END],
    [PRE, POLITE, L("convert", "change", "express", "write", "rewrite", "turn", "put"), QTY,
     L("to", "into", "in", "as"), UNIT, *END],
    [PRE, L("", "what is", "what's"), QTY, L("in", "to", "into", "as", "converted to", "in terms of"), UNIT, *END],
    [PRE, QTY, L("= ?", "=", "= how many", "is how many", "equals how many", "is equal to how many", "are how many",
                 "makes how many", "make how many"), UNIT, *END],
    [PRE, L("what is the value in", "what is the value, in"), UNIT, L("of", ", of"), QTY, *END],
    [PRE, L("what is the value of"), QTY, L("in"), UNIT, *END],
    [PRE, L("", "what is", "what's", "what number is", "how many is", "how many are", "how much is"), QTYC,
     L("", "= ?", "=", "in all", "altogether"), *END],
]
# -- remainders, integer division, rounding (k6) --------------------------------------------------------------

def _whole_literal(t: tuple) -> bool:
    return t[0] == "n" and len(t) == 3 and t[2].denominator == 1 and t[2] >= 0


def remainder(a: tuple, b: tuple) -> tuple:
    """'The remainder when A is divided by B', 'A mod B': whole literals A >= 0, B > 0 only (for negatives
    or fractions writers' conventions differ)."""
    tree = T.mod(a, b)
    return tree if _whole_literal(a) and _whole_literal(b) and b[2] > 0 else T.doubt(tree)


def int_div(a: tuple, b: tuple) -> tuple:
    """'A // B': floor(A / B) for whole literals A >= 0, B > 0 (negatives: floor or truncation)."""
    tree = T.floor_div(T.div(a, b))
    return tree if _whole_literal(a) and _whole_literal(b) and b[2] > 0 else T.doubt(tree)


def _places(g: Grammar, i: int) -> list[tuple[int, int]]:
    """(end, n) for a small count at i: digits or a number word (0..20)."""
    tok = g.t[i] if i < g.n else None
    if tok is not None and tok.kind == "num" and tok.value is not None and tok.value.denominator == 1 \
            and "." not in tok.text and 0 <= tok.value <= 20:
        return [(i + 1, int(tok.value))]
    return [(e, v) for e, v in number_words(g.t, i) if v <= 20 and e == i + 1]


_NEAREST = {"whole number": 1, "integer": 1, "one": 1, "unit": 1, "ten": 10, "hundred": 100, "thousand": 1000,
            "ten thousand": 10 ** 4, "hundred thousand": 10 ** 5, "million": 10 ** 6, "tenth": Fraction(1, 10),
            "hundredth": Fraction(1, 100), "thousandth": Fraction(1, 1000), "10": 10, "100": 100, "1000": 1000,
            "1,000": 1000, "10,000": 10 ** 4, "1,000,000": 10 ** 6, "0.1": Fraction(1, 10),
            "0.01": Fraction(1, 100), "0.001": Fraction(1, 1000)}
_DP = [tuple(p.split()) for p in ("decimal places", "decimal place", "d . p", "d . p .", "dp", "decimal digits",
                                  "decimal digit", "places of decimals", "places after the decimal point")]
_SF = [tuple(p.split()) for p in ("significant figures", "significant figure", "sig figs", "sig fig",
                                  "s . f", "s . f .", "sf", "significant digits", "significant digit")]


def PLACES(g: Grammar, i: int):
    """What to round to, as ("dp", n) decimal places, ("sf", n) significant figures or ("u", unit)."""
    out = []
    e = g.lit(i, ("the", "nearest")) or g.lit(i, ("nearest",))
    if e is not None:
        for name, unit in _NEAREST.items():
            ph = tuple(name.split()) if name[0].isalpha() else None
            if ph is not None:
                e1 = g.lit(e, ph)
            else:
                tok = g.t[e] if e < g.n else None
                e1 = e + 1 if tok is not None and tok.kind == "num" and tok.text == name else None
            if e1 is not None:
                out.append((e1, ("u", Fraction(unit))))
        return out
    for e, n in _places(g, i):
        for kind, table in (("dp", _DP), ("sf", _SF)):
            for ph in table:
                e1 = g.lit(e, ph)
                if e1 is not None and (kind == "dp" or n > 0):
                    out.append((e1, (kind, n)))
    return out


def rounded(x: tuple, how: tuple) -> tuple:
    """x (a literal number) rounded as `how` says; an exact tie (2.5 to the nearest whole number) is refused:
    half up, half even and half away from zero disagree."""
    kind, n = how[0], how[1]
    if x[0] != "n":
        return T.doubt(x)
    v = x[2]
    if kind == "u":
        unit = n
    elif kind == "dp":
        unit = Fraction(1, 10 ** n)
    else:
        if v == 0:
            return T.doubt(x)
        e, a = 0, abs(v)
        while a >= 10:
            a, e = a / 10, e + 1
        while a < 1:
            a, e = a * 10, e - 1
        unit = Fraction(10) ** (e - n + 1)
    q = v / unit
    tree = T.round_to(x, unit)
    return T.doubt(tree) if q - (q.numerator // q.denominator) == Fraction(1, 2) else tree


def MOD_SIGN(g: Grammar, i: int):
    """`%` between two whole numbers as modulo: spaced on both sides or on neither ("17 % 5", "17%5"), never
    "17% 5" (a percentage)."""
    if i + 1 < g.n and g.t[i].kind == "sym" and g.t[i].text == "%" and g.t[i].sp == g.t[i + 1].sp:
        return [(i + 1, None)]
    return []


ASKO = L("", "what is", "what's", "calculate", "compute", "evaluate", "find", "work out", "determine", "give")
IS_WHAT = L("", "=", "= ?", "equals", "equals what", "is what", "is", "equals ?")
REM_ASK = L("what is the remainder", "what's the remainder", "find the remainder", "what remainder do you get",
            "what is the remainder left", "the remainder is", "what remains")
INT_DIV_NOTE = L("", "( integer division )", "( floor division )", "using integer division",
                 "using floor division")
ROUND_TO = L("rounded to", "rounded off to", "correct to", "to", "round to", "rounded correct to")
REMAINDER_FRAMES = [
    (remainder, [PRE, POLITE, ASKO, L("the remainder when", "the remainder if", "remainder when"), E,
                 L("is divided by"), E, *END]),
    (remainder, [PRE, POLITE, ASKO, L("the remainder of", "remainder of"), E, L("divided by", "/", "\u00f7"), E,
                 *END]),
    (remainder, [PRE, L("when", "if"), E, L("is divided by"), E, L("", ","), REM_ASK, *END]),
    (remainder, [PRE, E, L("divided by"), E, L(",", "", ";", "."), REM_ASK, *END]),
    (remainder, [PRE, POLITE, ASKO, E, L("mod", "modulo"), E, IS_WHAT, *END]),
    (remainder, [PRE, POLITE, ASKO, E, MOD_SIGN, E, IS_WHAT, *END]),
    (int_div, [PRE, POLITE, ASKO, E, L("//"), E, INT_DIV_NOTE, IS_WHAT, *END]),
    (int_div, [PRE, POLITE, ASKO, L("floor (", "the floor of ("), E, L("/", "\u00f7"), E, L(")"), *END]),
    (int_div, [PRE, POLITE, ASKO, L("the integer quotient of", "the integer part of"), E, L("divided by"), E,
               *END]),
    (rounded, [PRE, POLITE, L("round", "round off"), E, ROUND_TO, PLACES, *END]),
    (rounded, [PRE, POLITE, L("", "what is", "what's", "find", "give", "write", "express"), E, ROUND_TO, PLACES,
               *END]),
]

EXPR_FRAMES = [*COMPARE_FRAMES, *REMAINDER_FRAMES,
    [PRE, POLITE, ASK, COLON, E, *END],
    [PRE, E, L("=", "= ?", "= what", "equals", "equals what", "equals ?", "is what", "is", "is what number",
               "equals what number", "is equal to what", "is equal to what number", "= what number"), *END],
    [PRE, L("tell me what", "can you tell me what"), E, L("is", "equals"), *END],
    [PRE, E, *END],
    [PRE, L("what is", "what's"), E, L("equal to"), *END],
    [PRE, L("what does"), E, L("equal", "come to", "make"), *END],
    [PRE, GET, L("if", "when"), L("you"), CMD, *END],
    [PRE, GET, L("by"), GER, *END],
    (lambda a, b: T.div(b, a), [PRE, L("how many times does"), E, L("go into"), E, *END]),
    [PRE, L("if", "when"), L("you"), CMD, L("", ","), GET, *END],
    [PRE, POLITE, CMD, *END],
    [PRE, POLITE, CMD, L(".", ",", ";", ""), LEFT, *END],
    [PRE, POLITE, CMD, AND_TELL, *END],
    # the same number in another form: the value is the answer ("Convert 4 7/8 to an improper fraction")
    [PRE, POLITE, L("convert", "write", "express", "change", "rewrite", "put", "give", "what is", "what's"), E,
     L("as", "to", "into", "in"), AS_FRACTION, *END],
]
EQ_FRAMES = [  # (kind, parts); the unknown is the Grammar's one-letter var
    ("q", [PRE, L("solve for"), V, L("", ":", ",", "in", "in the equation", "if", "given"), COLON,
           L("", "the equation"), EQF, *END]),
    ("q", [PRE, L("solve"), L("", "the equation"), COLON, EQF, *END]),
    ("q", [PRE, EQF, *END]),
    ("q", [PRE, L("what is the solution to", "what is the solution of", "find the solution to",
                  "find the solution of", "what is the solution for"), L("", "the equation"), COLON, EQF, *END]),
    ("q", [PRE, L("solve"), L("", "the equation"), COLON, EQF, L("for"), V, *END]),
    ("q", [PRE, FIND_V, L("", "the value of"), V, GIVEN, COLON, EQI, *END]),
    ("q", [PRE, L("if", "given", "given that", "suppose", "suppose that", "assume", "assume that", "when", "let"), EQI,
           L("", ",", ".", ";"), *ASKV, *END]),
    ("q", [PRE, EQF, SEP, *ASKV, *END]),
    ("q", [PRE, L("what value of", "which value of"), V, L("satisfies", "solves", "satisfies the equation",
                                                         "solves the equation"), COLON, EQF, *END]),
    ("q", [PRE, L("what value of", "which value of"), V, L("makes"), EQF, L("", "true"), *END]),
    ("q", [PRE, L("for what value of", "for which value of"), V, L("is"), EQF, L("", "true"), *END]),
    ("q2", [PRE, L("for what value of", "for which value of"), V, L("does"), E, L("equal", "equal to"), E, *END]),
    ("q", [PRE, L("what must", "what should"), V, L("be", "equal", "be equal to"),
           L("so that", "for", "if", "such that", "to make", "in order that"), COLON, EQF,
           L("", "to hold", "to be true", "true", "hold"), *END]),
    ("e", [PRE, L("let"), V, L("=", "be"), E, SEP, L("what is", "what's", "calculate", "find", "compute",
                                                    "evaluate", "give", "determine", "what is the value of"),
           V, *END]),
]
# -- function values (k6): "f(x) = 2x + 3. What is f(4)?" ----------------------------------------------------

def _fname(g: Grammar, i: int) -> str | None:
    tok = g.t[i] if i < g.n else None
    ok = tok is not None and tok.kind == "word" and len(tok.text) == 1 and tok.text != g.var
    return tok.text if ok and g.lit(i + 1, ("(",)) is not None else None


def FDEF(g: Grammar, i: int):
    """'f(x)' where x is the Grammar's unknown: the function's name."""
    name = _fname(g, i)
    if name is None or g.is_var(i + 2) != i + 3 or g.lit(i + 3, (")",)) is None:
        return []
    return [(i + 4, ("fn", name))]


def FCALL(g: Grammar, i: int):
    """'f(4)', 'g(f(3))': (names outermost first, the argument), the argument free of the unknown."""
    name = _fname(g, i)
    if name is None:
        return []
    out = [(e + 1, (("fn", name), p.tree)) for e, p in g.E(i + 2)
           if g.lit(e, (")",)) is not None and not T.has_var(p.tree)]
    out += [(e + 1, (("fn", name + inner[0][1]), inner[1])) for e, inner in FCALL(g, i + 2)
            if g.lit(e, (")",)) is not None]
    return out


def function_value(*caps) -> tuple:
    """The body with the argument substituted, innermost call first; a name defined twice or not defined, or a
    definition that is not used, is a doubt (no key)."""
    *defs, call = caps
    bodies: dict[str, tuple] = {}
    for name, body in zip(defs[::2], defs[1::2], strict=True):
        if name[1] in bodies:
            return T.doubt(body)
        bodies[name[1]] = body
    names, tree = call[0][1], call[1]
    if any(n not in bodies for n in names) or set(bodies) != set(names):
        return T.doubt(tree)
    for n in reversed(names):
        tree = T.substitute(bodies[n], tree)
    return tree


FN_LEAD = L("", "let", "if", "given", "given that", "suppose", "suppose that", "define", "consider")
FN_SEP = L(".", ",", ";", "and", ", and")
FN_ASK = L("", "what is", "what's", "find", "calculate", "compute", "evaluate", "determine", "give", "work out",
           "what is the value of", "find the value of", "then what is", "then find")
def VNAME(g: Grammar, i: int):
    """A second one-letter name (not the Grammar's unknown): 'b' in 'Let a = 4. Let b = 2*a - 3.'"""
    tok = g.t[i] if i < g.n else None
    ok = tok is not None and tok.kind == "word" and len(tok.text) == 1 and tok.text != g.var
    return [(i + 1, ("nm", tok.text))] if ok else []


def chain_value(first: tuple, name: tuple, body: tuple, asked: tuple) -> tuple:
    """'Let a = 4. Let b = 2*a - 3. What is b?': b's definition with a's value substituted (keyed as the
    mathematics 2*4 - 3, like a function value); a first definition with an unknown in it, or a question
    about another name, is a doubt."""
    tree = T.substitute(body, first)
    return T.doubt(tree) if T.has_var(first) or name[1] != asked[1] else tree


FUNCTION_FRAMES = [
    ("e", [PRE, L("", "let", "if", "given", "given that", "suppose"), V, L("=", "equals", "be"), E,
           L(".", ",", ";", "and", ", and"), L("", "let", "and", "and let"), VNAME, L("=", "be", "equals"), E,
           L("", ".", ",", ";"), FN_ASK, VNAME, *END], chain_value),
    ("e", [PRE, FN_LEAD, FDEF, L("="), E, L("", ".", ",", ";"), FN_ASK, FCALL, *END], function_value),
    ("e", [PRE, FN_LEAD, FDEF, L("="), E, FN_SEP, FDEF, L("="), E, L("", ".", ",", ";"), FN_ASK, FCALL, *END],
     function_value),
]


def _amount(t: tuple) -> tuple:
    """'when increased by B': an amount only where B is whole ("by a third" is relative, "by 1/3" either)."""
    return T.doubt(t) if nonwhole(t) else t


COMMA_OPS = [  # what number, when added to 5, gives 12?  (the unknown, then an operation on it)
    ("added to", lambda b, c: (T.add(T.VAR, b), c)), ("increased by", lambda b, c: (T.add(T.VAR, _amount(b)), c)),
    ("multiplied by", lambda b, c: (T.mul(T.VAR, b), c)), ("divided by", lambda b, c: (T.div(T.VAR, b), c)),
    ("subtracted from", lambda b, c: (T.sub(b, T.VAR), c)),
    ("decreased by", lambda b, c: (T.sub(T.VAR, _amount(b)), c)),
    ("reduced by", lambda b, c: (T.sub(T.VAR, _amount(b)), c))]
NUMBER_FRAMES = {  # the unknown is a phrase: '#what' what/which number, '#a' a number / the number
    "#what": [("q", [PRE, EQN, *END])] + [
        ("q", [PRE, L("what number", "which number"), L(","), L("when", "if"), L(phrase), E, L(","), L(*RELS),
               E, *END], build) for phrase, build in COMMA_OPS],
    "#a": [("q", [PRE, L("if", "when", "suppose"), EQN, L("", ",", ".", ";"), ASKN, *END]),
           ("q", [PRE, EQN, SEP, ASKN, *END])],
}


def _caps_key(state: tuple) -> tuple:
    return state[0], tuple(c[1] if isinstance(c[0], str) else (c[0][1], c[1][1]) for c in state[1])


def match(g: Grammar, parts) -> list[tuple]:
    """The captures of every way `parts` read the whole token list."""
    states = [(0, ())]
    for part in parts:
        nxt = []
        for pos, caps in states:
            for e, c in part(g, pos):
                g.tick()
                nxt.append((e, caps if c is None else caps + (c,)))
        states = _dedupe(nxt, _caps_key)
        if not states:
            return []
    return [caps for e, caps in states if e == g.n]


def _phrase_in(toks: list[Tok], phrases: tuple[tuple[str, str], ...]) -> bool:
    words = [t.text if t.kind == "word" else None for t in toks]
    return any(tuple(words[i:i + 2]) in phrases for i in range(len(words) - 1))


def readings(toks: list[Tok], work: list[int] | None = None) -> dict[tuple, tuple]:
    """Every whole-text reading, by its key strings: ("e", tree) or ("q", lhs, rhs). `work` (one counter
    for every mode) ends holding the steps spent; past MAX_STEPS the reader raises Refuse."""
    work = [0] if work is None else work
    found: list[tuple] = []
    g = Grammar(toks, None, work)
    for frame in EXPR_FRAMES:
        build, parts = frame if isinstance(frame, tuple) else (lambda t: t, frame)
        found += [("e", build(*caps)) for caps in match(g, parts)]
    if any(t.kind == "word" and t.text in UNITS or t.text == "$" for t in toks):
        for parts in UNIT_FRAMES:
            found += [("e", conversion(*caps)) for caps in match(g, parts)]
        bare = strip_units(toks)
        if bare is not None:  # $41.75 + $31.40: the amounts, the answer in their one unit
            g2 = Grammar(bare, None, work)
            for frame in EXPR_FRAMES:
                build, parts = frame if isinstance(frame, tuple) else (lambda t: t, frame)
                found += [("e", build(*caps)) for caps in match(g2, parts)]
    letters = sorted({t.text for t in toks if t.kind == "word" and len(t.text) == 1})
    modes = [(v, EQ_FRAMES + FUNCTION_FRAMES) for v in letters] if len(letters) <= MAX_LETTERS else []
    if _phrase_in(toks, (("what", "number"), ("which", "number"))):
        modes.append(("#what", NUMBER_FRAMES["#what"]))
    if _phrase_in(toks, (("a", "number"), ("the", "number"))):
        modes.append(("#a", NUMBER_FRAMES["#a"]))
    for var, frames in modes:
        g = Grammar(toks, var, work)
        for frame in frames:
            kind, parts = frame[0], frame[1]
            for caps in match(g, parts):
                if len(frame) == 3:
                    caps = (frame[2](*caps),)
                found.append(("e", caps[0]) if kind == "e" else ("q", *caps[0]) if kind == "q"
                             else ("q", caps[0], caps[1]))
    return {tuple([r[0], *(t[1] for t in r[1:])]): r for r in found}
