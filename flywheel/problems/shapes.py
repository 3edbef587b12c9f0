"""A problem's template shape: its text with every number masked, whitespace and case normalized.

Problems that differ only in their numbers share a shape, so a new problem is classified into the
template (and topic) of catalog problems with its shape (`Solver.classify`). The catalog indexes the
shape's SHA-256 (`problem_shapes`, migration 0005), so classifying is one index seek, not a scan.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["shape", "shape_hash"]

_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def shape(text: str) -> str:
    """A problem's template shape: numbers masked, whitespace and case normalized."""
    return _NUMBER.sub("#", " ".join(text.casefold().split()))


def shape_hash(text: str) -> str:
    """SHA-256 (hex) of `shape(text)`: what the catalog indexes."""
    return hashlib.sha256(shape(text).encode("utf-8", "surrogatepass")).hexdigest()
