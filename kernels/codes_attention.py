"""The `codes` kernel mode's attention: the grouped kernel's computation (kernels/grouped.py) with its two
products run by compiled kernels instead of BLAS: scores by `codes.gemm`, the output by `codes.gemm_nn`, the
keys and values read as they lie. A short query's attention over a long cache is a thin product, where BLAS
is slow and the kernels' fixed register blocking is not.

Each score and output element is one fixed reduction, independent of the row count, its place and the
thread count; the bits are this mode's own (its fingerprint names `NAME`). A head size that is not a
multiple of 16 runs the grouped kernel's BLAS products.
"""

from __future__ import annotations

import torch
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from galahad.kernels import codes, grouped

NAME = "galahad_grouped_codes"


def _per_head(fn, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fn on every [batch, kv head] pair of a [b, h, m, k] and b [b, h, ., .]: [b, h, m, n]."""
    bs, hs = a.shape[0], a.shape[1]
    if bs * hs == 1:
        return fn(a[0, 0], b[0, 0])[None, None]
    return torch.stack([torch.stack([fn(a[i, h], b[i, h]) for h in range(hs)]) for i in range(bs)])


def codes_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                    softcap: float | None = None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """The grouped kernel's interface and computation (see its docstring), its products compiled."""
    if query.shape[-1] % codes.LANES:
        return grouped.grouped_attention(module, query, key, value, attention_mask, dropout, scaling, softcap,
                                         **kwargs)
    return grouped.attend(query, key, value, attention_mask, scaling, softcap,
                          lambda stacked, k: _per_head(codes.gemm, stacked, k),
                          lambda weights, v: _per_head(codes.gemm_nn, weights, v))


def register() -> str:
    """Make NAME a valid `attn_implementation` (attention function plus eager's additive mask)."""
    ALL_ATTENTION_FUNCTIONS.register(NAME, codes_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, eager_mask)
    return NAME
