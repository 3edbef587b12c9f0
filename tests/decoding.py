"""Tests' one-call decode: prefill a prompt after a cache's contents, then `Engine.continue_decode`."""

from __future__ import annotations


def prefill_decode(engine, cache, prompt_ids: list[int], start: int, max_new_tokens: int, **sampling):
    logits = engine.prefill(cache, prompt_ids, start, last_only=True)[-1]
    return engine.continue_decode(cache, logits, start + len(prompt_ids), max_new_tokens, **sampling)
