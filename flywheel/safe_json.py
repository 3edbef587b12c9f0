"""Bounded JSON: the one parser for every JSON text Galahad reads from outside (bundles, artifact
headers, manifests, problem and pair files). Size and nesting depth are limited, and `NaN`, `Infinity`
and numbers that overflow a float are refused, so hostile input gets a one-line `GalahadError`, never a
`RecursionError`, an `OverflowError` or unbounded memory.
"""

from __future__ import annotations

import json
import math
from typing import Any

from galahad.flywheel.errors import GalahadError

MAX_DEPTH = 64  # Galahad's own JSON nests at most ~6 deep
MAX_INT_DIGITS = 40  # ids and counts fit in far fewer; more is an attack on int() and SQL bindings


class BadJSON(GalahadError, ValueError):
    """JSON that parses in principle but breaks a bound: too deep, too large, non-finite, huge ints."""


def _constant(name: str) -> Any:
    raise BadJSON(f"{name} is not a number Galahad accepts")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadJSON(f"number {text[:40]} is out of range")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise BadJSON(f"integer of {len(text)} digits is out of range")
    return int(text)


def check_depth(obj: Any, max_depth: int = MAX_DEPTH) -> None:
    """Raise BadJSON if containers nest deeper than `max_depth` (iterative: never recurses)."""
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise BadJSON(f"nested deeper than {max_depth} levels")
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))


def loads(text: str | bytes, max_bytes: int | None = None, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` with bounds. Malformed text raises `json.JSONDecodeError` (a ValueError) as before;
    a broken bound raises `BadJSON` (a GalahadError and a ValueError)."""
    if max_bytes is not None and len(text) > max_bytes:
        raise BadJSON(f"larger than {max_bytes:,} bytes")
    try:
        obj = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except RecursionError:
        raise BadJSON(f"nested deeper than {max_depth} levels") from None
    check_depth(obj, max_depth)
    return obj
