"""Deposit a span's KV as an artifact, and graft a chain of artifacts back into a fresh cache.

Own-position graft is exact: the restored tensors are the very bytes the cache held, at the positions they
were computed at. Sliding-window layers keep their last W-1 positions, so an artifact stores the last
min(span, W-1) of its span for those layers and a restore keeps the last W-1 of the chain. The layer kinds,
KV heads, head size and RoPE tables come from the architecture adapter (workers/arch/).
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from galahad.flywheel.artifacts.format import Artifact, ArtifactMeta, check_compatible, encode
from galahad.flywheel.errors import GalahadError
from galahad.kernels.rope import RopeKernel
from galahad.workers.engine import Engine


def capture(engine: Engine, cache: DynamicCache, start: int, end: int) -> tuple[list, list]:
    """The K/V a span [start, end) left in the cache, in the shape the artifact stores them."""
    keys, values = [], []
    for w, layer in zip(engine.loaded.windows, cache.layers, strict=True):
        k, v = layer.keys, layer.values  # read once
        if w is None:
            if k.shape[-2] != end:
                raise ValueError(f"full layer holds {k.shape[-2]} positions, expected {end}")
            keys.append(k[:, :, start:end])
            values.append(v[:, :, start:end])
        else:
            keep = min(end - start, w - 1)
            keys.append(k[:, :, -keep:])
            values.append(v[:, :, -keep:])
    return keys, values


def deposit_span(
    engine: Engine,
    cache: DynamicCache,
    token_ids: list[int],
    start: int,
    parent: str | None,
    extra: dict | None = None,
) -> tuple[str, bytes]:
    """Prefill `token_ids` after the cache's chain (whose tail is `parent`) and encode the span's KV."""
    if (start == 0) != (parent is None):
        raise ValueError("a root artifact starts at 0 and only a root has no parent")
    engine.prefill(cache, token_ids, start, last_only=True)  # the KV is all a deposit keeps
    return encode_span(engine, cache, token_ids, start, parent, extra)


def encode_span(engine: Engine, cache: DynamicCache, token_ids: list[int], start: int, parent: str | None,
                extra: dict | None = None) -> tuple[str, bytes]:
    """Encode the KV a span [start, start+len) just prefilled into `cache` left there (id, bytes)."""
    end = start + len(token_ids)
    keys, values = capture(engine, cache, start, end)
    meta = ArtifactMeta(
        token_ids=tuple(int(t) for t in token_ids),
        start=start,
        parent=parent,
        model_fingerprint=engine.model_fingerprint,
        runtime_fingerprint=engine.runtime_fingerprint,
        layer_kinds=engine.loaded.layer_kinds,
        dtype=engine.runtime.dtype,
        extra=extra or {},
    )
    return encode(meta, keys, values)


def check_model_layout(engine: Engine, art: Artifact) -> None:
    """Each layer's K/V must be what this model's cache holds: its KV heads and head size, the runtime's
    dtype, and the span length the layer kind keeps (decode already checked them against the metadata)."""
    cfg = engine.model.config
    heads, dim = engine.loaded.arch.kv_heads(cfg), engine.loaded.arch.head_dim(cfg)
    dtype = getattr(torch, engine.runtime.dtype)
    n = len(art.meta.token_ids)
    for i, (w, k, v) in enumerate(zip(engine.loaded.windows, art.keys, art.values, strict=True)):
        want = (1, heads, n if w is None else min(n, w - 1), dim)
        for name, t in (("keys", k), ("values", v)):
            if tuple(t.shape) != want or t.dtype != dtype:
                raise GalahadError(f"artifact {art.id[:16]} layer {i} {name} are {list(t.shape)} {t.dtype}; the "
                                   f"running model holds {list(want)} {dtype}")


def check_chain(engine: Engine, chain: list[Artifact]) -> None:
    """Refuse anything that would not be an exact own-position graft, naming the problem."""
    if not chain:
        raise GalahadError("nothing to graft: the chain is empty")
    prev: Artifact | None = None
    for art in chain:
        check_compatible(art.meta, engine.model_fingerprint, engine.runtime_fingerprint)
        if art.meta.layer_kinds != engine.loaded.layer_kinds:
            raise GalahadError(f"artifact {art.id[:16]} has another layer layout than the running model")
        check_model_layout(engine, art)
        expected_parent, expected_start = (prev.id, prev.meta.end) if prev else (None, 0)
        if art.meta.parent != expected_parent or art.meta.start != expected_start:
            raise GalahadError(
                f"artifact {art.id[:16]} does not continue the chain: parent {str(art.meta.parent)[:16]} "
                f"at {art.meta.start}, expected {str(expected_parent)[:16]} at {expected_start}"
            )
        prev = art
    if chain[-1].meta.end > engine.loaded.context_window:
        raise GalahadError(f"chain of {chain[-1].meta.end} tokens exceeds the context window")


def _inv_freq(engine: Engine, layer_idx: int) -> torch.Tensor | None:
    """The RoPE table layer `layer_idx`'s keys were rotated with (None: a layer without RoPE)."""
    arch = engine.loaded.arch
    table = arch.layers(engine.model.config)[layer_idx].rope
    return None if table is None else arch.inv_freq(engine.model, table)


def _join(parts: list[torch.Tensor], keep: int | None) -> torch.Tensor:
    """The chain's positions for one layer: the artifact's own tensor when one suffices (no copy: a view
    over the bytes the store read), else one concatenation of just the pieces the layer keeps."""
    if keep is not None:
        need, i = 0, len(parts)
        while i > 0 and need < keep:
            i -= 1
            need += parts[i].shape[-2]
        parts = parts[i:]
    t = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-2)
    return t if keep is None or t.shape[-2] <= keep else t[:, :, -keep:]


def restore(engine: Engine, chain: list[Artifact], shift: int = 0, rope: RopeKernel | None = None) -> DynamicCache:
    """A fresh cache holding the chain's KV. `shift` != 0 re-rotates keys: the explicit inexact mode."""
    check_chain(engine, chain)
    cache = engine.new_cache()
    end = chain[-1].meta.end
    rope = rope or RopeKernel()
    for i, (w, layer) in enumerate(zip(engine.loaded.windows, cache.layers, strict=True)):
        keep = None if w is None else w - 1
        k = _join([a.keys[i] for a in chain], keep)
        v = _join([a.values[i] for a in chain], keep)
        inv_freq = _inv_freq(engine, i) if shift else None
        if inv_freq is not None:  # a NoPE layer's keys carry no position: nothing to move
            k = rope.rerotate(k, shift, inv_freq)
        seat(layer, k.to(engine.device), v.to(engine.device), None if w is None else end)
    return cache


def seat(layer, keys: torch.Tensor, values: torch.Tensor, length: int | None) -> None:
    """Hand an empty cache layer the KV tensors it holds from now on, as a graft does (`length`: a sliding
    layer's count of positions seen, None for a full layer)."""
    if length is not None:
        layer.cumulative_length = length
    layer.lazy_initialization(keys, values)
    layer.keys, layer.values = keys, values
