"""Canonical problem keys: the same mathematics in other words or notation gets the same key.

`canonical_key(text)` is `e:<tree>` for an expression to evaluate, `q:<A>x<+B>` for a one-unknown linear
equation, or None. The reader is SOUND (the same key means the same exact value, or for an equation the
same solution set), TOTAL (every word and symbol of the text is accounted for, or there is no key) and
BOUNDED (no evaluation while keying but the a >= b test of "the difference"; deterministic work limits:
key_grammar.MAX_STEPS steps for a whole text, equations' normal forms included). It is its own tokenizer
and all-parses recursive-descent parser (`key_lexer.py`, `key_parse.py`, `key_grammar.py`,
`key_phrases.py`, `key_frames.py`, `key_tree.py`): a text with two readings whose keys differ gets no key,
and so does a text with a reading marked doubtful (an ambiguity below). `value(text_or_key)` is the exact
`Fraction` the key denotes (an equation's unique solution), computed under explicit size bounds, or None.

Keys. An expression's key is its tree with `+`/`*` flattened and sorted, subtraction kept as `+(a,-(b))`,
division as `*(a,/(b))`, `-` on a literal folded into it (`-3`), number words and decimals as exact
rationals. Numerals are canonical: a division of two literals that is no whole number is the rational
it names (`1/3`, "a third", "2/6", "2 divided by 6" are `1/3`; `0.75` and `3/4` are `3/4`; as a factor
of a product it is its written division again, so `0 * (1/2)` and `0 * 1 / 2` agree), a whole quotient
stays a division ("What is 6/2?" is a question, `*(6,/(2))`), equal factors are a power (`5 * 5 * 5`,
`5^2 * 5` and "5 cubed" are `^(5,3)`; `(-3) * (-3)` is `(-3)^2`), "f of x" with a unit fraction is x / d
("1/3 of 27" = "a third of 27" = "27 / 3"). Otherwise never evaluated: `2 + 2` and `3 + 1` differ.
The question's wording is never in the key: "What is E?", "What number is E?", "Find E.", "Q: E? A:"
share E's key (an equation reading "unknown = E" beside the expression reading E is the same question).
Relative change (k4): "increase/decrease/reduce/raise/cut A by B", "A increased/decreased/reduced by
B", "A less B", "B more/less/fewer than A" read a percentage or a fraction in words B as a part of A
("increase 60 by a third" is 60 * (1 + 1/3) = 80, "60 less 10%" 54, "a third more than 60" 80, "15% of
60" 9); a fraction in digits there ("increase 60 by 1/3", "1/3 more than 60") or a fraction word after
"less" is read both ways by writers: no key; a percentage anywhere else ("60 + 10%") is no key either.
k5 reads more of what people ask: roots ("sqrt(169)", "\u221a49", "\u221b216", "the square root of 1/25",
"169^(1/2)": the power 1/k, keyed only where the value is rational and the base non-negative), LaTeX
(`$...$`, \\frac, \\sqrt, \\cdot; key_lexer.rewrite), vulgar fractions and mixed numbers ("2 7/8", "2\u215e",
"four and seven eighths": one number), |x| / abs(x), "the negative/opposite/reciprocal/absolute value of",
"negate", "the mean/average of", units and money (key_units: exact conversions within one dimension, keyed
as their mathematics, "3 hours in minutes" = 3 * 60; amounts of one unit "$4 + $3" = 4 + 3), comparisons
("how much more is A than B", A >= B only), "what percent of B is A" (the number of percent: A / B * 100),
percent increase/decrease from A to B (in its direction only), "E as a fraction" (the value), preambles
and trailers ("Quick question:", "Thanks!", ", please", "Can you ..."). "The quotient of A and B" for
whole A, B that B does not divide (15 or 15.5?) gets no key. Relative changes are keyed as their part.
Powers with a literal non-whole exponent whose value is irrational ("2 to the power of 0.5") get no key. An
equation's key is the primitive integer form A*x + B = 0 (A > 0, gcd 1) of lhs - rhs: any letter, any
arrangement, any linear rewriting with the same solution (`x + 3 = 7`, `7 = 3 + x`, `2x = 8` share one).
Non-linear equations, no or infinitely many solutions -> no key.

Read (case-insensitive; `?`/`.` at the end optional):
- numbers: digits, decimals, leading-dot decimals (`.5`, after a space, an operator or the start),
  strict thousands groups (1,234), unary minus `-3`, "minus 3", "negative 3"; words zero..nineteen, tens,
  "twenty-one"/"twenty one", "(a|one..nine) hundred [and] ...", "a thousand", "three thousand two hundred
  and five", million, billion; decimals in words ("zero point five", "three point two five": every digit
  word after "point" is taken); fractions in words as exact rationals ("a half", "one half", "one-half",
  "a quarter", "three quarters", "two thirds", "seven eighths", "five twelfths": singular after a/one,
  plural after two..nineteen; never "second"); literals of at most 30 digits.
- a symbolic fraction `3/4` (digits, unspaced) next to a word operator is ONE number: "3/4 divided by
  2/3" is (3/4)/(2/3) = 9/8, "6 divided by 2/3" is 9, "3/4 squared" is 9/16, "2 to the power of 1/2" is
  2^(1/2). Elsewhere standard precedence: `3/4^2` is 3/16, `1/2/3` is 1/6, `2^3/4` is 2 (see Refused).
- symbols: + - * / ^ ** ( ) and x (spaced, no unknown), x · ÷ − – ² ³, implicit products `2x`, `3(x+1)`.
- words: plus, add, minus, less, subtract, times, multiplied by, divided by, over, take away, increased/
  decreased/reduced by, A added to B, A subtracted from B, A more than B, A less/fewer than B (a product
  may follow: "5 more than 3 times n" is 3n + 5), squared, cubed, A doubled/tripled/halved, to the power
  (of), raised to (the power of), to the Nth/fourth (power); the sum/total/product of A, B and C, the
  quotient of A and B, the quotient of A divided by B, the quotient when A is divided by B, the difference
  of/between A and B (A >= B only, see below), the square/cube/Nth power of A, twice/double/triple/thrice
  A, (one) half of A, one-half of A, a/one third/quarter/fourth of A, 3/4 of A, two thirds / three
  quarters / one fifth of A, the result of adding/subtracting/multiplying/dividing/taking/... .
- questions: What is / What's / How much is / Calculate / Compute / Evaluate(:) / Find / Work out /
  Determine / Solve / Simplify / Give / Tell me / What (is) the value|result of / Find the result of /
  ... E; "E = ?", "E =", "E equals (what)", "E is (what)", "What is E equal to?", "What does E equal?",
  "Tell me what E is"; a bare expression; "How many times does A go into B?"; commands (optionally after
  please / can you) "Add (together) A and B", "Sum A and B", "Put together A and B", "Add A to B",
  "Subtract A from B", "Minus A from B", "Take (away) A (away) from B", "Multiply A by/and B", "Divide A by
  B", "Double / Triple / Halve / Square / Cube A", "Increase/Decrease/Reduce A by B", "Raise A to the power
  of B", "Raise A to the third (power)", optionally followed by "What is left?" / "What do you get?" / "What is the total?" or "and tell me
  the result"; "What do you get / What is left when/if you <command>?", "What do you get by <gerund>?",
  "If you <command>, what do you get?"; no-math preambles and trailers
  ("State the final answer to the following arithmetic problem:", "Solve the following multiplication:",
  "Give only the result as your final answer.").
- equations (one unknown, any letter; "=", "equals", "is equal to", and "is" after if/find): "Solve for x:
  EQ", "Solve EQ", "Solve EQ for x", "Find / Determine / What is (the value of) x if/when/given/in the
  equation/that satisfies: EQ", "If / Given / Suppose EQ, what is / find / then x (= ?)", "EQ. What is x?",
  "EQ, x = ?", a bare "EQ", "What is the solution to EQ?", "What/Which value of x satisfies/makes EQ
  (true)?", "For what value of x is EQ?", "For what value of x does A equal B?", "What must/should x be/
  equal so that/for/if EQ (to hold/to be true)?", "Let q = E. What is q?" ("Suppose q = E. What is q?"
  is read as the equation q = E: the same answer, a `q:` key),
  "What number plus 7 gives/equals/is/makes 16?", "What number, when added to / multiplied by /
  subtracted from ... 5, gives 12?", "If a number plus 3 is 7, what is the number?", "Twice a number is
  10. What is the number?".

Refused as ambiguous (no key), and why:
- "the difference of/between a and b" with a < b: a - b (school) or |a - b| (generators) disagree; with
  a >= b both readings agree, so it keys as a - b.
- word operators mixed with another precedence level without brackets ("two plus three times four",
  "2 * 3 plus 4", "2 to the power of 3 plus 1", "10 divided by 2 plus 3"): spoken precedence is
  unreliable.
- open scopes that change the value: "the product of 2 and 3 plus 4", "twice 3 plus 4", "the sum of 2 and
  3 squared"; and number words whose "and" could also join list items with a different structure
  ("the sum of one hundred and five and three").
- chained reversed words ("2 less than 5 less than 9"), any operator after a word division ("8 divided
  by 2 times 4", "8 divided by 2 * 4", "100 divided by 4 divided by 5"), implicit multiplication after a
  division or a power ("6/2(1+2)", "1/2x", "2^3(4)"), a product BEFORE a reversed word ("3 times 4 more
  than 2"), the LAST operand of a command or open word as an unbracketed chain ("multiply 2 by 3 + 4",
  "double 3 squared").
- unary minus on a power ("-3^2", "negative 2 squared", "-3/4 squared": the power_function generator
  means (-3)^2), chained powers ("2^3^2", "3 squared squared").
- a symbolic fraction whose grouping writers disagree on (key_grammar.Grammar.frac_mode): a word operator
  on one side and a symbol that binds into it on the other ("6 divided by 2/3 * 4", "2 times 3/4^2",
  "6 divided by 1/2/3"); a spaced symbol that binds into it ("1/2 / 3/4": 2/3 by its spacing, 1/24 by
  precedence; "2 ^ 3/4", "3/4 ^ 2"); `÷` next to it ("6 ÷ 2/3": 1 or 9); "2^3/4 of 8"; a slash touching
  a number word ("two/three", "6 divided by two/three").
- a mixed number read as two list items in a product ("the product of two and a half and four": 4 as a
  list, 10 as 2 1/2 * 4; "the product of 2 and 1/2 and 4"); sums are kept, the readings agree there.
k6 (key_frames.REMAINDER_FRAMES, FUNCTION_FRAMES): "f(x) = 2x + 3. What is f(4)?", "Let f(x) = x + 5 and
g(x) = 4x. What is g(f(3))?" keyed as the body with the argument substituted (the same mathematics as 2*4 + 3), and "Let a = 4. Let
b = 2*a - 3. What is b?" (one value, one definition using it) as b's definition with a substituted; "the remainder when A is divided by B", "A mod/modulo B", "A % B" (spaced
alike on both sides), "A // B", "floor(A/B)" for whole literals A >= 0, B > 0 only (`%(A,B)`, `_(A/B)`);
rounding a literal "to the nearest ten/hundredth/whole number", "to N decimal places / d.p.", "to N
significant figures / s.f." (`~(x,unit)`, exact ties refused: half up and half even disagree).
Refused as unsupported (no key): `!`, `%`/percent outside "P% of A", the relative changes and the percent
questions above, mod of negatives or fractions, functions "f(x) = ..." outside key_frames.FUNCTION_FRAMES, xor, bases and `0x10`, `1e5`,
"3 quarters", "two point five million", "three point twenty five", "10 thousand", "twelve hundred", "twenty-ten", "6 to the 2", "x" as times in an equation or
unspaced (`3x4`), commas that are not thousands groups, units outside key_units (tons, months, years,
temperatures), any instruction that changes the answer (rounding, "in binary"), inequalities, two unknowns, texts longer than
MAX_CHARS, lone surrogates, NUL. `3,500` is read as the English thousands grouping (3500), never as a
decimal comma; `1,2` and `1,2345` are refused. Note: reasoning_gym's basic_arithmetic evaluates `/` as
floor division when its divisions are inexact; here `/` is always true division.

`numbers(text)` is the multiset of numbers a problem mentions (number words included), the restriction
for the text-similarity fallback; `similarity` is that fallback's score. Torch-free, SQL-free.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from galahad.flywheel.problems import key_grammar, key_tree
from galahad.flywheel.problems.key_frames import readings
from galahad.flywheel.problems.key_lexer import Refuse, admissible, rewrite, tokenize
from galahad.flywheel.problems.reader_render import render_key

# k1: the sympy reader; k2: read "3/4 divided by 2/3" as 3/4/2/3; k3: read "increase 60 by a third" as
# 60 + 1/3 and numerals unfolded (a third != 1/3 != 0.333.., 5*5*5 != 5^3). A stored key of an older
# version is recomputed (catalog.ensure_keys), so no key of a misread text survives. k5: a relative change
# is keyed as its part ("increase 75 by a third" = 75 + 75/3, as "75 plus a third of 75"), "the quotient of
# 62 and 4" (15 or 15.5) is no longer keyed; roots, mixed numbers, LaTeX, units, remainders, rounding and
# function/variable chains are read (see the docstring). k6: remainders and mod (`%(a,b)`), integer division
# (`_(a/b)`), rounding (`~(x,unit)`), function values f(4) and chains of definitions are keyed (texts k5 left
# unkeyed are stored with no key at k5: the bump makes ensure_keys read them again).
KEY_VERSION = "k6"
MAX_KEYED_READINGS = 4  # readings with different keys compared by value before a text is refused
MAX_CHARS = 300  # checked first: a longer text is no arithmetic one-liner, no key


def _prepare(text) -> str | None:
    if not isinstance(text, str) or len(text) > MAX_CHARS or not admissible(text):
        return None
    return text.replace("\u2019", "'").lower()


def _root_power(t: tuple) -> bool:
    """A power with a literal exponent that is no whole number (a root: 2^(1/2), 8^(1/3))."""
    if t[0] == "^" and t[3][0] == "n" and t[3][2].denominator != 1:
        return True
    return any(_root_power(a) for a in key_tree.args(t))


def _reading_key(r: tuple) -> str | None:
    if r[0] == "e":
        tree = r[1]
        if (tree[0] == "n" and tree[2].denominator == 1) or key_tree.has_var(tree):
            return None  # a bare whole number is no problem to recall ("What is 6/8?" is: 3/4)
        if _root_power(tree) and key_tree.value(tree) is None:
            return None  # 2 to the power of 0.5: no rational value, so no key (49^(1/2), √49: 7, keyed)
        k = "e:" + key_tree.key(tree)
    else:
        form = key_tree.equation_form(r[1], r[2])
        if form is None:
            return None
        k = f"q:{form[0]}x{form[1]:+d}"
    return k if len(k) <= key_tree.MAX_KEY_CHARS and "?(" not in k else None


def _names_an_expression(r: tuple, exprs: set) -> bool:
    """An equation reading 'unknown = E' (either side) whose E is also read as the expression to
    evaluate: the same question, asked with a number phrase ("What number is E?" beside "What is E?")."""
    lhs, rhs = r[1], r[2]
    return (lhs == key_tree.VAR and rhs[1] in exprs) or (rhs == key_tree.VAR and lhs[1] in exprs)


def _key_of(found: dict, work: list[int]) -> tuple[str, tuple] | None:
    """The one key of a text's readings, or None (no reading, a reading without a key, two keys). The
    work counter goes on: an equation's normal form walks its trees (about one step per 16 key chars)."""
    keyed: dict = {}
    exprs = {r[1][1] for r in found.values() if r[0] == "e"}
    for r in sorted(found.values(), key=lambda r: r[0] != "e"):  # expression keys are free: first
        if r[0] == "q" and _names_an_expression(r, exprs):
            continue  # "What number is 5 less than 12?": the unknown is the expression read as well
        work[0] += 1 if r[0] == "e" else 1 + sum(len(t[1]) for t in r[1:]) // 16
        if work[0] > key_grammar.MAX_STEPS:
            work[0] = key_grammar.MAX_STEPS + 1
            return None
        keyed.setdefault(_reading_key(r), r)
        if None in keyed or len(keyed) > MAX_KEYED_READINGS:
            return None  # a reading that has none (a doubt): no key, whatever the rest are
    if len(keyed) > 1 and not _same_value(keyed, work):
        return None  # two readings that may mean different numbers
    if not keyed:
        return None
    k = min(keyed, key=lambda k: (len(k), k))
    return k, keyed[k]


def _same_value(keyed: dict, work: list[int]) -> bool:
    """Readings without a doubt whose keys differ only in how a written fraction's literals group ("3/4
    of 1/2": (3/4)*(1/2), or (3/4 of 1)/2 where 1/2 is no numeral): with every numeral written out as its
    division (key_tree.unfold) they are one tree, so one mathematics; the shortest key stands for it."""
    if not all(k.startswith("e:") for k in keyed):
        return False
    unfolded = set()
    for k in keyed:
        work[0] += 1 + len(k) // 16
        if work[0] > key_grammar.MAX_STEPS:
            work[0] = key_grammar.MAX_STEPS + 1
            return False
        unfolded.add(key_tree.key(key_tree.unfold(keyed[k][1])))
    return len(unfolded) == 1


def _work_and_key(text: str) -> tuple[int | None, tuple[str, tuple] | None]:
    t = _prepare(text)
    if t is None:
        return None, None
    try:
        toks = tokenize(rewrite(t))
    except Refuse:
        return None, None
    work = [0]
    try:
        found = readings(toks, work)
    except Refuse:
        return work[0], None
    got = _key_of(found, work)
    return work[0], got


@lru_cache(maxsize=4096)
def _read(text: str) -> tuple[str, tuple] | None:
    """(key, reading) when the text has exactly one reading key, else None."""
    return _work_and_key(text)[1]


def reader_work(text: str) -> int | None:
    """The deterministic work the reader spends on a text: grammar steps and normal-form steps (at most
    key_grammar.MAX_STEPS + 1, the step that stops it), or None when it stops before parsing (not a str,
    longer than MAX_CHARS, a character outside the whitelist, or a lexical refusal such as a literal of
    more than 30 digits or too many tokens)."""
    return _work_and_key(text)[0]


def canonical_key(text: str) -> str | None:
    """`e:<tree>` or `q:<form>` for a problem read soundly as a whole, else None. Same key = same math."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None  # before the cache, so long texts are neither hashed nor kept
    got = _read(text)
    return None if got is None else got[0]


def key_value(k: str) -> Fraction | None:
    """The exact value an `e:` key denotes, or the solution a `q:` key denotes (None if out of bounds)."""
    if not isinstance(k, str):
        return None
    if k.startswith("q:"):
        return key_tree.key_solution(k)
    tree = key_tree.parse_key(k)
    return None if tree is None else key_tree.value(tree)


def value(text_or_key: str) -> Fraction | None:
    """The exact answer of a problem text (or of a key from `canonical_key`), or None where the reader
    gives no key or the value is undefined (division by zero) or beyond the size bounds."""
    if not isinstance(text_or_key, str):
        return None
    if text_or_key.startswith(("e:", "q:")):
        v = key_value(text_or_key)
        if v is not None:
            return v
    got = _read(text_or_key) if len(text_or_key) <= MAX_CHARS else None
    return None if got is None else key_value(got[0])


@dataclass(frozen=True)
class Read:
    """What the reader made of a text: its key, the exact value (None where undefined or out of bounds)
    and the expression in plain math ("20 × 12")."""

    key: str
    value: Fraction | None
    reading: str | None


def read(text: str) -> Read | None:
    """The text's key, value and plain reading, or None when it has no key."""
    k = canonical_key(text)
    return None if k is None else Read(k, key_value(k), render_key(k))


def reading(text: str) -> str | None:
    """The expression a text is read as, in plain math ("What is a score times a dozen?" -> "12 × 20";
    an equation as "2x = 8"), or None when it has no key. A key string is accepted too."""
    if isinstance(text, str) and text.startswith(("e:", "q:")):
        got = render_key(text)
        if got is not None:
            return got
    return render_key(canonical_key(text))


# -- the similarity fallback's helpers (unchanged behaviour, except that `!` is no longer dropped) ------

_UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
          "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
WORD_VALUES = {w: i for i, w in enumerate(_UNITS)} | {w: 20 + 10 * i for i, w in enumerate(_TENS)}
_TENS_RE = "|".join(_TENS)
_WORD_RE = re.compile(rf"\b(?:({_TENS_RE})[- ]({'|'.join(_UNITS[1:10])})|({'|'.join(WORD_VALUES)}))\b")


def normalize(text: str) -> str:
    """Casefold, unify operator glyphs, spell number words as digits, trim a trailing `?`/`.`."""
    t = " ".join(text.casefold().split())
    t = (t.replace("\u00d7", "*").replace("\u22c5", "*").replace("\u00b7", "*").replace("\u00f7", "/")
         .replace("\u2212", "-").replace("\u2013", "-"))
    t = re.sub(r"(?<=\d)\s*x\s*(?=\d)", " * ", t)  # 3 x 4 (not the unknown x: digits on both sides)
    t = _WORD_RE.sub(lambda m: str(WORD_VALUES[m.group(1)] + WORD_VALUES[m.group(2)]) if m.group(1)
                     else str(WORD_VALUES[m.group(3)]), t)
    t = re.sub(r"\b(\d+) (plus|minus|times) (\d+)\b",
               lambda m: f"{m.group(1)} {dict(plus='+', minus='-', times='*')[m.group(2)]} {m.group(3)}", t)
    return t.strip().rstrip("?.").strip()


_SIGNED = re.compile(r"(?:(?<![\w).])-)?\d+(?:\.\d+)?")  # 7-3 is 7 and 3; a sign only where no operand precedes


def numbers(text: str) -> str:
    """The multiset of numbers in a problem, sorted and comma-joined ('' when there is none)."""
    found = _SIGNED.findall(normalize(text))
    return ",".join(sorted(found, key=lambda s: (float(s), s)))


def number_sequence(text: str) -> list[str]:
    return _SIGNED.findall(normalize(text))


def similarity(a: str, b: str) -> float:
    """Text similarity of two problems (normalized text, 0..1): the fallback for problems with no key."""
    return difflib.SequenceMatcher(None, normalize(a), normalize(b)).ratio()
