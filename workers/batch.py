"""The decode batch: rows of several prompts decoded together, each row at its own position.

Rows of different prompts differ in length, so the batch is left-padded as transformers' batched
generation is: padding masked by a 2-D attention mask, each row's RoPE position its own. Sliding-window
layers keep their last `window - 1` slots and mask by slot distance. A prompt prefilled with others
(`Engine.prefill_rows`) is exact only while its whole span fits in the window, which the generator checks.
Rows that leave are dropped and all-padding slots trimmed. With prompts of one length there is no padding
and no mask: the forward calls a one-prompt batch always ran.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from galahad.workers.engine import Engine


def _with_rows(cache: DynamicCache, pick) -> DynamicCache:
    """A new cache whose layers hold `pick(tensor)` (a new tensor) of each of `cache`'s keys and values,
    everything else as in `cache`, which is not touched: the rows wanted are copied once, instead of a
    deep copy of every row followed by another copy to reshape it."""
    out = copy.copy(cache)
    out.layers = []
    for layer in cache.layers:
        new = copy.copy(layer)
        new.keys, new.values = pick(layer.keys), pick(layer.values)
        out.layers.append(new)
    return out


def repeat_rows(cache: DynamicCache, rows: int) -> DynamicCache:
    """Each of `cache`'s rows `rows` times, as `DynamicCache.batch_repeat_interleave` would make them."""
    return _with_rows(cache, lambda t: t.repeat_interleave(rows, dim=0))


def select_row(cache: DynamicCache, row: int) -> DynamicCache:
    """`cache`'s row `row` alone, as `DynamicCache.batch_select_indices([row])` would leave it."""
    return _with_rows(cache, lambda t: t[row : row + 1].clone())


def _stored(window: int | None, slots: int) -> int:
    """How many of `slots` logical slots a layer keeps: all, or a sliding layer's last `window - 1` (the
    layer's window as the architecture adapter states it: `LoadedModel.windows`)."""
    return slots if window is None else min(slots, window - 1)


def _set_length(layer, slots: int) -> None:
    if hasattr(layer, "cumulative_length"):
        layer.cumulative_length = slots


def _left_pad(cache: DynamicCache, windows: tuple[int | None, ...], slots: int, target: int) -> None:
    """Pad every layer on the left so the cache holds `target` logical slots, its real ones last."""
    if target == slots:
        return
    for window, layer in zip(windows, cache.layers, strict=True):
        pad = _stored(window, target) - layer.keys.shape[-2]
        if pad:
            layer.keys = F.pad(layer.keys, (0, 0, pad, 0))
            layer.values = F.pad(layer.values, (0, 0, pad, 0))
        _set_length(layer, target)


def _trim(cache: DynamicCache, slots: int, n: int) -> None:
    """Drop the first `n` logical slots (padding in every row) from every layer that still holds them."""
    for layer in cache.layers:
        held_from = slots - layer.keys.shape[-2]  # the first logical slot this layer still holds
        drop = max(0, n - held_from)
        if drop:
            layer.keys = layer.keys[:, :, drop:]
            layer.values = layer.values[:, :, drop:]
        _set_length(layer, slots - n)


class DecodeBatch:
    """Rows decoded together: a left-padded cache, its real-slot mask [rows, slots] and each row's next
    position. Plain state plus three operations: `admit` rows of a prompt, `keep` some rows, `step`."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.cache: DynamicCache | None = None
        self.mask = torch.ones(0, 0, dtype=torch.bool, device=engine.device)
        self.positions: list[int] = []
        self.slots = 0

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def padded(self) -> bool:
        return bool(len(self)) and not bool(self.mask.all())

    def admit(self, cache: DynamicCache, rows: int, pos: int, mask: torch.Tensor | None = None) -> None:
        """`rows` copies of a prompt's one-row cache join the batch as its last rows; `pos` is the prompt's
        next position, `mask` its real slots [slots] when the cache holds padding (None: every slot real).
        The cache itself is not touched."""
        new = repeat_rows(cache, rows)
        slots = cache.get_seq_length()
        if mask is None:
            mask = torch.ones(rows, slots, dtype=torch.bool, device=self.engine.device)
        else:
            assert mask.shape == (slots,)
            mask = mask.to(self.engine.device).expand(rows, slots).clone()
        if not len(self):
            self.cache, self.mask, self.slots, self.positions = new, mask, slots, [pos] * rows
            return
        assert self.cache is not None
        target = max(self.slots, slots)
        windows = self.engine.loaded.windows
        _left_pad(self.cache, windows, self.slots, target)
        _left_pad(new, windows, slots, target)
        for mine, theirs in zip(self.cache.layers, new.layers, strict=True):
            mine.keys = torch.cat([mine.keys, theirs.keys], dim=0)
            mine.values = torch.cat([mine.values, theirs.values], dim=0)
        self.mask = torch.cat([F.pad(self.mask, (target - self.slots, 0), value=False),
                               F.pad(mask, (target - slots, 0), value=False)], dim=0)
        self.slots = target
        self.positions += [pos] * rows

    def keep(self, rows: list[int]) -> None:
        """Keep only these rows (in this order); trim the slots that are now padding in every row."""
        if len(rows) == len(self):
            return
        self.positions = [self.positions[r] for r in rows]
        if not rows:
            self.cache, self.mask, self.slots = None, self.mask[:0, :0], 0
            return
        assert self.cache is not None
        index = torch.tensor(rows, device=self.engine.device)
        self.cache.batch_select_indices(index)
        self.mask = self.mask[index]
        n = int(self.mask.any(dim=0).long().cumsum(0).eq(0).sum())  # leading slots no row uses
        if n:
            _trim(self.cache, self.slots, n)
            self.mask = self.mask[:, n:]
            self.slots -= n

    def step(self, tokens: list[int]) -> torch.Tensor:
        """Feed each row its next token at its own position; the rows' last-position logits [rows, vocab]."""
        assert self.cache is not None and len(tokens) == len(self)
        mask = None
        if self.padded:
            mask = torch.cat([self.mask, torch.ones(len(self), 1, dtype=torch.bool, device=self.mask.device)], 1)
        logits = self.engine.forward_rows(self.cache, tokens, self.positions, mask)
        self.mask = torch.cat([self.mask, torch.ones(len(self), 1, dtype=torch.bool, device=self.mask.device)], 1)
        self.slots += 1
        self.positions = [p + 1 for p in self.positions]
        return logits
