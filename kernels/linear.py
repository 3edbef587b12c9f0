"""Row-invariant fp32 linear (GEMM) for CPU: a row's output bits never depend on how many other rows
(or output columns) share the call, nor on where the row sits in the batch.

MKL's sgemm is not row-invariant for small M even under `MKL_CBWR=...,STRICT`; oneDNN's matmul is, except
on its GEMV path (M == 1 or N == 1), and not in the reduction length K (callers reducing over a variable
length split K themselves). So every GEMM runs through oneDNN with M (and N) padded to at least 2. Weights
up to `PACK_MAX_BYTES` are reordered once into oneDNN's blocked layout and cached (keyed by the tensor,
checked against its version counter): as invariant, and a decode step twice as fast as the plain layout;
the LM head stays plain. oneDNN's bits do not depend on the thread count, so small GEMMs run on one thread
(an OpenMP barrier on a loaded machine waits a time slice). Measurements: docs/gpu_kernels.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from galahad.kernels.per_weight import PerWeight

_MIN_ROWS = 2  # oneDNN's GEMV path (M == 1 or N == 1) is the only one whose bits differ
SERIAL_WORK = 1 << 23  # multiply-adds below which one thread beats waking the pool (decode-sized work)
PACK_MAX_BYTES = 64 << 20  # pack every per-layer weight; leave embedding-sized LM heads plain

# The op overload itself, resolved once (calling the overload packet re-resolves it on every call).
_ONEDNN_LINEAR = getattr(getattr(torch.ops.mkldnn, "_linear_pointwise", None), "default", None)

_PACKED: PerWeight[torch.Tensor] = PerWeight()  # a weight's oneDNN-packed copy, while it is unmodified


@contextlib.contextmanager
def serial_if_small(work: int) -> Iterator[None]:
    """Run the block on one thread when `work` (multiply-adds) is small. Only for kernels whose bits are
    thread-count independent (tested): this is a speed choice, never a correctness one."""
    threads = torch.get_num_threads()
    if threads == 1 or work >= SERIAL_WORK:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def available() -> bool:
    return _ONEDNN_LINEAR is not None and torch.backends.mkldnn.is_available()


def packed(weight: torch.Tensor) -> torch.Tensor:
    """The cached oneDNN-layout copy of a (contiguous, N >= 2) weight; repacked if it was modified."""
    pw = _PACKED.get(weight)
    if pw is not None:
        return pw
    with torch.inference_mode(False), torch.no_grad():
        pw = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _MIN_ROWS)
    _PACKED.put(weight, pw)
    return pw


def gemm_nt(x: torch.Tensor, weight: torch.Tensor, pack: bool = False) -> torch.Tensor:
    """x [M, K] @ weight[N, K]^T -> [M, N], row- and column-invariant for fixed K. `pack` uses the cached
    blocked copy of `weight` (for weights reused across calls)."""
    m, k = x.shape
    n = weight.shape[0]
    if m == 0 or n == 0:
        return x.new_zeros((m, n))
    if m < _MIN_ROWS:
        padded = x.new_zeros((_MIN_ROWS, k))
        padded[:m] = x
        x = padded
    elif not x.is_contiguous():
        x = x.contiguous()
    if n < _MIN_ROWS:
        padded = weight.new_zeros((_MIN_ROWS, k))
        padded[:n] = weight
        weight, pack = padded, False
    elif not weight.is_contiguous():
        weight = weight.contiguous()
    w = packed(weight) if pack else weight
    # Inlined `serial_if_small`: this runs ~130 times per decode step.
    threads = torch.get_num_threads()
    serial = threads > 1 and x.shape[0] * weight.shape[0] * k < SERIAL_WORK
    if serial:
        torch.set_num_threads(1)
    try:
        out = _ONEDNN_LINEAR(x, w, None, "none", [], "")
    finally:
        if serial:
            torch.set_num_threads(threads)
    if m < _MIN_ROWS or n < _MIN_ROWS:
        out = out[:m, :n].contiguous()
    return out


def invariant_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Drop-in for `F.linear` on CPU float tensors. The bias is added after the GEMM as a separate exact
    elementwise add, so it can never change the GEMM's accumulation order."""
    lead = x.shape[:-1]
    pack = weight.is_contiguous() and weight.numel() * weight.element_size() <= PACK_MAX_BYTES
    out = gemm_nt(x.reshape(-1, x.shape[-1]), weight, pack=pack)
    if bias is not None:
        out = out + bias
    return out.reshape(*lead, weight.shape[0])


def supports(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Where the invariant path is measured to hold; the mode refuses anything else rather than fall back."""
    return (
        x.device.type == "cpu"
        and weight.device.type == "cpu"
        and x.dtype == weight.dtype
        and x.dtype == torch.float32  # the only dtype whose invariance is measured
        and weight.dim() == 2
        and x.dim() >= 1
    )
