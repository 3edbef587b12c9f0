"""Size limits and the cheap pre-checks that turn away hostile answers before any parser sees them.

The subprocess timeout in `pool` is the real guarantee against hangs; these checks exist so that the
obvious attacks (a 1 MB string, 10,000 nested brackets, `9^9^9^9`, `100000!`) cost microseconds and
never occupy a worker. Every check is a single linear scan.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

FACTORIAL = re.compile(r"(\d+)\s*!")
INT = re.compile(r"\s*[-+]?\s*\d+\s*")


@dataclass(frozen=True)
class Limits:
    """What an answer may cost before it is refused as "too large"."""

    max_output_chars: int = 100_000
    max_answer_chars: int = 1_000
    max_depth: int = 40
    # Above this, a literal exponent (or a stacked one's value) makes numbers too big to compare.
    max_exponent: int = 10_000
    max_factorial: int = 2_000


def nesting_depth(s: str) -> int:
    depth = deepest = 0
    for c in s:
        if c in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in ")]}":
            depth = max(0, depth - 1)
    return deepest


def _group(s: str, i: int) -> tuple[str, int]:
    """The exponent that starts at `s[i]`: a `{}` or `()` group, or one token; and the index after it."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return "", i
    if s[i] in "{(":
        close = "}" if s[i] == "{" else ")"
        depth = 0
        for j in range(i, len(s)):
            if s[j] == s[i]:
                depth += 1
            elif s[j] == close:
                depth -= 1
                if depth == 0:
                    return s[i + 1 : j], j + 1
        return s[i + 1 :], len(s)
    j = i + 1 if s[i] in "+-" else i
    if j < len(s) and s[j] == "\\":
        j += 1
        while j < len(s) and s[j].isalpha():
            j += 1
        return s[i:j], j
    k = j
    while k < len(s) and (s[k].isdigit() or s[k] == "."):
        k += 1
    if k == j:
        k = j + 1
    return s[i:k], k


def _magnitude(expr: str, limits: Limits, depth: int = 0) -> float | None:
    """log10 of a literal integer power tower like `2^{3^{4}}`, None when not a literal tower.
    Raises OverflowError when it is one whose exponent is over the limit."""
    expr = expr.strip()
    if depth > 8:
        raise OverflowError
    if INT.fullmatch(expr):
        return math.log10(max(1, abs(int(expr.replace(" ", "")))))
    k = expr.find("^")
    if k <= 0 or not INT.fullmatch(expr[:k].strip("{}() ")):
        return None
    base = abs(int(expr[:k].strip("{}() ").replace(" ", "")))
    exponent, end = _group(expr, k + 1)
    if expr[end:].strip():
        return None
    inner = _magnitude(exponent, limits, depth + 1)
    if inner is None:
        return None
    if inner > math.log10(limits.max_exponent):
        raise OverflowError
    return (10**inner) * math.log10(max(base, 2))


def _power_problem(s: str, limits: Limits) -> str | None:
    i = s.find("^")
    while i >= 0:
        exponent, end = _group(s, i + 1)
        rest = s[end:].lstrip(" }")
        if rest.startswith("^") and "{" not in exponent and "(" not in exponent:
            return "too large: power tower"
        if "^" in exponent:
            try:
                size = _magnitude(exponent, limits)
            except (OverflowError, ValueError):
                return "too large: power tower"
            if size is not None and size > math.log10(limits.max_exponent):
                return "too large: power tower"
        elif INT.fullmatch(exponent.strip("{}() ") or "x"):
            try:
                if abs(int(exponent.strip("{}() ").replace(" ", ""))) > limits.max_exponent:
                    return "too large: exponent"
            except ValueError:
                return "too large: exponent"
        i = s.find("^", i + 1)
    return None


def precheck(answer: str, limits: Limits) -> str | None:
    """Why `answer` is refused before parsing ("too large: ..."), or None when it may be parsed."""
    if len(answer) > limits.max_answer_chars:
        return f"too large: answer over {limits.max_answer_chars} characters"
    if nesting_depth(answer) > limits.max_depth:
        return f"too large: nesting deeper than {limits.max_depth}"
    s = answer.replace("**", "^")
    if "^" in s:
        problem = _power_problem(s, limits)
        if problem:
            return problem
    for m in FACTORIAL.finditer(s):
        if len(m.group(1)) > 6 or int(m.group(1)) > limits.max_factorial:
            return "too large: factorial"
    return None
