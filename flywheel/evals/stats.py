"""Small, dependency-free statistics for evals: Wilson intervals and paired comparisons.

Transfer is an experiment, not a target: every comparison reports its effect size with an interval and
an exact paired test, whatever the sign.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for a proportion; (0, 1) when there is no data."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts b (a only) and c (b only)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired(a: list[bool], b: list[bool]) -> dict:
    """Condition a vs condition b on the same problems: difference in accuracy, 95% CI, exact p."""
    if len(a) != len(b):
        raise ValueError("paired comparison needs the same problems in both conditions")
    n = len(a)
    if n == 0:
        return {"n": 0, "difference": 0.0, "ci95": [0.0, 0.0], "a_only": 0, "b_only": 0, "p_value": 1.0}
    d = [int(x) - int(y) for x, y in zip(a, b, strict=True)]
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    half = Z95 * math.sqrt(var / n)
    b_only = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    a_only = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    return {"n": n, "difference": mean, "ci95": [mean - half, mean + half], "a_only": a_only, "b_only": b_only,
            "p_value": mcnemar_exact(a_only, b_only)}
