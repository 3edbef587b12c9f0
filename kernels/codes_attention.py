"""The `codes` kernel mode's attention: the grouped kernel's computation (kernels/grouped.py: the query heads of
one KV head stacked as rows, eager's scaling, soft-capping, additive mask and fp32 softmax) with its two products
run by compiled kernels instead of BLAS: scores by `codes.gemm` (queries x keys^T, the keys read as they lie) and
the output by `codes.gemm_nn` (softmax weights x values, the values read as they lie).

Why: over a long cache a short query's attention is a thin product (gemma3-270m: 68 rows of 256 against 4,113
keys in each full layer), where BLAS ran at ~175 GFLOP/s on this 2-core machine; the codes kernels' fixed
register blocking keeps such shapes near the GEMM's rate. What it promises: each score and each output element is
one fixed reduction (over the head dim, then over the keys in order), never depending on the query's row count,
its place or the thread count; its bits are this mode's own (its runtime fingerprint names `NAME`). A head size
that is not a multiple of 16 runs the grouped kernel's BLAS products (a property of the model: one path per model).

Keys and values come as one tensor, or as `Segments` (the mode's cache, kernels/segments.py: a graft's KV where it
lies, then the layer's own rows): scores per piece side by side (a score is one dot product), the output one sum
over the keys in order continued across the pieces (`codes.gemm_nn(out=)`); the same bits either way.
"""

from __future__ import annotations

import torch
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from galahad.kernels import codes, grouped
from galahad.kernels.segments import Segments

NAME = "galahad_grouped_codes"


def _per_head(fn, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fn on every [batch, kv head] pair of a [b, h, m, k] and b [b, h, ., .]: [b, h, m, n]."""
    bs, hs = a.shape[0], a.shape[1]
    if bs * hs == 1:
        return fn(a[0, 0], b[0, 0])[None, None]
    return torch.stack([torch.stack([fn(a[i, h], b[i, h]) for h in range(hs)]) for i in range(bs)])


def _offsets(parts: list[torch.Tensor]):
    """Each piece with the column its keys start at in the pieces joined, and how many it holds."""
    at = 0
    for part in parts:
        n = part.shape[-2]
        yield part, at, n
        at += n


def _scores(stacked: torch.Tensor, key: torch.Tensor | Segments) -> torch.Tensor:
    """queries x keys^T per [batch, kv head]; over pieces, each piece's columns written in place side by side
    (a score is one dot product: its bits do not depend on the other keys)."""
    if isinstance(key, torch.Tensor) or len(key.parts) == 1:
        return _per_head(codes.gemm, stacked, key if isinstance(key, torch.Tensor) else key.parts[0])
    b, hs, m = stacked.shape[:3]
    out = torch.empty((b, hs, m, key.shape[-2]), dtype=torch.float32)
    for i in range(b):
        for h in range(hs):
            for k, at, n in _offsets(key.parts):
                codes.gemm(stacked[i, h], k[i, h], out=out[i, h, :, at : at + n])
    return out


def _out(weights: torch.Tensor, value: torch.Tensor | Segments) -> torch.Tensor:
    """weights x values per [batch, kv head]; over pieces, one sum over the keys in order, continued from each
    piece to the next (`codes.gemm_nn(out=)`, from +0.0 as a single call starts): the bits of one product over
    the pieces joined."""
    if isinstance(value, torch.Tensor) or len(value.parts) == 1:
        return _per_head(codes.gemm_nn, weights, value if isinstance(value, torch.Tensor) else value.parts[0])
    b, hs = weights.shape[0], weights.shape[1]
    out = torch.zeros((b, hs, weights.shape[2], value.shape[-1]), dtype=torch.float32)
    for i in range(b):
        for h in range(hs):
            for v, at, n in _offsets(value.parts):
                codes.gemm_nn(weights[i, h, :, at : at + n], v[i, h], out=out[i, h])
    return out


def codes_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                    softcap: float | None = None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """The grouped kernel's interface and computation (see its docstring), its products compiled."""
    if query.shape[-1] % codes.LANES:
        if isinstance(key, Segments):
            key, value = key.joined(), value.joined()
        return grouped.grouped_attention(module, query, key, value, attention_mask, dropout, scaling, softcap,
                                         **kwargs)
    return grouped.attend(query, key, value, attention_mask, scaling, softcap, _scores, _out)


def register() -> str:
    """Make NAME a valid `attn_implementation` (attention function plus eager's additive mask)."""
    ALL_ATTENTION_FUNCTIONS.register(NAME, codes_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, eager_mask)
    return NAME
