"""Schedule-invariant attention for CPU: a query's output bits depend only on the keys its mask lets it see,
never on how many other keys the cache holds, how many queries share the call, or where chunks end.

Keys sit on a grid of `BLOCK`-position blocks aligned to *absolute* positions, padded with masked (-inf)
slots. Scores and P @ [V | 1] (the ones column gives the block's normaliser) are batched GEMMs of fixed
per-block shape (MKL strict CBWR, pinned by the runtime, is row-invariant for M >= 4; smaller M is
padded); exp runs on the SIMD body only (kernels/pointwise.py); blocks are summed in absolute order from
+0, so masked or missing blocks add exact zeros. Decode-sized calls run on one thread. The normaliser is
applied after P @ V, so bits differ from stock eager but are equal across schedules. Why each step is
needed, and the measurements: docs/gpu_kernels.md.
"""

from __future__ import annotations

import torch
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from galahad.kernels.linear import serial_if_small
from galahad.kernels.pointwise import invariant_pointwise

NAME = "galahad_invariant"
BLOCK = 64  # keys per reduction block: a multiple of the SIMD pair, small enough to waste little padding
MIN_BMM_ROWS = 4  # MKL strict-CNR sgemm differs for M in {1, 2, 3}


def _mask(*args, **kwargs) -> torch.Tensor | None:
    """transformers' boolean (True = attend) mask, always materialised: a skipped (None) causal mask would
    leave the kernel guessing which keys a query may see."""
    kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(*args, **kwargs)


def block_layout(first_position: int, n_keys: int, block: int = BLOCK) -> tuple[int, int]:
    """(lead, n_blocks): key j goes to padded slot lead + j, where slot s is absolute position
    first_position - lead + s and block boundaries fall on multiples of `block`."""
    lead = first_position % block
    return lead, -(-(lead + n_keys) // block)


def _bmm_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.bmm (MKL) with the row count padded to MIN_BMM_ROWS: with `MKL_CBWR=...,STRICT` a row's bits
    then depend on neither M, the batch count, the batch position nor the thread count (tested)."""
    nb, m, k = a.shape
    if m < MIN_BMM_ROWS:
        a = torch.cat([a, a.new_zeros((nb, MIN_BMM_ROWS - m, k))], dim=1)
    return torch.bmm(a, b)[:, :m]


def attend_one_group(
    q: torch.Tensor,
    k_grid: torch.Tensor,
    v_grid: torch.Tensor,
    allowed: torch.Tensor,
    scaling: float,
    softcap: float | None,
) -> torch.Tensor:
    """One KV head. q [R, Lq, D] (the R query heads sharing it); k_grid [Nb, B, D] and v_grid [Nb, B, D+1]
    the keys and values on the block grid (v_grid has a ones column at real keys); allowed [Nb, Lq, B]
    bool. Returns [R, Lq, D]."""
    r, lq, d = q.shape
    nb = k_grid.shape[0]
    rows = r * lq
    # Scores per block: the queries against each block's B keys, a GEMM of fixed N = B and K = D.
    scores = _bmm_rows(q.reshape(1, rows, d).expand(nb, rows, d), k_grid.transpose(1, 2)) * scaling
    if softcap is not None:
        scores = invariant_pointwise(torch.tanh, scores / softcap) * softcap
    scores = scores.view(nb, r, lq, BLOCK).masked_fill_(~allowed[:, None], float("-inf"))
    row_max = scores.amax(dim=(0, 3), keepdim=True)  # a max is exact in any order
    probs = invariant_pointwise(torch.exp, scores - row_max)  # unnormalised; exactly +0 where masked
    # P @ [V | 1] per block gives each block's partial output and its normaliser in one GEMM (K = B).
    # Across blocks: a sequential sum in block order from +0. (A tree `sum` would pair blocks differently
    # when masked blocks are added or removed; `cumsum` is sequential too but strided and 8x slower.)
    parts = _bmm_rows(probs.view(nb, rows, BLOCK), v_grid)
    total = torch.zeros_like(parts[0])
    for part in parts:
        total += part
    return (total[:, :d] / total[:, d:]).view(r, lq, d)


def invariant_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    softcap: float | None = None,
    position_ids: torch.Tensor | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers attention interface: query [B, H, Lq, D], key/value [B, Hkv, Lk, D], boolean mask
    [B, 1, Lq, Lk]; returns [B, Lq, H, D]. Inference only (dropout must be 0)."""
    if dropout:
        raise ValueError("invariant attention is inference-only (dropout must be 0)")
    if position_ids is None:
        raise ValueError(
            "invariant attention needs position_ids to align its key blocks to absolute positions"
        )
    bsz, heads, lq, d = query.shape
    kv_heads, lk = key.shape[1], key.shape[2]
    group = heads // kv_heads
    scale = scaling if scaling is not None else d**-0.5
    softcap = softcap if softcap is not None else getattr(module, "attn_logit_softcapping", None)
    out = query.new_empty((bsz, heads, lq, d))
    for bi in range(bsz):
        # DynamicCache returns keys for consecutive positions ending at the last query's position.
        first = int(position_ids[min(bi, position_ids.shape[0] - 1), -1]) - lk + 1
        lead, nb = block_layout(first, lk)
        span = slice(lead, lead + lk)
        with serial_if_small(2 * heads * lq * nb * BLOCK * d):
            allowed = torch.zeros((lq, nb * BLOCK), dtype=torch.bool)
            if attention_mask is None:
                allowed[:, span] = True
            else:
                m = attention_mask[min(bi, attention_mask.shape[0] - 1), 0]
                allowed[:, span] = m if m.dtype == torch.bool else m == 0  # additive masks: 0 = attend
            allowed = allowed.view(lq, nb, BLOCK).transpose(0, 1)
            for g in range(kv_heads):
                # Each element written once: zeros only in the padding, keys/values in their slots.
                k_grid = key.new_empty((nb * BLOCK, d))
                v_grid = value.new_empty((nb * BLOCK, d + 1))
                for grid in (k_grid, v_grid):
                    grid[:lead] = 0.0
                    grid[lead + lk :] = 0.0
                k_grid[span] = key[bi, g]
                v_grid[span, :d] = value[bi, g]
                v_grid[span, d] = 1.0
                hs = slice(g * group, (g + 1) * group)
                out[bi, hs] = attend_one_group(
                    query[bi, hs],
                    k_grid.view(nb, BLOCK, d),
                    v_grid.view(nb, BLOCK, d + 1),
                    allowed,
                    scale,
                    softcap,
                )
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Make NAME a valid `attn_implementation` (attention function plus its mask builder)."""
    ALL_ATTENTION_FUNCTIONS.register(NAME, invariant_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, _mask)
    return NAME
