"""Grouped-query attention without copying keys: `attn_implementation="grouped"`.

transformers' eager attention expands every KV head to the query heads that share it (`repeat_kv`)
before its two matmuls: on gemma3-270m (4 query heads per KV head) that copies the whole cache, four
times over, in every layer of every step. For a 32-row decode batch over a ~90-token prompt it was a
third of the layers' time (measured in place: the layers took 260 ms, 202 ms with this kernel). Here the
query heads of one KV head are stacked as rows instead ([batch, kv_heads, group * q, head_dim]), so each
matmul reads the cache once; the mask, scaling, optional soft-capping and the fp32 softmax are eager's.

What it promises: determinism per input, the same bits for the same inputs run after run and in a fresh
process (`tests/test_kernels.py`), which is what sampling per seed needs. Not eager's bits: its matmuls
have other shapes than eager's, so whether BLAS rounds them alike depends on the CPU (alike on Intel
family 6; not on AMD family 26, nor in padded decode steps on AMD family 25, where they differ by ~4e-7).

What runs it: the generators (`GeneratorRuntime` in workers/runtime.py: sampled text is verified text
whatever computed it). The `codes` kernel mode runs the same computation with compiled products
(kernels/codes_attention.py), and this kernel for a head size its products do not take. The `stock` runtime
keeps transformers' `eager`.
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
