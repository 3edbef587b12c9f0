"""The one decode of an answer: a context the pinned schedules build (`schedule.py`), decoded with the
answer's stop rule, and what it read and wrote (`Recalled`). `solve`, every eval, `replay` and the
depositor's stored recall answers all run `answer_decode`, so what is measured, served and stored is one
function of (engine, memory, question, prompt format, cap). Importing it imports no torch.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from galahad.flywheel.artifacts.chain import Source
from galahad.flywheel.problems import prompts
from galahad.workers import schedule
from galahad.workers.schedule import Context

__all__ = ["Recalled", "answer_decode", "decode"]


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


def answer_decode(engine, store: Source | None, tail: str | None, question: str, prompt: str, max_tokens: int,
                  temperature: float = 0.0, seed: int = 0, recompute: bool = False,
                  shared_prefix: bool = True) -> Recalled:
    """The one decode of a question, in the context `schedule.context` builds (the shared prefix's two-span
    schedule for the base model; `shared_prefix` False: the one-span schedule of records made before it).
    `Solver` answers its routes with it, the evals' `execute` runs their specs with it, and the depositor
    stores each recall's with it."""
    ctx = schedule.context(engine, store, tail, question, prompt, max_tokens, recompute, shared_prefix)
    return decode(engine, ctx, max_tokens, temperature, seed)
