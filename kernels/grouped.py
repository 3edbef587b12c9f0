"""Grouped-query attention without copying keys: `attn_implementation="grouped"`.

transformers' eager attention expands every KV head to its query heads (`repeat_kv`), copying the cache
once per query head in every layer of every step. Here the query heads of one KV head are stacked as rows
([batch, kv_heads, group * q, head_dim]), so each matmul reads the cache once; the mask, scaling, optional
soft-capping and fp32 softmax are eager's.

It promises determinism per input (`tests/test_kernels.py`), what sampling per seed needs, not eager's bits
(its matmuls have other shapes; on some CPUs BLAS rounds them differently). The generators run it
(`GeneratorRuntime`, workers/runtime.py); the `codes` mode runs the same computation with compiled products
(kernels/codes_attention.py); the `stock` runtime keeps `eager`.
"""

from __future__ import annotations

import torch
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

NAME = "galahad_grouped"


def attend(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: torch.Tensor | None,
           scaling: float | None, softcap: float | None, scores_of, out_of) -> tuple[torch.Tensor, torch.Tensor]:
    """This kernel's computation with its two products given: `scores_of(stacked queries [b, kv_heads, group * q,
    d], key)` -> [b, kv_heads, group * q, s] and `out_of(weights, value)` -> [b, kv_heads, group * q, d]."""
    b, heads, q, d = query.shape
    kv_heads, s = key.shape[1], key.shape[2]
    group = heads // kv_heads
    scale = d**-0.5 if scaling is None else scaling
    scores = scores_of(query.reshape(b, kv_heads, group * q, d), key) * scale
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        mask = attention_mask[:, :, :, :s]
        scores = (scores.view(b, kv_heads, group, q, s) + mask[:, :, None]).view(b, kv_heads, group * q, s)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    out = out_of(weights, value).view(b, heads, q, d)
    return out.transpose(1, 2).contiguous(), weights


def grouped_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      softcap: float | None = None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """query [b, heads, q, d], key/value [b, kv_heads, s, d], additive mask [b, 1, q, >= s]; returns
    ([b, q, heads, d], the attention weights [b, kv_heads, group * q, s]), as eager attention's interface."""
    return attend(query, key, value, attention_mask, scaling, softcap,
                  lambda stacked, k: torch.matmul(stacked, k.transpose(2, 3)), torch.matmul)


def register() -> str:
    """Make NAME a valid `attn_implementation` (attention function plus eager's additive mask)."""
    ALL_ATTENTION_FUNCTIONS.register(NAME, grouped_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, eager_mask)
    return NAME
