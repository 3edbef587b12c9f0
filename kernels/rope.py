"""RoPE kernels in fp32: apply a rotation to keys, and re-rotate cached keys to another position.

Re-rotation is what every position-shifting KV reuse does (Prompt Cache, CacheBlend, TurboRAG). In exact
arithmetic R(d)R(p)k == R(p+d)k; in floating point it is not, which is why Galahad's exact graft only
ever restores keys at their own positions (d = 0) and keeps shifting as an explicit, inexact mode.
"""

from __future__ import annotations

import torch


class RopeKernel:
    """Base: the rotate-half convention used by Llama/Gemma in transformers. Swappable by subclassing."""

    name = "rope-rotate-half-fp32"

    def cos_sin(self, positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.to(torch.float32)[:, None] * inv_freq.to(torch.float32)[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def apply(self, x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
        """Rotate x [..., seq, head_dim] to `positions` [seq]. Partial rotary (a table of fewer than
        head_dim / 2 frequencies, as Phi-3's `partial_rotary_factor`): the first 2 * len(inv_freq) dims are
        rotated, the rest pass through unchanged."""
        cos, sin = self.cos_sin(positions, inv_freq)
        xf = x.to(torch.float32)
        rot = cos.shape[-1]
        if rot == x.shape[-1]:
            return (xf * cos + self._rotate_half(xf) * sin).to(x.dtype)
        head, tail = xf[..., :rot], xf[..., rot:]
        return torch.cat([head * cos + self._rotate_half(head) * sin, tail], dim=-1).to(x.dtype)

    def rerotate(self, keys: torch.Tensor, delta: int, inv_freq: torch.Tensor) -> torch.Tensor:
        """Move already-rotated keys [..., seq, head_dim] by `delta` positions. delta=0 returns them unchanged,
        bit for bit: that is the only exact case, so it must not even round-trip through a multiply."""
        if delta == 0:
            return keys
        positions = torch.full((keys.shape[-2],), delta, dtype=torch.int64)
        return self.apply(keys, positions, inv_freq)
