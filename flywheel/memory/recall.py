"""The one graft -> decode path: what `solve`, every eval and `replay` run, so what is measured ships.

The context a decode runs in is built by the pinned schedules (`workers/schedule.py`): the chain restored
at its own positions (nothing re-rotated: own-position graft is the exact operating point) and the prompt
prefilled after it, or the base model's two-span few-shot schedule. Here that context is decoded with the
answer's stop rule. With `recompute`, the chain's tokens (the same solutions as plain prompt text) are
prefilled afresh instead of grafted: the control that proves the graft is an exact cache (same output
bytes) and shows what it saves.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.problems import prompts
from galahad.workers import schedule
from galahad.workers.schedule import Context, graft, render

__all__ = ["Prepared", "Recalled", "answer_decode", "decode", "graft", "graft_decode", "render"]


@dataclass(frozen=True)
class Recalled:
    """One decode over (grafted memory, prompt): what it read and what it wrote."""

    artifacts: list[str]  # the grafted chain, root first (empty: no memory)
    start: int  # grafted tokens: the prompt's first position
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    output_text: str
    seconds: float  # the whole: graft + the prompt's forward + decode
    graft_seconds: float = 0.0  # of which the chain's load (hash-checked) and restore
    prefill_seconds: float = 0.0  # of which graft + encoding + the prompt's forward: time to the first token

    @property
    def answer(self) -> str:
        return prompts.answer_from_output(self.output_text)


def decode(engine, ctx: Context, max_tokens: int, temperature: float = 0.0, seed: int = 0, copy_cache: bool = False,
           charge_prefill: bool = True) -> Recalled:
    """Decode from `ctx` (`copy_cache`: from a copy, leaving `ctx` as it was); `charge_prefill`: its
    seconds include building the context."""
    cache = copy.deepcopy(ctx.cache) if copy_cache else ctx.cache
    out = engine.continue_decode(cache, ctx.logits, ctx.pos, max_tokens, temperature=temperature, seed=seed,
                                 stop=(prompts.ANSWER_STOP,))
    seconds = out.seconds + (ctx.prefill_seconds if charge_prefill else 0.0)
    return Recalled(ctx.artifacts, ctx.start, ctx.ids, list(out.token_ids), out.text, seconds, ctx.graft_seconds,
                    ctx.prefill_seconds)


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


def answer_decode(engine, store: BlobStore, tail: str | None, question: str, prompt: str, max_tokens: int,
                  temperature: float = 0.0, seed: int = 0, recompute: bool = False,
                  shared_prefix: bool = True) -> Recalled:
    """The one decode of a question, in the context `schedule.context` builds (the shared prefix's two-span
    schedule for the base model; `shared_prefix` False: the one-span schedule of records made before it).
    `Solver` answers its routes with it and the evals' `execute` runs their specs with it."""
    ctx = schedule.context(engine, store, tail, question, prompt, max_tokens, recompute, shared_prefix)
    return decode(engine, ctx, max_tokens, temperature, seed)


def graft_decode(engine, store: BlobStore, tail: str | None, text: str, max_tokens: int,
                 temperature: float = 0.0, seed: int = 0, recompute: bool = False) -> Recalled:
    """Graft the chain ending at `tail` (None: an empty cache), then decode `text`'s continuation, with
    logits at the last position only: the serving configuration `galahad exactness` proves byte-identical
    to recomputation. What cannot fit the context window is refused before any forward pass.
    `recompute`: prefill the chain's tokens instead of grafting its KV (same schedule, same bits)."""
    ctx = schedule.graft_then_prefill(engine, store, tail, text, max_tokens, recompute)
    return decode(engine, ctx, max_tokens, temperature, seed)
