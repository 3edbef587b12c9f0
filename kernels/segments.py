"""A cache layer whose keys and values stay in the pieces they lie in: the `codes` kernel mode's KV cache.

transformers' `DynamicLayer` appends by `torch.cat`: every forward copies the layer's whole cache to add its own
rows. After a 4,096-token graft on gemma3-270m that is ~40 MB of copies for a 17-token query (3.7 ms of its
50 ms on Intel model 167), and a decode step pays it again for every token. Here a layer holds
- a base: a tensor handed to it (a grafted artifact's KV, a batch's rows), read and never written, so an
  artifact held in the RAM tier is shared by every graft of it without a copy;
- its own rows, appended in place into a buffer it allocated with headroom (grown by copying only its own
  rows, never the base).
`update` returns `Segments` (the pieces in order), which the codes mode's attention reads piece by piece with
the bits of one product over the pieces joined (kernels/codes_attention.py: scores are per-key dot products;
the weights-by-values sums continue from one piece to the next, `codes.gemm_nn(out=)`). Anything else that
reads `layer.keys` (capture for a deposit, the decode batch, transformers' own crop/reorder) gets one tensor,
joined on read; anything that sets it makes that tensor the new base.

Never written twice: a buffer records how many of its rows are handed out (`used`); a layer appends in place only
at that mark, so a shallow copy of a layer, or a view read from it earlier, never sees its rows change (the
other layer then copies its own rows to a buffer of its own first). A sliding layer drops rows from the front
by moving where its rows start, and its buffer is reallocated (its kept rows only) when full: memory stays
within the window plus headroom.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

HEADROOM = 64  # rows a new buffer holds beyond what it must (a query, or 64 decode steps, append in place)


class Segments:
    """A layer's keys (or values) as pieces [b, h, n_i, d] along the sequence, in order (none empty)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[torch.Tensor]) -> None:
        self.parts = parts

    @property
    def shape(self) -> torch.Size:
        b, h, _, d = self.parts[0].shape
        return torch.Size((b, h, sum(p.shape[-2] for p in self.parts), d))

    @property
    def dtype(self) -> torch.dtype:
        return self.parts[0].dtype

    @property
    def device(self) -> torch.device:
        return self.parts[0].device

    def joined(self) -> torch.Tensor:
        return self.parts[0] if len(self.parts) == 1 else torch.cat(self.parts, dim=-2)


class _Buffer:
    __slots__ = ("t", "used")

    def __init__(self, t: torch.Tensor, used: int) -> None:
        self.t, self.used = t, used


class _Rows:
    """One of a layer's two tensors (keys or values): base rows, then own rows buf.t[:, :, lo:hi]. Never changed
    once made (appending or dropping makes a new one), so a shallow copy of a layer shares nothing that moves."""

    __slots__ = ("base", "buf", "lo", "hi", "empty")

    def __init__(self, base: torch.Tensor | None, buf: _Buffer | None = None, lo: int = 0, hi: int = 0) -> None:
        held = base is not None and base.dim() == 4 and base.shape[-2] > 0
        self.base = base if held else None
        self.empty = None if held else base  # what was set when it holds no rows (None, or transformers' tensor([]))
        self.buf, self.lo, self.hi = buf, lo, hi

    def __len__(self) -> int:
        return (0 if self.base is None else self.base.shape[-2]) + self.hi - self.lo

    def parts(self) -> list[torch.Tensor]:
        own = [] if self.buf is None or self.hi == self.lo else [self.buf.t[:, :, self.lo : self.hi]]
        return ([] if self.base is None else [self.base]) + own

    def tensor(self) -> torch.Tensor | None:
        parts = self.parts()
        return Segments(parts).joined() if parts else self.empty

    def appended(self, new: torch.Tensor) -> _Rows:
        n, buf, lo, hi = new.shape[-2], self.buf, self.lo, self.hi
        base = self.base
        if base is not None and (base.shape[:2] != new.shape[:2] or base.shape[-1] != new.shape[-1]
                                 or base.dtype != new.dtype or base.device != new.device):
            raise ValueError(f"cannot append {new.dtype} {tuple(new.shape)} rows after {base.dtype} "
                             f"{tuple(base.shape)} ones")
        fits = (buf is not None and buf.used == hi and hi + n <= buf.t.shape[-2]
                and buf.t.shape[:2] == new.shape[:2] and buf.t.shape[-1] == new.shape[-1]
                and buf.t.dtype == new.dtype and buf.t.device == new.device)
        if not fits:  # a buffer of its own: its own rows copied (never the base), with headroom
            own = hi - lo
            b, h, _, d = new.shape
            t = new.new_empty((b, h, own + n + max(HEADROOM, (own + n) // 4), d))
            if own:
                t[:, :, :own].copy_(buf.t[:, :, lo:hi])
            buf, lo, hi = _Buffer(t, own), 0, own
        buf.t[:, :, hi : hi + n].copy_(new)
        buf.used = hi + n
        return _Rows(self.base if self.base is not None else self.empty, buf, lo, hi + n)

    def last(self, rows: int) -> _Rows:
        """At most the last `rows` rows (views only: nothing is copied)."""
        drop = len(self) - rows
        if drop <= 0:
            return self
        base, lo = self.base, self.lo
        if base is not None:
            nb = base.shape[-2]
            if drop < nb:
                return _Rows(base[:, :, drop:], self.buf, lo, self.hi)
            base, drop = self.empty, drop - nb
        return _Rows(base, self.buf, lo + drop, self.hi)


class _Segmented:
    """What the two layer kinds share: keys and values as `_Rows`, read joined, set as a new base."""

    @property
    def keys(self) -> torch.Tensor | None:
        return self._k.tensor()

    @keys.setter
    def keys(self, value: torch.Tensor | None) -> None:
        self._k = _Rows(value)

    @property
    def values(self) -> torch.Tensor | None:
        return self._v.tensor()

    @values.setter
    def values(self, value: torch.Tensor | None) -> None:
        self._v = _Rows(value)

    def _append(self, key_states: torch.Tensor, value_states: torch.Tensor) -> tuple[Segments, Segments]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self._k, self._v = self._k.appended(key_states), self._v.appended(value_states)
        return Segments(self._k.parts()), Segments(self._v.parts())

    def held(self) -> int:
        """Rows the layer holds (a sliding layer: at most its window - 1)."""
        return len(self._k)


class SegmentedLayer(_Segmented, DynamicLayer):
    """A full-attention layer: every position's keys, base then own rows."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        return self._append(key_states, value_states)

    def get_seq_length(self) -> int:
        return len(self._k) if self.is_initialized else 0


class SegmentedSlidingLayer(_Segmented, DynamicSlidingWindowLayer):
    """A sliding-window layer: attends over its last window - 1 rows and the new ones, then keeps the last
    window - 1 (transformers' `DynamicSlidingWindowLayer`, without its copies; no past recording)."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if self.record_past:
            raise NotImplementedError("a segmented sliding layer does not record past states")
        self.cumulative_length += key_states.shape[-2]
        full = self._append(key_states, value_states)
        self._k, self._v = self._k.last(self.sliding_window - 1), self._v.last(self.sliding_window - 1)
        return full


def new_cache(config) -> DynamicCache:
    """transformers' cache for `config`, its full and sliding layers segmented (any other kind left as is)."""
    cache = DynamicCache(config=config)
    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicSlidingWindowLayer:
            cache.layers[i] = SegmentedSlidingLayer(sliding_window=layer.sliding_window)
        elif type(layer) is DynamicLayer:
            cache.layers[i] = SegmentedLayer()
    return cache
