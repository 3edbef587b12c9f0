"""Size-invariant elementwise transcendental ops (exp, tanh, GELU, SiLU, sigmoid, erf, cos, sin, ...).

ATen's CPU loops run a SIMD body and a scalar tail, split per thread (`divup(n, threads)`), and for several
ops the two paths give different bits. So: flatten, pad to a multiple of `quantum(threads)` so every
thread's chunk is whole SIMD pairs, apply the op, slice; every element goes through the vector body.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

# Two AVX-512 fp32 vectors (2 x 16 lanes): the unit of ATen's vectorized loop on the widest ISA it uses.
_SIMD_PAIR = 32


def quantum(threads: int) -> int:
    """Pad length making `divup(n, t)` a multiple of the SIMD pair for every t the loop might pick
    (it uses min(threads, n / grain), so any t in 1..threads)."""
    return _SIMD_PAIR * math.lcm(*range(1, max(1, threads) + 1))


def invariant_pointwise(op: Callable[..., torch.Tensor], x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """`op(x, *args, **kwargs)` for a unary elementwise op, with every element on the SIMD body."""
    n = x.numel()
    q = quantum(torch.get_num_threads())
    flat = x.reshape(-1)
    pad = (-n) % q
    if pad == 0 and flat.is_contiguous():
        return op(flat, *args, **kwargs).view(x.shape)
    # Pad with ones: finite for every op routed here (rsqrt/log of 0 would be inf, harmless but noisy).
    padded = torch.cat([flat, flat.new_ones(pad)]) if pad else flat.contiguous()
    return op(padded, *args, **kwargs)[:n].view(x.shape)


def is_float_cpu(x: object) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "cpu" and x.is_floating_point()
