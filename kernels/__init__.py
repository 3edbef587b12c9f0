"""Swappable compute kernels: RoPE (apply, re-rotate) and attention, stock and shape-invariant."""
