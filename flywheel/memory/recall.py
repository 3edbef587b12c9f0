"""The graft -> decode path: what `solve`, every eval and `replay` run, so what is measured ships.

Contexts are built by the pinned schedules (`workers/schedule.py`) and decoded with the answer's stop rule
by `workers/answer.py` (`answer_decode`, re-exported here). Here: a context prefilled once and decoded many
times (`Prepared`), and `graft_decode`. With `recompute` the chain's tokens are prefilled afresh instead of
grafted: the control that proves the graft an exact cache and shows what it saves.
"""

from __future__ import annotations

from galahad.flywheel.artifacts.store import BlobStore
from galahad.workers import schedule
from galahad.workers.answer import Recalled, answer_decode, decode
from galahad.workers.schedule import Context, graft, render

__all__ = ["Prepared", "Recalled", "answer_decode", "decode", "graft", "graft_decode", "render"]


class Prepared:
    """A context ready to decode: memory grafted (or recomputed, or none) and the prompt prefilled once.
    Each `decode` continues from a copy of it, so k samples cost one prefill plus k short decodes (as the
    generator samples), and each sample's bytes equal a fresh `graft_decode` with its seed."""

    def __init__(self, engine, store: BlobStore, tail: str | None, text: str, recompute: bool = False,
                 max_tokens: int = 0):
        self.engine = engine
        self._ctx: Context | None = schedule.graft_then_prefill(engine, store, tail, text, max_tokens, recompute)

    def decode(self, max_tokens: int, temperature: float = 0.0, seed: int = 0, last: bool = False) -> Recalled:
        """`last`: no decode follows, so this one may extend the prefilled cache itself (no copy)."""
        if self._ctx is None:
            raise RuntimeError("this context was already consumed by its last decode")
        ctx = self._ctx
        if last:
            self._ctx = None
        return decode(self.engine, ctx, max_tokens, temperature, seed, copy_cache=not last, charge_prefill=False)


def graft_decode(engine, store: BlobStore, tail: str | None, text: str, max_tokens: int,
                 temperature: float = 0.0, seed: int = 0, recompute: bool = False) -> Recalled:
    """Graft the chain ending at `tail` (None: an empty cache), then decode `text`'s continuation, with
    logits at the last position only: the serving configuration `galahad exactness` proves byte-identical
    to recomputation. What cannot fit the context window is refused before any forward pass.
    `recompute`: prefill the chain's tokens instead of grafting its KV (same schedule, same bits)."""
    ctx = schedule.graft_then_prefill(engine, store, tail, text, max_tokens, recompute)
    return decode(engine, ctx, max_tokens, temperature, seed)
