"""Argument types for the CLI: bounded integers and finite floats, refused by argparse with one line.

`--limit 100000000000000000000` would overflow a SQL binding, `--grace nan` would compare false with
everything (acting as 0), a negative `--limit` means nothing: each is refused where it is parsed.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

INT_MAX = (1 << 63) - 1  # what SQLite and PostgreSQL bind as an integer


def count(minimum: int = 1, maximum: int = INT_MAX) -> Callable[[str], int]:
    """An integer in [minimum, maximum]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text[:40]!r}") from None
        if not minimum <= value <= maximum:
            limit = f"at least {minimum}" if maximum == INT_MAX else f"in [{minimum}, {maximum}]"
            raise argparse.ArgumentTypeError(f"must be {limit}, got {text[:40]}")
        return value

    parse.__name__ = "integer"
    return parse


def finite(minimum: float = 0.0, maximum: float = math.inf, open_min: bool = False) -> Callable[[str], float]:
    """A finite float in [minimum, maximum] (or (minimum, maximum] with `open_min`); nan and inf refused."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text[:40]!r}") from None
        low_ok = value > minimum if open_min else value >= minimum
        if not math.isfinite(value) or not low_ok or value > maximum:
            low = f"{'>' if open_min else '>='} {minimum:g}"
            raise argparse.ArgumentTypeError(f"must be a finite number {low}"
                                             + (f" and <= {maximum:g}" if math.isfinite(maximum) else "")
                                             + f", got {text[:40]}")
        return value

    parse.__name__ = "number"
    return parse


SEED = count(0, (1 << 32) - 1)
