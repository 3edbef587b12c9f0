"""Gold answers are checked, not trusted: computable golds, conflicting golds, and who gave a gold.

A text with a canonical key has a computable value: `check_gold` computes it exactly (bounded) and refuses a
gold that disagrees, naming both. Any other gold is recorded with who gave it (`gold_source`), carried by
every answer recalled from it. Two golds for one problem must agree: `same_gold` compares exact numbers as
numbers (`0.5` = `1/2` = `\\frac{1}{2}`), anything else as normalized text. Torch-free, SQL-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from galahad.flywheel.problems import canonical

COMPUTED = "computed"  # gold_source of a gold that equals the problem's computed value
MAX_GOLD_DIGITS = 60

_NUM = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_WRAPPERS = (re.compile(r"^\$+(.*?)\$+$"), re.compile(r"^\\boxed\{(.*)\}$"), re.compile(r"^\\\((.*)\\\)$"))
_FRAC = re.compile(r"^([+-]?)\\[dt]?frac\{([+-]?\d+)\}\{([+-]?\d+)\}$")
_ASSIGN = re.compile(r"^[a-z]\s*=\s*(.+)$")


def exact_number(text: object) -> Fraction | None:
    """A gold written as one exact number (integer, decimal, a/b, LaTeX \\frac, `x = 3`), else None."""
    if not isinstance(text, str):
        return None
    t = " ".join(text.split()).strip()
    if not t or len(t) > 2 * MAX_GOLD_DIGITS:
        return None
    for _ in range(3):
        for w in _WRAPPERS:
            m = w.match(t)
            if m:
                t = m.group(1).strip()
    m = _ASSIGN.match(t.casefold())
    if m:
        t = m.group(1).strip()
    t = t.replace("\u2212", "-")
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", t):
        t = t.replace(",", "")  # strict thousands groups only: 1,234
    m = _FRAC.match(t)
    if m:
        sign, a, b = m.groups()
        return None if int(b) == 0 else Fraction(int(a), int(b)) * (-1 if sign == "-" else 1)
    parts = [p.strip() for p in t.split("/")]
    if len(parts) > 2 or not all(_NUM.fullmatch(p) for p in parts):
        return None
    try:
        values = [Fraction(p) for p in parts]
    except (ValueError, ZeroDivisionError):
        return None
    if len(values) == 2:
        return None if values[1] == 0 else values[0] / values[1]
    return values[0]


def show(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def same_gold(a: str, b: str) -> bool:
    """Two golds agree: equal exact numbers, or (when either is no plain number) equal normalized text."""
    qa, qb = exact_number(a), exact_number(b)
    if qa is not None and qb is not None:
        return qa == qb
    return " ".join(str(a).casefold().split()) == " ".join(str(b).casefold().split())


@dataclass(frozen=True)
class GoldCheck:
    """The outcome for one (problem, gold): `error` is None when the gold is acceptable."""

    key: str | None
    value: Fraction | None  # the computed value (None: not computable here)
    error: str | None

    @property
    def computed(self) -> bool:
        return self.value is not None


def check_gold(problem: str, gold: str) -> GoldCheck:
    """Compute the problem's value when it has a key, and refuse a gold that disagrees with it."""
    key = canonical.canonical_key(problem)
    value = canonical.value(key) if key is not None else None
    if value is None:
        return GoldCheck(key, None, None)
    given = exact_number(gold)
    if given is None:
        return GoldCheck(key, value, f"gold {gold[:80]!r} is not a number, but the problem's value is "
                                     f"computable: {show(value)}, read as {canonical.reading(key)}")
    if given != value:
        return GoldCheck(key, value, f"gold {gold[:80]!r} disagrees with the problem's computed value "
                                     f"{show(value)}, read as {canonical.reading(key)}")
    return GoldCheck(key, value, None)


def gold_source(check: GoldCheck, given_by: str) -> str:
    """Who vouches for a gold: `computed` when it equals the computed value, else whoever gave it."""
    return COMPUTED if check.computed and check.error is None else given_by
