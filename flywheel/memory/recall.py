"""The one graft -> decode path: what `solve`, every eval and `replay` run, so what is measured ships.

`graft_decode` loads a chain from the store (every blob hash-checked), restores it at its own positions,
encodes the prompt after it (or from BOS with no memory), and decodes with the answer's stop rule.
Nothing here is ever re-rotated: own-position graft is the exact operating point.
"""

from __future__ import annotations

from dataclasses import dataclass

from galahad.flywheel.artifacts.chain import load_chain
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
    seconds: float

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
    return _restore(engine, load_chain(store, tail) if tail else [])


def _restore(engine, chain: list):
    from galahad.workers.graft import restore  # torch: off the import path of model-free commands

    if not chain:
        return engine.new_cache(), 0, []
    return restore(engine, chain), chain[-1].meta.end, [a.id for a in chain]


def graft_decode(engine, store: BlobStore, tail: str | None, text: str, max_tokens: int,
                 temperature: float = 0.0, seed: int = 0) -> Recalled:
    """Graft the chain ending at `tail` (None: an empty cache), then decode `text`'s continuation. The
    decode computes logits at the last position only (`Engine.decode`): the serving configuration that
    `galahad exactness` proves byte-identical to recomputation. What cannot fit the context window is
    refused before any forward pass."""
    ids = engine.encode(text, bos=not tail)
    chain = load_chain(store, tail) if tail else []
    check_fits(engine, chain[-1].meta.end if chain else 0, len(ids), max_tokens)
    cache, start, artifacts = _restore(engine, chain)
    out = engine.decode(cache, ids, start, max_tokens, temperature=temperature, seed=seed,
                        stop=(prompts.ANSWER_STOP,))
    return Recalled(artifacts, start, list(ids), list(out.token_ids), out.text, out.seconds)
