"""The base condition's few-shot prefix, prefilled once per process and continued from a copy per problem.

Every base record asks the base model the same few-shot examples before its own question. A spec with
`shared_prefix` runs the pinned two-span schedule: the prefix (BOS + the examples) prefilled as a span of
its own from position 0, then the question as a second span at its own positions, then the decode. The
prefix's cache is computed once per engine and kept; each problem continues from a deep copy of it, which
is the very state a fresh prefill of the prefix leaves (own positions, nothing re-rotated), so the output
bytes are the same with the kept prefix or without it (`tests/test_eval_progress.py` holds them equal on
the tiny model). Where the tokenizer joins the last example and the question into other tokens than the
two spans give, that problem runs the one-span schedule instead: the rule depends only on the text, so a
replay takes the same branch.
"""

from __future__ import annotations

import copy
import time
import weakref
from dataclasses import dataclass

from galahad.flywheel.memory.recall import Recalled, check_fits
from galahad.flywheel.problems import prompts

_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # engine -> _Prefix
STATS = {"prefix_prefills": 0, "continued": 0, "one_span": 0}


@dataclass
class _Prefix:
    ids: list[int]
    cache: object
    key: tuple[str, str]  # the engine's (model, runtime) fingerprints when it was prefilled


def prefix_text() -> str:
    """The few-shot prompt before the question: every base record's shared prefix."""
    return prompts.few_shot_prompt("").removesuffix(prompts.query(""))


def _prefix(engine, keep: bool) -> _Prefix:
    key = (engine.model_fingerprint, engine.runtime_fingerprint)
    kept = _KEPT.get(engine) if keep else None
    if kept is not None and kept.key == key:
        return kept
    ids = engine.encode(prefix_text(), bos=True)
    cache = engine.new_cache()
    engine.prefill(cache, ids, 0, last_only=True)
    STATS["prefix_prefills"] += 1
    made = _Prefix(ids, cache, key)
    if keep:
        _KEPT[engine] = made
    return made


def forget(engine) -> None:
    """Drop the kept prefix of `engine` (the next base record prefills it again)."""
    _KEPT.pop(engine, None)


def few_shot_decode(engine, problem: str, max_tokens: int, temperature: float = 0.0, seed: int = 0,
                    keep: bool = True) -> Recalled:
    """The base model's answer to `problem` under the two-span schedule; `keep`: the prefix's cache is
    kept for the next problem (False: prefilled afresh and dropped, the control the test compares)."""
    t0 = time.perf_counter()
    ids = engine.encode(prompts.few_shot_prompt(problem), bos=True)
    check_fits(engine, 0, len(ids), max_tokens)  # before any forward
    pre = _prefix(engine, keep)
    n = len(pre.ids)
    if len(ids) > n and ids[:n] == pre.ids:
        cache = copy.deepcopy(pre.cache) if keep else pre.cache
        graft_s = time.perf_counter() - t0  # the kept prefix's copy: this route's graft
        logits = engine.prefill(cache, ids[n:], n, last_only=True)[-1]
        STATS["continued"] += 1
    else:  # the tokenizer merges across the boundary: the one-span schedule, as without a shared prefix
        cache, graft_s = engine.new_cache(), time.perf_counter() - t0
        logits = engine.prefill(cache, ids, 0, last_only=True)[-1]
        STATS["one_span"] += 1
    prefill_s = time.perf_counter() - t0
    out = engine.continue_decode(cache, logits, len(ids), max_tokens, temperature=temperature, seed=seed,
                                 stop=(prompts.ANSWER_STOP,))
    return Recalled([], 0, list(ids), list(out.token_ids), out.text, out.seconds + prefill_s, graft_s, prefill_s)
