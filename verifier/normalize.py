"""String-level normalization of an extracted answer: spacing, units, numbers, text answers.

Everything here is pure string work, safe on hostile input and fast; it decides the common cases (plain
integers, decimals, fractions, identical strings, text answers) without sympy, and prepares the rest
for the symbolic worker. Units and percent are split off, never silently dropped: whether `10` equals
`10%` is the caller's choice (`strip_units`).
"""

from __future__ import annotations

import re
from fractions import Fraction

# Commands and words that are mathematics, not prose or units.
MATH_WORDS = frozenset(
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp sqrt pi infty infinity inf "
    "frac dfrac tfrac cdot times div pm mp le leq ge geq ne neq lt gt cup cap in notin subset emptyset "
    "varnothing mathbb circ deg theta alpha beta gamma delta epsilon lambda mu sigma phi omega tau rho "
    "and or mod pmod gcd lcm max min det binom choose sum prod int lim dx dy dz dt du dv".split()
)
# Words that end a sentence, not a quantity: "2 is wrong" must not become 2 with the unit "is wrong".
NOT_UNITS = frozenset(
    "is are was were be not no nor but because since or and if so then than the a an wrong incorrect false "
    "true maybe perhaps probably approximately about roughly nearly almost either neither none plus minus "
    "times over each per left right answer final".split()
)
UNICODE = {
    "\u2212": "-", "\u2013": "-", "\u00d7": r"\times ", "\u00b7": r"\cdot ", "\u22c5": r"\cdot ",
    "\u00f7": r"\div ", "\u2264": r"\le ", "\u2265": r"\ge ", "\u2260": r"\ne ", "\u221e": r"\infty ",
    "\u03c0": r"\pi ", "\u221a": r"\sqrt", "\u222a": r"\cup ", "\u2229": r"\cap ", "\u2205": r"\emptyset ",
}
SPACING = re.compile(r"(?<!\\)\\[,;:! ]|~|\\(?:left|right|displaystyle|big|Big|bigg|Bigg)(?![a-zA-Z])")
PERCENT = re.compile(r"\s*(?:\\%|%|\\text\{\s*\\?%\s*\}|\s(?:percent|per\s*cent)\b)\s*$", re.IGNORECASE)
DEGREES = re.compile(
    r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|\u00b0|\\circ|\\degree|\s(?:degrees?|deg)\b)\s*$", re.IGNORECASE
)
TEXT_SUFFIX = re.compile(r"^(.*?[\d})\]])\s*\\(?:text|mbox|mathrm|textrm|textnormal)\s*\{([^{}]*)\}\s*$")
WORD_SUFFIX = re.compile(r"^(.*?[\d})\]])\s*([A-Za-z]{2,}(?:\s+[A-Za-z]{2,})?)\s*$")
CURRENCY = re.compile(r"^(?:\\\$|\$|US\$|USD)\s*(?=[-+.\d])")
TEXT_WRAP = re.compile(r"^\\(?:text|textbf|textit|mathrm|mbox|textrm|textnormal|mathbf)\s*\{([^{}]*)\}$")
TEXTY = re.compile(r"[A-Za-z(][A-Za-z\s.,'\-()]*")
THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
DECIMAL = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
SLASH = re.compile(r"([-+]?\d+)/([-+]?\d+)")
FRAC = re.compile(r"([-+]?)\\frac(?:\{([-+]?\d+)\}\{([-+]?\d+)\}|(\d)(\d))")
SCIENTIFIC = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[eE]([-+]?\d+)(?![\w.])")


def clean(answer: str) -> str:
    """One spelling per meaning for layout-only differences (spacing, `\\left`, `\\dfrac`, unicode)."""
    s = answer
    for k, v in UNICODE.items():
        if k in s:
            s = s.replace(k, v)
    s = SPACING.sub(" ", s)
    s = s.replace(r"\dfrac", r"\frac").replace(r"\tfrac", r"\frac").replace("{,}", "")
    s = s.replace(r"\leq", r"\le").replace(r"\geq", r"\ge").replace(r"\neq", r"\ne")
    s = " ".join(s.split())
    return s.strip().rstrip(".").strip()


def split_unit(value: str) -> tuple[str, str]:
    """(value, unit): a trailing percent sign, degree mark, `\\text{unit}` or unit words, or a leading
    currency sign, taken off so that it is compared on purpose and not dropped by accident."""
    s = value.strip()
    m = CURRENCY.match(s)
    if m:
        return s[m.end() :].strip(), "$"
    for pattern, unit in ((PERCENT, "%"), (DEGREES, "deg")):
        m = pattern.search(s)
        if m and m.start() > 0:
            return s[: m.start()].strip(), unit
    m = TEXT_SUFFIX.match(s)
    if m and m.group(2).strip():
        return m.group(1).strip(), " ".join(m.group(2).split()).casefold()
    m = WORD_SUFFIX.match(s)
    if m and not any(w.casefold() in MATH_WORDS | NOT_UNITS for w in m.group(2).split()):
        return m.group(1).strip(), " ".join(m.group(2).split()).casefold()
    return s, ""


def parse_number(value: str) -> Fraction | None:
    """The exact value of a plain integer, decimal or integer fraction (`-3`, `1,000`, `0.5`, `3/4`,
    `\\frac{3}{4}`, `\\frac34`), else None. Decimals are exact: `0.333` is not `1/3`."""
    # Spaces may follow a sign or surround a slash; between digits they make "4 2", which is not 42.
    s = re.sub(r"(?<=[-+/])\s+|\s+(?=/)", "", value.strip())
    if len(s) > 400:
        return None
    if THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    if DECIMAL.fullmatch(s):
        return Fraction(s)
    m = SLASH.fullmatch(s)
    if m:
        num, den = int(m.group(1)), int(m.group(2))
        return Fraction(num, den) if den else None
    m = FRAC.fullmatch(s)
    if m:
        num, den = (m.group(2), m.group(3)) if m.group(2) is not None else (m.group(4), m.group(5))
        if int(den) == 0:
            return None
        f = Fraction(int(num), int(den))
        return -f if m.group(1) == "-" else f
    return None


def parse_number_list(value: str) -> tuple[str, list[Fraction]] | None:
    """A bracketed list of plain numbers as (brackets, values): `(1, 2)` gives ("()", [1, 2]) and
    `\\{3, 1\\}` gives ("{}", [1, 3]). Tuples, intervals and sets of numbers are then compared without
    sympy. None for anything else (bare lists are left to the parser: "1, 2" may be a set)."""
    s = value.strip()
    if s.startswith("\\{") and s.endswith("\\}"):
        kind, inner = "{}", s[2:-2]
    elif len(s) >= 2 and s[0] in "([" and s[-1] in ")]":
        kind, inner = s[0] + s[-1], s[1:-1]
    else:
        return None
    if any(c in inner for c in "()[]{}") or len(inner) > 400:
        return None
    items = [parse_number(item) for item in inner.split(",")]
    if len(items) < 2 or any(item is None for item in items):
        return None
    return kind, sorted(set(items)) if kind == "{}" else items


def text_key(value: str) -> str:
    """A prose answer in comparable form: `\\text{(C)}`, "(c)" and "C" all give "c"."""
    s = value.strip()
    m = TEXT_WRAP.match(s)
    if m:
        s = m.group(1)
    return "".join(c for c in s.casefold() if not c.isspace() and c not in "().")


def is_text(value: str) -> bool:
    """Whether an answer is prose ("Evelyn", `\\text{(C)}`, "odd") rather than mathematics."""
    s = value.strip()
    m = TEXT_WRAP.match(s)
    if m:
        return bool(TEXTY.fullmatch(m.group(1).strip()))
    if not TEXTY.fullmatch(s):
        return False
    return any(len(w) >= 3 and w.casefold() not in MATH_WORDS for w in re.findall(r"[A-Za-z]+", s))


def _sqrt_parens(s: str) -> str:
    """`\\sqrt(x+1)` as `\\sqrt{x+1}`: LaTeX reads a root's argument from braces only."""
    out, i = [], 0
    while True:
        k = s.find("\\sqrt(", i)
        if k < 0:
            return "".join(out) + s[i:]
        depth, j = 0, k + 5
        for j in range(k + 5, len(s)):
            depth += {"(": 1, ")": -1}.get(s[j], 0)
            if depth == 0:
                break
        if depth:
            return "".join(out) + s[i:]
        out.append(s[i:k] + "\\sqrt{" + s[k + 6 : j] + "}")
        i = j + 1


def to_latex(value: str) -> str:
    """Plain-text spellings the LaTeX parser would misread (`pi` as p*i, `1e5` as 1*e*5, `**`)."""
    s = value.replace("**", "^")
    s = SCIENTIFIC.sub(lambda m: f"{m.group(1)}\\times 10^{{{m.group(2)}}}", s)
    s = re.sub(r"(?<![\\A-Za-z])pi(?![A-Za-z])", r"\\pi ", s)
    s = re.sub(r"(?<![\\A-Za-z])(?:infinity|infty|inf)(?![A-Za-z])", r"\\infty ", s)
    s = re.sub(r"(?<![\\A-Za-z])(sqrt|sin|cos|tan|log|ln|exp)(?![A-Za-z])", r"\\\1", s)
    s = _sqrt_parens(s)
    s = s.replace("<=", r"\le ").replace(">=", r"\ge ").replace("!=", r"\ne ")
    return s.strip()
