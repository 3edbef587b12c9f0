"""The `invariant` kernel mode: shape-invariant CPU kernels, so that a position's logits are the same bits
whether it is computed in a one-pass forward, after a chunked prefill (a graft), or token by token.

What it installs, and why each is needed (figures in kernels/linear.py, kernels/pointwise.py and
kernels/attention.py):
- attention: `galahad_invariant` (kernels/attention.py), chosen at model load through
  `attn_implementation`, so the model must be loaded with this mode's runtime.
- `F.linear` (every nn.Linear, including the LM head): the oneDNN GEMM padded to at least two rows.
- transcendental elementwise ops (exp, tanh, GELU, SiLU, sigmoid, erf, cos, sin, rsqrt, log): padded so
  every element takes the SIMD body.
Everything else in the forward is either exact (adds, multiplies, gathers, max) or a fixed-length
per-row reduction (RMSNorm's mean over the hidden size), which tests/test_kernels.py checks stays
row-invariant.

The swap is a `TorchFunctionMode`, entered by `active()` for the duration of a forward pass: it is
scoped, thread-local, and restores stock behaviour on exit, so nothing is monkeypatched globally.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from galahad.kernels import attention, linear
from galahad.kernels.modes import KernelMode, register
from galahad.kernels.pointwise import invariant_pointwise, is_float_cpu

_UNARY: set[Callable] = {
    torch.exp, torch.Tensor.exp,
    torch.tanh, torch.Tensor.tanh,
    torch.sigmoid, torch.Tensor.sigmoid,
    torch.erf, torch.Tensor.erf,
    torch.cos, torch.Tensor.cos,
    torch.sin, torch.Tensor.sin,
    torch.rsqrt, torch.Tensor.rsqrt,
    torch.log, torch.Tensor.log,
    F.gelu, F.silu,
}  # fmt: skip


class _InvariantKernels(TorchFunctionMode):
    """Routes the kernels whose bits depend on shape to their invariant versions; passes the rest through."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if not linear.supports(x, weight):
                raise TypeError(
                    f"invariant linear supports fp32 CPU tensors only, got {x.dtype} on {x.device}"
                )
            return linear.invariant_linear(x, weight, bias)
        if func in _UNARY and args and is_float_cpu(args[0]) and not kwargs.get("out"):
            return invariant_pointwise(func, args[0], *args[1:], **kwargs)
        return func(*args, **kwargs)


@register
class InvariantMode(KernelMode):
    name = "invariant"

    def __init__(self) -> None:
        if not linear.available():
            raise RuntimeError("the invariant kernel mode needs PyTorch built with oneDNN (mkldnn)")
        self._attn = attention.register()

    def attn_implementation(self, requested: str) -> str:
        """Whatever was requested, attention must be the invariant kernel: eager/sdpa reduce over the
        cache length."""
        return self._attn

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        with _InvariantKernels():
            yield
