"""The `invariant` kernel mode: shape-invariant CPU kernels, so that a position's logits are the same bits
whether it is computed in a one-pass forward, after a chunked prefill (a graft), or token by token.

What it installs, and why each is needed (measurements in kernels/linear.py, kernels/pointwise.py and
kernels/attention.py):
- attention: `galahad_invariant` (kernels/attention.py), chosen at model load through
  `attn_implementation`, so the model must be loaded with this mode's runtime.
- `F.linear` (every nn.Linear, including the LM head): the oneDNN GEMM padded to at least two rows.
- transcendental elementwise ops (exp, tanh, GELU, SiLU, sigmoid, erf, cos, sin), as functions,
  Tensor methods and transformers' GELU-tanh module: padded so every element takes the SIMD body.
Everything else in the forward is exact (adds, multiplies, gathers, max) or a fixed-length per-row
reduction (RMSNorm's mean over the hidden size), which tests/test_kernels.py checks is row-invariant.

How: `active()` swaps the functions above for wrappers for the duration of a forward pass and puts them
back when no thread is inside `active()` any more. A wrapper takes the invariant path only on a thread
that is inside `active()`, so a stock forward running on another thread at the same time keeps stock
kernels. (A `TorchFunctionMode` would scope this without touching module attributes, but it intercepts
every torch call of the forward (845 on the 6-layer tiny model, over 2,000 on gemma3-270m) and a
pass-through one alone cost 9-10% of a gemma decode step on one thread.)
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
