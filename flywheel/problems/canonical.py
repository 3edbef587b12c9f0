"""Canonical problem keys: the same mathematics in other words or notation gets the same key.

`canonical_key(text)` reads a problem's operation and operands (number words, "sum of", "product of",
"difference", "subtract b from a", x / × / *, "Solve for x:", "Find x if", "If x + b = c, what is x?")
into a sympy expression parsed with `evaluate=False`, so `2 + 2` stays `2 + 2` and never becomes `4`:
the key is the problem's structure, never its answer. Arguments of commutative operations (+, *) and the
two sides of an equation are sorted, and an equation's one unknown is renamed `x`. A problem the reader
does not recognise as a whole gets no key (None): nothing is guessed from part of a sentence.

`numbers(text)` is the multiset of numbers a problem mentions (number words included), the restriction
for the text-similarity fallback; `similarity` is that fallback's score. Torch-free, SQL-free.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache

KEY_VERSION = "k1"
MAX_CHARS = 300  # longer texts are not arithmetic one-liners: no key

_UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
          "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
WORD_VALUES = {w: i for i, w in enumerate(_UNITS)} | {w: 20 + 10 * i for i, w in enumerate(_TENS)}
_TENS_RE = "|".join(_TENS)
_WORD_RE = re.compile(rf"\b(?:({_TENS_RE})[- ]({'|'.join(_UNITS[1:10])})|({'|'.join(WORD_VALUES)}))\b")
_NUMBER = r"-?\d+(?:\.\d+)?"
_N = rf"({_NUMBER})"
_EXPR_CHARS = re.compile(r"^[0-9x+\-*/^(). ]+$")

# Whole-sentence phrasings -> an expression over the captured operands ({0}, {1}). Order matters only
# where the wording does: "subtract a from b" is b - a.
_PHRASES: tuple[tuple[re.Pattern, str], ...] = tuple((re.compile(rf"^{p}$"), e) for p, e in (
    (rf"(?:what is |compute |calculate |find )?the sum of {_N} and {_N}", "({0})+({1})"),
    (rf"(?:what is |compute |calculate |find )?the product of {_N} and {_N}", "({0})*({1})"),
    (rf"(?:what is |compute |calculate |find )?the difference (?:of|between) {_N} and {_N}", "({0})-({1})"),
    (rf"(?:what is |compute |calculate |find )?the quotient of {_N} and {_N}", "({0})/({1})"),
    (rf"add {_N} and {_N}", "({0})+({1})"),
    (rf"(?:what do you get (?:if|when) you )?add {_N} to {_N}", "({1})+({0})"),
    (rf"(?:what do you get (?:if|when) you )?subtract {_N} from {_N}", "({1})-({0})"),
    (rf"(?:what do you get (?:if|when) you )?multiply {_N} (?:by|and) {_N}", "({0})*({1})"),
    (rf"(?:what do you get (?:if|when) you )?divide {_N} by {_N}", "({0})/({1})"),
    (rf"(?:what is |how much is )?{_N} subtracted from {_N}", "({1})-({0})"),
    (rf"(?:what is |how much is )?{_N} added to {_N}", "({1})+({0})"),
    (rf"(?:what is |how much is )?{_N} take away {_N}", "({0})-({1})"),
    (rf"(?:what is |how much is )?{_N} multiplied by {_N}", "({0})*({1})"),
    (rf"(?:what is |how much is )?{_N} divided by {_N}", "({0})/({1})"),
    (rf"what number plus {_N} equals {_N}", "eq:x+({0})=({1})"),
))
_ASK_EXPR = re.compile(r"^(?:what is|what's|how much is|compute|calculate|evaluate|find|work out)\s+(.+?)$")
_EXPR_ASKED = re.compile(r"^(.+?)\s*(?:=|equals|is)\s*(?:\?|what|how much)?$")
_EQ_FORMS = (
    re.compile(r"^solve for ([a-z])\s*:?\s*(.+=.+)$"),
    re.compile(r"^solve (.+=.+?) for ([a-z])$"),
    re.compile(r"^find (?:the value of )?([a-z])\s*(?:if|when|:|given)\s*(.+=.+)$"),
    re.compile(r"^(?:if|given) (.+=.+?)\s*,?\s*(?:what is|find|then)\s*(?:the value of )?([a-z])\s*(?:=\s*)?$"),
    re.compile(r"^(.+=.+?)\s*[.,]?\s*(?:what is|find)\s*([a-z])$"),
    re.compile(r"^(.+=.+?)\s*[.,]\s*([a-z])\s*=$"),
    re.compile(r"^solve\s*:?\s*(.+=.+)$"),
)


def normalize(text: str) -> str:
    """Casefold, unify operator glyphs, spell number words as digits, trim trailing punctuation."""
    t = " ".join(text.casefold().split())
    t = (t.replace("\u00d7", "*").replace("\u22c5", "*").replace("\u00b7", "*").replace("\u00f7", "/")
         .replace("\u2212", "-").replace("\u2013", "-"))
    t = re.sub(r"(?<=\d)\s*x\s*(?=\d)", " * ", t)  # 3 x 4 (not the unknown x: digits on both sides)
    t = _WORD_RE.sub(lambda m: str(WORD_VALUES[m.group(1)] + WORD_VALUES[m.group(2)]) if m.group(1)
                     else str(WORD_VALUES[m.group(3)]), t)
    t = re.sub(r"\b(\d+) (plus|minus|times) (\d+)\b",
               lambda m: f"{m.group(1)} {dict(plus='+', minus='-', times='*')[m.group(2)]} {m.group(3)}", t)
    return t.strip().rstrip("?.!").strip()


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


def _serialize(e) -> str:
    """A canonical string for an unevaluated sympy tree: + and * arguments sorted, nothing computed."""
    import sympy

    if isinstance(e, sympy.Rational) or isinstance(e, sympy.Float):
        return str(e)
    if isinstance(e, sympy.Symbol):
        return e.name
    args = [_serialize(a) for a in e.args]
    if isinstance(e, (sympy.Add, sympy.Mul)):
        args.sort()
    if isinstance(e, sympy.Equality):
        args.sort()
    return f"{type(e).__name__}({','.join(args)})"


@lru_cache(maxsize=4096)
def _parse(expr: str, unknown: str | None) -> str | None:
    """Parse a plain expression (or `lhs=rhs` with one unknown) without evaluating it."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr, standard_transformations

    expr = expr.replace("^", "**").strip()
    if not expr or not _EXPR_CHARS.match(expr.replace("=", "")) or expr.count("=") > 1:
        return None
    letters = set(re.findall(r"[a-z]", expr))
    if (unknown is None and letters) or (unknown is not None and letters != {"x"}):
        return None  # after renaming, an equation's only letter is its unknown x
    if unknown is not None and "=" not in expr:
        return None
    local = {"x": sympy.Symbol("x")}
    try:
        if "=" in expr:
            lhs, rhs = expr.split("=")
            tree = sympy.Eq(parse_expr(lhs, local_dict=local, transformations=standard_transformations,
                                       evaluate=False),
                            parse_expr(rhs, local_dict=local, transformations=standard_transformations,
                                       evaluate=False), evaluate=False)
        else:
            tree = parse_expr(expr, local_dict=local, transformations=standard_transformations, evaluate=False)
    except Exception:  # sympy raises many types (SyntaxError, TokenError, TypeError): no key
        return None
    return _serialize(tree)


def _equation(t: str) -> tuple[str, str] | None:
    for form in _EQ_FORMS:
        m = form.match(t)
        if m:
            a, b = m.groups() if len(m.groups()) == 2 else (None, m.group(1))
            if a is not None and len(a) == 1:  # (unknown, equation)
                return a, b
            if b is not None and len(b) == 1:  # (equation, unknown)
                return b, a
            eq = b if a is None else a
            letters = sorted(set(re.findall(r"[a-z]", eq)))
            return (letters[0], eq) if len(letters) == 1 else None
    return None


def canonical_key(text: str) -> str | None:
    """`expr:<tree>` or `eq:<tree>` for a recognised problem, else None. Same key = same mathematics."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None
    t = normalize(text)
    for pattern, template in _PHRASES:
        m = pattern.match(t)
        if m:
            built = template.format(*m.groups())
            if built.startswith("eq:"):
                tree = _parse(built[3:], "x")
                return f"eq:{tree}" if tree else None
            tree = _parse(built, None)
            return f"expr:{tree}" if tree else None
    eq = _equation(t)
    if eq is not None:
        unknown, body = eq
        if not re.fullmatch(r"[a-z]", unknown) or unknown not in body:
            return None
        body = re.sub(rf"\b{unknown}\b", "x", body) if unknown != "x" else body
        tree = _parse(body, "x")
        return f"eq:{tree}" if tree else None
    m = _ASK_EXPR.match(t)
    body = m.group(1) if m else t
    m2 = _EXPR_ASKED.match(body)
    if m2 and "=" not in m2.group(1):
        body = m2.group(1)
    if not re.search(r"[+\-*/^]", body.lstrip("-")):
        return None  # a bare number is no problem to recall
    tree = _parse(body, None)
    return f"expr:{tree}" if tree else None
