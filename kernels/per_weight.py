"""What a kernel keeps beside a weight tensor (a repacked layout, lossless codes), valid only while that very
tensor is alive and unmodified: keyed by `id(weight)` with a weak reference (the entry goes with the tensor)
and checked against the tensor's `_version` (an in-place change makes it stale). Used by the invariant
mode's packed weights (kernels/linear.py) and the codes mode's codes (kernels/codes.py).
"""

from __future__ import annotations

import weakref
from typing import Generic, TypeVar

import torch

V = TypeVar("V")


class PerWeight(Generic[V]):
    """id(weight) -> (weak reference, version when stored, value)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, int, V]] = {}

    def get(self, weight: torch.Tensor) -> V | None:
        """The value stored for this very tensor, unless it was modified since."""
        hit = self._entries.get(id(weight))
        if hit is None or hit[0]() is not weight or hit[1] != weight._version:
            return None
        return hit[2]

    def put(self, weight: torch.Tensor, value: V) -> None:
        key, entries = id(weight), self._entries
        entries[key] = (weakref.ref(weight, lambda _, key=key: entries.pop(key, None)), weight._version, value)

    def __len__(self) -> int:
        return len(self._entries)
