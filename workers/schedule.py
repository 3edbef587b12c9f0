"""The pinned decode schedules, written once: how a context is computed before its decode, so that the same
context is always the same sequence of forward calls, hence the same bits (the exactness invariant).

- `few_shot`: the base model's prompt as two spans, the prefix (`prefix_text`) prefilled once per engine
  from position 0 and kept (`kept_prefix`), then the question after a copy of it; where the tokenizer
  joins the last example and the question into other tokens, one span from 0 (a rule of the text alone).
  `few_shot_rows`: several questions in one left-padded forward, where that is exact.
- `graft_then_prefill`: the chain ending at a tail restored at its own positions (or, with `recompute`,
  prefilled afresh as it was deposited: the same bits), then the prompt after it.
- `context`: which of the two a decode of (memory, question, prompt format) runs.

The generator, `memory/recall.py` and `service/scoring.py` build their contexts here and nowhere else.
Importing this module imports no torch.
"""

from __future__ import annotations

import copy
import time
import weakref
from dataclasses import dataclass, field

from galahad.flywheel.artifacts.chain import Source, chain_headers, load_chain
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems import prompts

_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # engine -> Prefix
STATS = {"prefix_prefills": 0}  # prefixes prefilled (tests count them)


@dataclass
class Prefix:
    ids: list[int]
    cache: object  # shared: continue from a copy
    key: tuple[str, str]  # the engine's (model, runtime) fingerprints when it was prefilled


@dataclass
class Context:
    """A context ready to decode: `cache` holds every position before `start + len(ids)`, `logits` are the
    last prompt position's. Seconds count from the call's start (encoding included)."""

    cache: object
    logits: object
    ids: list[int]  # the prompt's tokens (a few-shot prompt's include its prefix)
    start: int = 0  # grafted tokens: the prompt's first position
    artifacts: list[str] = field(default_factory=list)  # the grafted chain, root first
    graft_seconds: float = 0.0  # the chain's load and restore (or the kept prefix's copy)
    prefill_seconds: float = 0.0  # graft + the prompt's forward: time to the first token

    @property
    def pos(self) -> int:
        return self.start + len(self.ids)


def prefix_text() -> str:
    """The few-shot prompt before the question: every base prompt's shared prefix."""
    return prompts.few_shot_prompt("").removesuffix(prompts.query(""))


def kept_prefix(engine, keep: bool = True) -> Prefix:
    """The prefix prefilled on `engine`: kept per engine (and prefilled again if its fingerprints changed),
    or with `keep` False prefilled afresh and not kept."""
    key = (engine.model_fingerprint, engine.runtime_fingerprint)
    kept = _KEPT.get(engine) if keep else None
    if kept is not None and kept.key == key:
        return kept
    ids = engine.encode(prefix_text(), bos=True)
    cache = engine.new_cache()
    engine.prefill(cache, ids, 0, last_only=True)
    STATS["prefix_prefills"] += 1
    made = Prefix(ids, cache, key)
    if keep:
        _KEPT[engine] = made
    return made


def forget(engine) -> None:
    """Drop the kept prefix of `engine` (the next few-shot prompt prefills it again)."""
    _KEPT.pop(engine, None)


def continues(ids: list[int], prefix: list[int]) -> bool:
    """Whether a prompt's tokens really start with the prefix's (and go on past it)."""
    return len(ids) > len(prefix) and ids[: len(prefix)] == prefix


def check_fits(engine, start: int, n_prompt: int, max_tokens: int) -> None:
    """Refuse, before any forward pass, a decode that cannot fit the model's context window."""
    window = getattr(getattr(engine, "loaded", None), "context_window", 0)
    need = start + n_prompt + max_tokens
    if window and need > window:
        raise GalahadError(f"too long for the model's context window: {start:,} grafted + {n_prompt:,} prompt + "
                           f"{max_tokens:,} decode tokens = {need:,} > {window:,}")


def render(problem: str, prompt: str) -> str:
    """The prompt text for a problem: the base model's few-shot prompt, or the memory's query format."""
    if prompt == "few-shot":
        return prompts.few_shot_prompt(problem)
    if prompt == "query":
        return prompts.query(problem)
    raise ValueError(f"unknown prompt format {prompt!r}")


def few_shot(engine, question: str, max_tokens: int, keep: bool = True) -> Context:
    """`question`'s few-shot prompt under the two-span schedule; `keep`: after a copy of the kept prefix
    (False: a prefix prefilled afresh, the control)."""
    t0 = time.perf_counter()
    ids = engine.encode(prompts.few_shot_prompt(question), bos=True)
    check_fits(engine, 0, len(ids), max_tokens)  # before any forward
    pre = kept_prefix(engine, keep)
    done = len(pre.ids) if continues(ids, pre.ids) else 0
    cache = (copy.deepcopy(pre.cache) if keep else pre.cache) if done else engine.new_cache()
    graft_s = time.perf_counter() - t0  # the kept prefix's copy: this schedule's graft
    logits = engine.prefill(cache, ids[done:], done, last_only=True)[-1]
    return Context(cache, logits, list(ids), 0, [], graft_s, time.perf_counter() - t0)


def few_shot_rows(engine, questions: list[str], max_tokens: int) -> list[tuple] | None:
    """Several questions' few-shot prompts in one forward (`Engine.prefill_rows`): each question after the
    kept prefix's cache, left-padded to the longest. (cache, logits, next position, real-slot mask) per
    question, or None when they cannot share a forward exactly: a kernel mode that needs each row's keys
    contiguous (the batch-invariant attention), a prompt that does not continue the prefix, a question
    longer than one prefill chunk, or a row whose span (prefix + longest question + `max_tokens`) would not
    fit in the sliding window (its padding would push early prefix tokens out of the window)."""
    from galahad.workers.batch import repeat_rows, select_row  # deferred: torch is heavy

    if engine.kernels.contiguous_keys_only:
        return None
    pre = kept_prefix(engine)
    done = len(pre.ids)
    ids = [engine.encode(prompts.few_shot_prompt(q)) for q in questions]
    if not all(continues(i, pre.ids) for i in ids):
        return None
    tails = [i[done:] for i in ids]
    width = max(len(t) for t in tails)
    window = engine.loaded.sliding_window  # the adapter's smallest window (None: all full)
    if width > engine.runtime.prefill_chunk or (window is not None and done + width + max_tokens >= window):
        return None
    shared = repeat_rows(pre.cache, len(questions))
    logits, mask = engine.prefill_rows(shared, tails, done)
    return [(select_row(shared, r), logits[r], len(i), mask[r]) for r, i in enumerate(ids)]


def _restore(engine, chain: list):
    """(cache, first free position, artifact ids) of `chain` restored at its own positions (`kv_chain`)."""
    from galahad.workers.kv_chain import restore_chain  # deferred: torch is heavy

    return restore_chain(engine, chain)


def graft(engine, source: Source | None, tail: str | None):
    """The cache to answer in: the chain ending at `tail`, read from `source` (each blob read once into one
    buffer and hash-checked as it is read, tensors built over those bytes) and restored at its own
    positions; or an empty cache. Returns (cache, first free position, grafted artifact ids)."""
    return _restore(engine, load_chain(source, tail) if tail else [])


def graft_then_prefill(engine, source: Source | None, tail: str | None, text: str, max_tokens: int,
                       recompute: bool = False) -> Context:
    """The chain ending at `tail` grafted (`recompute`: its tokens prefilled instead, segment by segment as
    they were deposited), then `text` prefilled after it. What cannot fit the context window is refused
    before any forward pass."""
    t0 = time.perf_counter()
    ids = engine.encode(text, bos=not tail)
    if tail and recompute:
        segments = [(art_id, list(meta.token_ids)) for art_id, meta in chain_headers(source, tail)]
        check_fits(engine, sum(len(seg) for _, seg in segments), len(ids), max_tokens)
        cache, start, artifacts = engine.new_cache(), 0, []
        for art_id, seg in segments:
            engine.prefill(cache, seg, start, last_only=True)
            start += len(seg)
            artifacts.append(art_id)
    else:
        chain = load_chain(source, tail) if tail else []
        check_fits(engine, chain[-1].meta.end if chain else 0, len(ids), max_tokens)  # before any forward
        cache, start, artifacts = _restore(engine, chain)
    graft_s = time.perf_counter() - t0
    logits = engine.prefill(cache, list(ids), start, last_only=True)[-1]
    return Context(cache, logits, list(ids), start, artifacts, graft_s, time.perf_counter() - t0)


def context(engine, source: Source | None, tail: str | None, question: str, prompt: str, max_tokens: int,
            recompute: bool = False, shared_prefix: bool = True) -> Context:
    """The context a decode of `question` runs in: with no memory and the few-shot prompt, the two-span
    schedule (`shared_prefix` False: the one-span schedule of records made before it); anything else
    grafted then prefilled."""
    if shared_prefix and prompt == "few-shot" and tail is None:
        return few_shot(engine, question, max_tokens)
    return graft_then_prefill(engine, source, tail, render(question, prompt), max_tokens, recompute)
