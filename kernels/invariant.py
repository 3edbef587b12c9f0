"""The `invariant` kernel mode: shape-invariant CPU kernels, so that a position's logits are the same bits
whether it is computed in a one-pass forward, after a chunked prefill (a graft), or token by token.

It installs: attention `galahad_invariant` (kernels/attention.py, chosen at model load through
`attn_implementation`, so the model must be loaded with this mode's runtime); `F.linear` through the
padded oneDNN GEMM (kernels/linear.py); and transcendental elementwise ops (exp, tanh, GELU, SiLU, sigmoid,
erf, cos, sin; functions, Tensor methods and transformers' GELU-tanh) padded so every element takes the
SIMD body (kernels/pointwise.py). The rest of a forward is exact or a fixed-length per-row reduction.

`active()` swaps those functions for wrappers while any thread is inside it; a wrapper takes the invariant
path only on such a thread, so a stock forward on another thread keeps stock kernels. (A
`TorchFunctionMode` would avoid the swap but intercepts every torch call: 9-10% of a gemma decode step.)
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F

from galahad.flywheel.errors import GalahadError
from galahad.kernels import attention, linear
from galahad.kernels.modes import KernelMode
from galahad.kernels.pointwise import invariant_pointwise, is_float_cpu

# rsqrt is left alone: its SIMD body (1 / sqrt, both correctly rounded) and its scalar tail give the same
# bits, and RMSNorm calls it ~110 times per gemma forward.
_UNARY_NAMES = ("exp", "tanh", "sigmoid", "erf", "cos", "sin")
_local = threading.local()  # .depth: how deep this thread is inside active()


def _on() -> bool:
    return getattr(_local, "depth", 0) > 0


def _linear_wrapper(stock: Callable) -> Callable:
    @functools.wraps(stock)
    def invariant_or_stock_linear(
        input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
    ):
        if not _on():
            return stock(input, weight, bias)
        if not linear.supports(input, weight):
            raise TypeError(
                f"invariant linear supports fp32 CPU tensors only, got {input.dtype} on {input.device}"
            )
        return linear.invariant_linear(input, weight, bias)

    return invariant_or_stock_linear


def _unary_wrapper(stock: Callable) -> Callable:
    @functools.wraps(stock)
    def invariant_or_stock_unary(x: Any, *args, **kwargs):
        if _on() and is_float_cpu(x) and kwargs.get("out") is None and not kwargs.get("inplace"):
            return invariant_pointwise(stock, x, *args, **kwargs)
        return stock(x, *args, **kwargs)

    return invariant_or_stock_unary


def _module_act_forward(stock: Callable) -> Callable:
    """transformers' GELUTanh binds `functools.partial(F.gelu, ...)` at construction, out of reach of an
    attribute swap: wrap the module's forward instead (its `act` is elementwise)."""

    @functools.wraps(stock)
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if _on() and is_float_cpu(input):
            return invariant_pointwise(self.act, input)
        return stock(self, input)

    return forward


def _targets() -> list[tuple[Any, str, Callable[[Callable], Callable]]]:
    """(owner, attribute, wrapper factory) for everything the mode swaps."""
    from transformers import activations

    out: list[tuple[Any, str, Callable[[Callable], Callable]]] = [(F, "linear", _linear_wrapper)]
    out += [(F, name, _unary_wrapper) for name in ("gelu", "silu")]
    out += [(torch, name, _unary_wrapper) for name in _UNARY_NAMES]
    out += [(torch.Tensor, name, _unary_wrapper) for name in _UNARY_NAMES]
    out.append((activations.GELUTanh, "forward", _module_act_forward))
    return out


class _Swap:
    """Process-wide install/restore of the wrappers, reference-counted across threads."""

    lock = threading.Lock()
    users = 0
    saved: list[tuple[Any, str, bool, Any]] = []  # owner, name, was in owner.__dict__, original

    @classmethod
    def enter(cls) -> None:
        with cls.lock:
            if cls.users == 0:
                for owner, name, factory in _targets():
                    own = name in vars(owner)
                    original = getattr(owner, name)
                    cls.saved.append((owner, name, own, vars(owner)[name] if own else None))
                    setattr(owner, name, factory(original))
            cls.users += 1

    @classmethod
    def exit(cls) -> None:
        with cls.lock:
            cls.users -= 1
            if cls.users == 0:
                for owner, name, own, original in reversed(cls.saved):
                    if own:
                        setattr(owner, name, original)
                    else:
                        delattr(owner, name)
                cls.saved.clear()


class InvariantMode(KernelMode):
    name = "invariant"
    devices = ("cpu",)
    contiguous_keys_only = True  # the attention lays keys out by absolute position, back from the query
    token_by_token_exact = True

    def __init__(self) -> None:
        if not linear.available():
            raise RuntimeError("the invariant kernel mode needs PyTorch built with oneDNN (mkldnn)")
        if "STRICT" not in os.environ.get("MKL_CBWR", "").upper():
            # Attention's batched GEMMs (MKL) are row-invariant only in strict CNR mode, which MKL reads
            # when torch loads: see workers/runtime.py `pin_process_env`.
            raise RuntimeError(
                "the invariant kernel mode needs MKL_CBWR=<isa>,STRICT set before torch is imported"
            )
        self._attn = attention.register()

    # transformers' activation names whose kernels `_targets` wraps: F.silu (SiLUActivation, nn.SiLU),
    # F.gelu (GELUActivation), GELUTanh's module forward, torch.tanh (NewGELUActivation).
    activations = ("silu", "swish", "gelu", "gelu_pytorch_tanh", "gelu_new")

    def check_activation(self, name: str) -> None:
        if name not in self.activations:
            raise GalahadError(f"the invariant kernel mode does not cover the activation {name!r}; covered: "
                               f"{', '.join(self.activations)}")

    def attn_implementation(self, requested: str) -> str:
        """Whatever was requested, attention must be the invariant kernel: eager/sdpa reduce over the
        cache length."""
        return self._attn

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        _Swap.enter()
        _local.depth = getattr(_local, "depth", 0) + 1
        try:
            yield
        finally:
            _local.depth -= 1
            _Swap.exit()
