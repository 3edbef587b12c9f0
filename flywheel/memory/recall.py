"""The one graft -> decode path: what `solve`, every eval and `replay` run, so what is measured ships.

`graft_decode` loads a chain from the store (every blob hash-checked), restores it at its own positions,
encodes the prompt after it (or from BOS with no memory), and decodes with the answer's stop rule.
Nothing here is ever re-rotated: own-position graft is the exact operating point. With `recompute`, the
chain's tokens (the same solutions as plain prompt text) are prefilled afresh, segment by segment as they
were deposited, instead of grafted: the control that proves the graft is an exact cache (same output
bytes) and shows what it saves.
"""

from __future__ import annotations

from dataclasses import dataclass

from galahad.flywheel.artifacts.chain import chain_headers, load_chain
from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems import prompts


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


def render(problem: str, prompt: str) -> str:
    """The prompt text for a problem: the base model's few-shot prompt, or the memory's query format."""
    if prompt == "few-shot":
        return prompts.few_shot_prompt(problem)
    if prompt == "query":
        return prompts.query(problem)
    raise ValueError(f"unknown prompt format {prompt!r}")


def check_fits(engine, start: int, n_prompt: int, max_tokens: int) -> None:
    """Refuse, before any forward pass, a decode that cannot fit the model's context window."""
    window = getattr(getattr(engine, "loaded", None), "context_window", 0)
    need = start + n_prompt + max_tokens
    if window and need > window:
        raise GalahadError(f"too long for the model's context window: {start:,} grafted + {n_prompt:,} prompt + "
                           f"{max_tokens:,} decode tokens = {need:,} > {window:,}")


def graft(engine, store: BlobStore, tail: str | None):
    """The cache to answer in: the chain ending at `tail`, read from the store (each blob read once into one
    buffer and hash-checked as it is read, tensors built over those bytes) and restored at its own
    positions; or an empty cache. Returns (cache, first free position, grafted artifact ids)."""
    from galahad.workers.kv_chain import graft as graft_chain  # torch: off model-free import paths

    return graft_chain(engine, store, tail)


class Prepared:
    """A context ready to decode: memory grafted (or recomputed, or none) and the prompt prefilled once.
    Each `decode` continues from a copy of it, so k samples cost one prefill plus k short decodes (as the
    generator samples), and each sample's bytes equal a fresh `graft_decode` with its seed."""

    def __init__(self, engine, store: BlobStore, tail: str | None, text: str, recompute: bool = False,
                 max_tokens: int = 0):
        import time

        t0 = time.perf_counter()
        ids = engine.encode(text, bos=not tail)
        if tail and recompute:
            segments = [(art_id, list(meta.token_ids)) for art_id, meta in chain_headers(store, tail)]
            check_fits(engine, sum(len(seg) for _, seg in segments), len(ids), max_tokens)
            cache, start, artifacts = engine.new_cache(), 0, []
            for art_id, seg in segments:
                engine.prefill(cache, seg, start, last_only=True)
                start += len(seg)
                artifacts.append(art_id)
        else:
            from galahad.workers.kv_chain import restore_chain  # torch: off the import path

            chain = load_chain(store, tail) if tail else []
            check_fits(engine, chain[-1].meta.end if chain else 0, len(ids), max_tokens)  # before any forward
            cache, start, artifacts = restore_chain(engine, chain)
        self.graft_seconds = time.perf_counter() - t0
        self.engine, self.artifacts, self.start, self.ids = engine, artifacts, start, list(ids)
        self._logits = engine.prefill(cache, self.ids, start, last_only=True)[-1]
        self._cache = cache
        self.prefill_seconds = time.perf_counter() - t0

    def decode(self, max_tokens: int, temperature: float = 0.0, seed: int = 0, last: bool = False) -> Recalled:
        """`last`: no decode follows, so this one may extend the prefilled cache itself (no copy)."""
        import copy

        if self._cache is None:
            raise RuntimeError("this context was already consumed by its last decode")
        cache = self._cache if last else copy.deepcopy(self._cache)
        if last:
            self._cache = None
        out = self.engine.continue_decode(cache, self._logits, self.start + len(self.ids), max_tokens,
                                          temperature=temperature, seed=seed, stop=(prompts.ANSWER_STOP,))
        return Recalled(self.artifacts, self.start, self.ids, list(out.token_ids), out.text, out.seconds,
                        self.graft_seconds, self.prefill_seconds)


def answer_decode(engine, store: BlobStore, tail: str | None, question: str, prompt: str, max_tokens: int,
                  temperature: float = 0.0, seed: int = 0, recompute: bool = False,
                  shared_prefix: bool = True) -> Recalled:
    """The one decode of a question: with no memory and the few-shot prompt, under the shared prefix's
    two-span schedule (`prefix.py`; `shared_prefix` False: the one-span schedule of records made before it);
    anything else through `graft_decode`. `Solver` answers its routes with it and the evals' `execute` runs
    their specs with it."""
    if shared_prefix and prompt == "few-shot" and tail is None:
        from galahad.flywheel.memory.prefix import few_shot_decode  # prefix.py imports this module

        return few_shot_decode(engine, question, max_tokens, temperature, seed)
    return graft_decode(engine, store, tail, render(question, prompt), max_tokens, temperature=temperature, seed=seed,
                        recompute=recompute)


def graft_decode(engine, store: BlobStore, tail: str | None, text: str, max_tokens: int,
                 temperature: float = 0.0, seed: int = 0, recompute: bool = False) -> Recalled:
    """Graft the chain ending at `tail` (None: an empty cache), then decode `text`'s continuation, with
    logits at the last position only: the serving configuration `galahad exactness` proves byte-identical
    to recomputation. What cannot fit the context window is refused before any forward pass.
    `recompute`: prefill the chain's tokens instead of grafting its KV (same schedule, same bits)."""
    prepared = Prepared(engine, store, tail, text, recompute, max_tokens)
    r = prepared.decode(max_tokens, temperature, seed, last=True)
    return Recalled(r.artifacts, r.start, r.prompt_token_ids, r.output_token_ids, r.output_text,
                    r.seconds + prepared.prefill_seconds, prepared.graft_seconds, prepared.prefill_seconds)
