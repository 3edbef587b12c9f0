"""Property tests of canonical keys: random expression trees and random linear equations, rendered in
random supported phrasings, with their exact values computed here, independently of the reader.

- Soundness: a keyed text's `value` is its tree's exact value, so two texts with different values never
  share a key (also checked pairwise over each batch).
- Normal form: renderings the normal form promises to join (full or minimal brackets, glyphs, spacing,
  operand order of + and *, number words, question frames, word forms of the top operation over bracketed
  operands; for equations any side order, letter, scaling or rearrangement) get one key where keyed.
- Totality: a keyed text with meaning-bearing junk added (`!`, `%`, `mod 2`, units, `thousand`) has no key.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from galahad.flywheel.problems import canonical

SETTINGS = dict(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def words(n: int) -> str:
    if n < 20:
        return UNITS[n]
    t, u = divmod(n, 10)
    return TENS[t - 2] + ("" if u == 0 else "-" + UNITS[u])


# -- trees: ("lit", Fraction, text) | (op, a, b) for + - * / | ("^", a, k) | ("neg", a) -----------------

def _lit(draw_int, scale):
    q = Fraction(draw_int, 10 ** scale)
    text = str(Decimal(draw_int).scaleb(-scale)) if scale else str(draw_int)
    return ("lit", q, text)


lits = st.builds(_lit, st.integers(-30, 30), st.sampled_from([0, 0, 0, 1, 2]))
trees = st.recursive(
    lits,
    lambda sub: st.one_of(
        st.tuples(st.sampled_from("+-*/"), sub, sub),
        st.tuples(st.just("^"), sub, st.integers(0, 3)),
        st.tuples(st.just("neg"), sub)),
    max_leaves=6)


def exact(t):
    kind = t[0]
    if kind == "lit":
        return t[1]
    if kind == "neg":
        v = exact(t[1])
        return None if v is None else -v
    if kind == "^":
        v = exact(t[1])
        return None if v is None else v ** t[2]
    a, b = exact(t[1]), exact(t[2])
    if a is None or b is None:
        return None
    if kind == "/":
        return None if b == 0 else a / b
    return a + b if kind == "+" else a - b if kind == "-" else a * b


GLYPHS = [{"+": "+", "-": "-", "*": "*", "/": "/", "^": "^"},
          {"+": "+", "-": "\u2212", "*": "\u00d7", "/": "\u00f7", "^": "**"},
          {"+": "+", "-": "-", "*": "\u00b7", "/": "/", "^": "^"}]
PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "neg": 3, "^": 4, "lit": 5}


def _nonneg_lit(t) -> bool:
    return t[0] == "lit" and t[1] >= 0


def lit_text(t, use_words: bool) -> str:
    q = t[1]
    if use_words and q.denominator == 1 and 0 <= q < 100:
        return words(int(q))
    return t[2]


def minimal(t, g, sp=" ", swap=False, use_words=False) -> str:
    """Standard precedence, brackets only where needed."""
    kind = t[0]
    if kind == "lit":
        return lit_text(t, use_words)
    if kind == "neg":
        c = t[1]
        return "-" + (minimal(c, g, sp, swap, use_words) if _nonneg_lit(c) else f"({minimal(c, g, sp, swap, use_words)})")
    if kind == "^":
        c = t[1]
        base = c[2] if _nonneg_lit(c) else f"({minimal(c, g, sp, swap, use_words)})"
        return f"{base}{g['^']}{t[2]}"
    a, b = t[1], t[2]
    if swap and kind in "+*":
        a, b = b, a
    p = PREC[kind]
    left = minimal(a, g, sp, swap, use_words)
    right = minimal(b, g, sp, swap, use_words)
    if PREC[a[0]] < p:
        left = f"({left})"
    if PREC[b[0]] < p or (PREC[b[0]] == p and kind in "-/"):
        right = f"({right})"
    return f"{left}{sp}{g[kind]}{sp}{right}"


def full(t, g) -> str:
    """Every operation bracketed."""
    kind = t[0]
    if kind == "lit":
        return t[2]
    if kind == "neg":
        return "-" + (t[1][2] if _nonneg_lit(t[1]) else f"({full(t[1], g)})")
    if kind == "^":
        return f"({full(t[1], g)}){g['^']}{t[2]}"
    return f"({full(t[1], g)} {g[kind]} {full(t[2], g)})"


def atom(t, use_words=False) -> str:
    if t[0] == "lit":
        return lit_text(t, use_words)
    return f"({minimal(t, GLYPHS[0])})"


WORD_FORMS = {
    "+": ["What is the sum of {A} and {B}?", "Add {A} and {B}.", "What is {A} plus {B}?", "What is {B} added to {A}?",
          "What is {B} more than {A}?", "What do you get when you add {A} and {B}?", "What is {A} increased by {B}?"],
    "-": ["Subtract {B} from {A}.", "What is {A} minus {B}?", "What is {B} less than {A}?", "Take {B} away from {A}.",
          "What is {A} take away {B}?", "What is {B} subtracted from {A}?", "What is {A} decreased by {B}?"],
    "*": ["What is the product of {A} and {B}?", "Multiply {A} by {B}.", "What is {A} times {B}?",
          "What is {A} multiplied by {B}?"],
    "/": ["Divide {A} by {B}.", "What is {A} divided by {B}?", "What is the quotient of {A} and {B}?"],
}
FRAMES = ["What is {e}?", "Calculate {e}.", "Compute {e}.", "Evaluate: {e}.", "{e} = ?", "Work out {e}.",
          "What is the value of {e}?", "State the final answer to the following arithmetic problem: {e} ="]


def renderings(t, pick) -> list[str]:
    out = []
    for k in range(3):
        g = GLYPHS[pick(len(GLYPHS))]
        frame = FRAMES[pick(len(FRAMES))]
        form = [minimal(t, g), full(t, g), minimal(t, g, sp="", swap=True), minimal(t, g, use_words=True)][k % 4]
        out.append(frame.format(e=form))
    if t[0] in WORD_FORMS:
        forms = WORD_FORMS[t[0]]
        out.append(forms[pick(len(forms))].format(A=atom(t[1], pick(2) == 1), B=atom(t[2], pick(2) == 1)))
    elif t[0] == "^" and t[2] == 2:
        out.append(["What is {A} squared?", "What is the square of {A}?", "Square {A}."][pick(3)].format(A=atom(t[1])))
    elif t[0] == "^":
        out.append(f"What is {atom(t[1])} to the power of {t[2]}?")
    return out


def _picker(data):
    return lambda n: data.draw(st.integers(0, n - 1))


def _check_sound(keyed: dict[str, set]):
    for k, vals in keyed.items():
        assert len(vals) == 1, (k, vals)


@settings(**SETTINGS)
@given(st.lists(trees, min_size=10, max_size=25), st.data())
def test_random_expressions_key_soundly_and_join_their_renderings(batch, data):
    pick = _picker(data)
    by_key: dict[str, set] = {}
    for t in batch:
        v = exact(t)
        keys = set()
        for text in renderings(t, pick):
            k = canonical.canonical_key(text)
            if k is None:
                continue
            assert canonical.value(k) == v, (text, k, v)
            assert canonical.value(text) == v, text
            by_key.setdefault(k, set()).add(v)
            keys.add(k)
        assert len(keys) <= 1, (t, keys)  # every keyed rendering of one tree: one key
    _check_sound(by_key)


def test_the_renderers_are_actually_keyed_most_of_the_time():
    """Guard against a vacuous property: plain renderings of small trees are keyed."""
    samples = [("+", ("lit", Fraction(3), "3"), ("lit", Fraction(-4), "-4")),
               ("/", ("-", ("lit", Fraction(7), "7"), ("lit", Fraction(1, 2), "0.5")), ("lit", Fraction(3), "3")),
               ("^", ("neg", ("lit", Fraction(2), "2")), 3),
               ("*", ("^", ("lit", Fraction(2), "2"), 2), ("neg", ("+", ("lit", Fraction(1), "1"),
                                                             ("lit", Fraction(1), "1"))))]
    for t in samples:
        texts = renderings(t, lambda n: 0) + renderings(t, lambda n: n - 1)
        keys = {canonical.canonical_key(x) for x in texts}
        assert None not in keys and len(keys) == 1, [(x, canonical.canonical_key(x)) for x in texts]


# -- linear equations -----------------------------------------------------------------------------

def term(a: int, v: str, style: int) -> str:
    if a == 1 and style == 0:
        return v
    if a == -1 and style == 0:
        return f"-{v}"
    return [f"{a}{v}", f"{a}*{v}", f"{v}*{a}" if a > 0 else f"{a}{v}"][style % 3]


def equation_texts(a: int, b: int, c: int, v: str, k: int, pick) -> list[str]:
    plus_b = f"+ {b}" if b >= 0 else (f"- {-b}" if pick(2) else f"+ {b}")
    sides = [
        f"{term(a, v, pick(3))} {plus_b} = {c}",
        f"{c} = {b} + {term(a, v, pick(3))}",
        f"{term(a, v, pick(3))} = {c} - {b}" if b >= 0 else f"{term(a, v, pick(3))} = {c} + {-b}",
        f"{term(k * a, v, 1)} + {k * b} = {k * c}",  # scaled: the same solution set
        f"{term(a, v, pick(3))} + {b} - {c} = 0",
    ]
    frames = ["Solve for {v}: {eq}", "If {eq}, what is {v}?", "Solve {eq} for {v}.", "What value of {v} satisfies {eq}?",
              "{eq}. What is {v}?", "Find {v} if {eq}.", "Determine the value of {v} that satisfies: {eq}",
              "Find the value of {v} in the equation: {eq}"]
    return [frames[pick(len(frames))].format(v=v, eq=eq) for eq in sides]


equations = st.tuples(st.integers(-12, 12).filter(bool), st.integers(-50, 50), st.integers(-50, 50),
                      st.sampled_from("xyzkmnpqtbh"), st.integers(2, 4))


@settings(**SETTINGS)
@given(st.lists(equations, min_size=10, max_size=25), st.data())
def test_random_linear_equations_key_by_solution_set(batch, data):
    pick = _picker(data)
    by_key: dict[str, set] = {}
    keyed = 0
    for a, b, c, v, k in batch:
        solution = Fraction(c - b, a)
        keys = set()
        for text in equation_texts(a, b, c, v, k, pick):
            key = canonical.canonical_key(text)
            if key is None:
                continue
            keyed += 1
            assert canonical.value(text) == solution, (text, key)
            by_key.setdefault(key, set()).add(solution)
            keys.add(key)
        assert len(keys) <= 1, (a, b, c, keys)
    _check_sound(by_key)
    assert keyed >= len(batch) * 3  # most renderings are read


# -- totality: meaning-bearing junk means no key ----------------------------------------------------

JUNK = ["{e}!", "{e}%", "{e} apples", "{e} thousand", "{e} in binary", "{e} xor 1",
        "${e}", "{e} rounded"]


@settings(**SETTINGS)
@given(trees, st.sampled_from(JUNK), st.data())
def test_meaning_bearing_junk_means_no_key(t, junk, data):
    e = minimal(t, GLYPHS[0])
    assert canonical.canonical_key("What is " + junk.format(e=e) + "?") is None


# -- fraction literals next to word operators -------------------------------------------------------
# A writer who puts a fraction `3/4` (or "three quarters", "0.5", ".5", "zero point five") next to a word
# operator means it as one number: "3/4 divided by 2/3" is 9/8, "6 divided by 2/3" is 9, "3/4 squared" is
# 9/16. Trees here have such operands, are rendered in word forms with brackets only around compound
# operands, and a keyed text must have the value computed here with every fraction as one number.

FRACTION_WORDS = {(1, 2): ["one half", "a half", "one-half"], (1, 3): ["one third", "a third"],
                  (2, 3): ["two thirds", "two-thirds"], (1, 4): ["a quarter", "one fourth"],
                  (3, 4): ["three quarters", "three fourths", "three-quarters"], (3, 5): ["three fifths"],
                  (1, 6): ["one sixth"], (7, 8): ["seven eighths"], (1, 10): ["one tenth"],
                  (9, 10): ["nine tenths"], (5, 12): ["five twelfths"], (3, 2): ["three halves"]}
DIGIT_WORDS = UNITS[:10]


def _said_decimal(q: Fraction) -> str | None:
    """'zero point five' for 0.5, 'three point two five' for 3.25 (a whole part below 20), else None."""
    whole, frac = divmod(q, 1)
    text = str(Decimal(frac.numerator) / Decimal(frac.denominator)) if frac else ""
    if q < 0 or whole >= 20 or not frac or "E" in text or len(text) > 6:
        return None
    return f"{UNITS[int(whole)]} point {' '.join(DIGIT_WORDS[int(c)] for c in text[2:])}"


def _fraction_leaf(draw):
    kind = draw(st.sampled_from(["frac", "frac", "frac", "negfrac", "int", "dec", "dot", "words", "said"]))
    if kind in ("frac", "negfrac"):
        a, b = draw(st.integers(1, 12)), draw(st.integers(2, 12))
        q = Fraction(a, b) * (-1 if kind == "negfrac" else 1)
        return ("lit", q, f"{'-' if kind == 'negfrac' else ''}{a}/{b}")
    if kind == "int":
        n = draw(st.integers(0, 12))
        return ("lit", Fraction(n), str(n))
    if kind == "words":
        (a, b), texts = draw(st.sampled_from(sorted(FRACTION_WORDS.items())))
        return ("lit", Fraction(a, b), draw(st.sampled_from(texts)))
    digits = draw(st.integers(1, 99))
    q = Fraction(digits, 100) + (draw(st.integers(0, 3)) if kind != "dot" else 0)
    text = str(Decimal(q.numerator) / Decimal(q.denominator))
    if kind == "dot":
        text = text[1:]  # .25
    elif kind == "said":
        text = _said_decimal(q) or text
    return ("lit", q, text)


fraction_leaves = st.composite(lambda draw: _fraction_leaf(draw))()
fraction_trees = st.recursive(
    fraction_leaves,
    lambda sub: st.one_of(st.tuples(st.sampled_from("+-*/"), sub, sub), st.tuples(st.just("^"), sub, st.integers(2, 3))),
    max_leaves=4)

BINARY_WORDS = {  # (template, the tree's left operand is {A})
    "+": ["{A} plus {B}", "{B} added to {A}", "{B} more than {A}", "{A} increased by {B}"],
    "-": ["{A} minus {B}", "{B} less than {A}", "{A} take away {B}", "{B} subtracted from {A}",
          "{A} decreased by {B}"],
    "*": ["{A} times {B}", "{A} multiplied by {B}"],
    "/": ["{A} divided by {B}", "{A} over {B}"],
}
RELATIVE_WORDS = {"{B} more than {A}", "{A} increased by {B}", "{B} less than {A}", "{A} decreased by {B}"}
ORDINAL = {2: "second", 3: "third"}


def said(t, pick, top=True) -> str:
    """A word rendering of a tree: compound operands in brackets, fractions and decimals bare."""
    if t[0] == "lit":
        return t[2]
    inner = [said(c, pick, False) if c[0] == "lit" else f"({said(c, pick, False)})" for c in t[1:] if isinstance(c, tuple)]
    if t[0] == "^":
        k = t[2]
        forms = [f"{inner[0]} {'squared' if k == 2 else 'cubed'}", f"{inner[0]} to the power of {k}",
                 f"{inner[0]} to the {ORDINAL[k]} power", f"{inner[0]} raised to the power of {k}"]
        return forms[pick(len(forms))]
    forms = BINARY_WORDS[t[0]]
    if t[0] in "+-" and not (t[2][0] == "lit" and t[2][1].denominator == 1 and t[2][2].lstrip("-").isdigit()):
        # "5 increased by one half", "one half more than 5": English reads a fraction there as a part of A
        # (7.5, issue 42) or either way ("by 1/2"): such a text is no rendering of 5 + 1/2
        forms = [f for f in forms if f not in RELATIVE_WORDS]
    return forms[pick(len(forms))].format(A=inner[0], B=inner[1])


def said_question(t, pick) -> str:
    e = said(t, pick)
    commands = []
    if t[0] in "*/" and all(c[0] == "lit" for c in t[1:]):
        a, b = t[1][2], t[2][2]
        commands = [f"Multiply {a} by {b}." if t[0] == "*" else f"Divide {a} by {b}."]
    if t[0] == "-" and all(c[0] == "lit" for c in t[1:]):
        commands = [f"Subtract {t[2][2]} from {t[1][2]}."]
    if t[0] == "^" and t[1][0] == "lit":
        commands = [f"Raise {t[1][2]} to the power of {t[2]}.", f"Raise {t[1][2]} to the {ORDINAL[t[2]]} power."]
    frames = ["What is {e}?", "Calculate {e}.", "What is the value of {e}?", "Compute {e}.", "{e} = ?",
              "How much is {e}?", "{e} equals what?"]
    return (frames + commands)[pick(len(frames) + len(commands))].format(e=e)


@settings(**SETTINGS)
@given(st.lists(fraction_trees, min_size=10, max_size=20), st.data())
def test_fraction_operands_next_to_word_operators_read_as_one_number(batch, data):
    pick = _picker(data)
    by_key: dict[str, set] = {}
    keyed = 0
    for t in batch:
        v = exact(t)
        for _ in range(2):
            text = said_question(t, pick)
            k = canonical.canonical_key(text)
            if k is None:
                continue
            keyed += 1
            assert canonical.value(text) == v, (text, k, canonical.value(text), v)
            by_key.setdefault(k, set()).add(v)
    _check_sound(by_key)
    assert keyed >= len(batch) // 2  # not vacuous: most of these renderings are read


@settings(**SETTINGS)
@given(fraction_leaves, fraction_leaves, st.sampled_from("+-*/^"), st.data())
def test_one_word_operator_between_two_fraction_operands_is_keyed_and_right(a, b, op, data):
    """Not vacuous: a single word operator (or power word) on plain operands is always keyed."""
    pick = _picker(data)
    t = ("^", a, 2 + pick(2)) if op == "^" else (op, a, b)
    v = exact(t)
    text = said_question(t, pick)
    if op == "^" and a[2].startswith("-") and not text.startswith("Raise"):
        assert canonical.canonical_key(text) is None, text  # -3/4 squared: (-3/4)^2 or -(3/4)^2
        return
    assert canonical.value(text) == v, (text, canonical.canonical_key(text), v)
    if v is not None:
        brackets = {"+": "+", "-": "-", "*": "*", "/": "/"}
        symbolic = (f"What is ({a[2]})^{t[2]}?" if op == "^" else f"What is ({a[2]}) {brackets[op]} ({b[2]})?")
        if all(x[2][0] in "0123456789-." for x in (a, b)):  # the same mathematics in symbols, bracketed
            assert canonical.value(symbolic) == v, symbolic
