"""Schedule-invariant attention for CPU: a query's output bits depend only on the keys its mask lets it see,
never on how many other keys the cache happens to hold, how many queries share the call, or where the
call's chunk boundaries fall.

Why stock attention is not invariant: it reduces over the cache length, which changes with the schedule
(a DynamicCache sliding layer returns the last W-1 cached positions plus the new ones, so one long forward
sees more, masked, keys than a token-by-token decode), and its GEMMs take different paths for different
row counts (q_len == 1 in particular).

How this kernel is invariant:
- Keys are laid out on a grid of fixed blocks of `BLOCK` positions aligned to *absolute* positions (from
  `position_ids`: the last key is the last query), padded with masked slots. A real key therefore always
  sits in the same block at the same offset, whatever the schedule.
- Scores: one GEMM per KV head over head_dim (a fixed reduction length) with the oneDNN path, which is
  row- and column-invariant (kernels/linear.py). Masked and padded scores become -inf.
- Softmax: the row max is exact in any order; exp runs on the SIMD body only (kernels/pointwise.py);
  exp(-inf) is exactly +0.
- Reductions over keys (the normaliser and P @ V) are split into the fixed blocks: within a block a GEMM
  (or sum) of fixed length BLOCK, across blocks a sequential sum in absolute block order starting from +0.
  A block the query cannot see contributes exactly +0, and x + 0 == x, so extra or missing masked blocks
  never move a real contribution. (One GEMM over all keys would not do: oneDNN blocks K internally.)
The normaliser is applied after P @ V (out = (E @ V) / sum E), unlike eager attention, so bits differ from
stock eager; they are equal across schedules, which is what this mode promises.
"""

from __future__ import annotations

import torch
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from galahad.kernels.linear import gemm_nt
from galahad.kernels.pointwise import invariant_pointwise

NAME = "galahad_invariant"
BLOCK = 64  # keys per reduction block: a multiple of the SIMD pair, small enough to waste little padding


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


def attend_one_group(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor,
    scaling: float,
    softcap: float | None,
) -> torch.Tensor:
    """One KV head. q [R, Lq, D] (the R query heads sharing it), k/v [Nb*B, D] on the block grid,
    allowed [Lq, Nb*B] bool. Returns [R, Lq, D]."""
    r, lq, d = q.shape
    nb = k.shape[0] // BLOCK
    rows = r * lq
    scores = gemm_nt(q.reshape(rows, d), k) * scaling
    if softcap is not None:
        scores = invariant_pointwise(torch.tanh, scores / softcap) * softcap
    scores = scores.view(r, lq, -1).masked_fill(~allowed, float("-inf")).view(rows, -1)
    row_max = scores.amax(dim=-1, keepdim=True)
    probs = invariant_pointwise(torch.exp, scores - row_max)  # unnormalised; exactly +0 where masked
    blocked = probs.view(rows, nb, BLOCK)
    # Normaliser: fixed-length sums per block, then a sequential (double-accumulated) sum across blocks.
    denom = blocked.sum(dim=-1).cumsum(dim=-1)[:, -1:]
    p_blocks = blocked.transpose(0, 1).contiguous()  # [Nb, rows, B]
    v_blocks = v.view(nb, BLOCK, d).transpose(1, 2).contiguous()  # [Nb, D, B]
    acc = torch.zeros((rows, d), dtype=q.dtype)
    for b in range(nb):
        acc = acc + gemm_nt(p_blocks[b], v_blocks[b])
    return (acc / denom).view(r, lq, d)


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
        kp = key.new_zeros((kv_heads, nb * BLOCK, d))
        vp = value.new_zeros((kv_heads, nb * BLOCK, d))
        kp[:, span] = key[bi]
        vp[:, span] = value[bi]
        allowed = torch.zeros((lq, nb * BLOCK), dtype=torch.bool)
        if attention_mask is None:
            allowed[:, span] = True
        else:
            m = attention_mask[min(bi, attention_mask.shape[0] - 1), 0]
            allowed[:, span] = m if m.dtype == torch.bool else m == 0  # additive masks: 0 = attend
        for g in range(kv_heads):
            hs = slice(g * group, (g + 1) * group)
            out[bi, hs] = attend_one_group(query[bi, hs], kp[g], vp[g], allowed, scale, softcap)
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Make NAME a valid `attn_implementation` (attention function plus its mask builder)."""
    ALL_ATTENTION_FUNCTIONS.register(NAME, invariant_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, _mask)
    return NAME
