"""The one graft -> decode path: what `solve`, every eval and `replay` run, so what is measured ships.

`graft_decode` loads a chain from the store (every blob hash-checked), restores it at its own positions,
encodes the prompt after it (or from BOS with no memory), and decodes with the answer's stop rule.
Nothing here is ever re-rotated: own-position graft is the exact operating point.
"""

from __future__ import annotations

from dataclasses import dataclass

from galahad.flywheel.artifacts.chain import load_chain
from galahad.flywheel.artifacts.store import BlobStore
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


def graft(engine, store: BlobStore, tail: str | None):
    """The cache to answer in: the chain ending at `tail`, read from the store (each blob read once into one
    buffer and hash-checked as it is read, tensors built over those bytes) and restored at its own
    positions; or an empty cache. Returns (cache, first free position, grafted artifact ids)."""
    from galahad.workers.graft import restore  # torch: off the import path of model-free commands

    if not tail:
        return engine.new_cache(), 0, []
    chain = load_chain(store, tail)
    return restore(engine, chain), chain[-1].meta.end, [a.id for a in chain]


def graft_decode(engine, store: BlobStore, tail: str | None, text: str, max_tokens: int,
                 temperature: float = 0.0, seed: int = 0) -> Recalled:
    """Graft the chain ending at `tail` (None: an empty cache), then decode `text`'s continuation. The
    decode computes logits at the last position only (`Engine.decode`): the serving configuration that
    `galahad exactness` proves byte-identical to recomputation."""
    cache, start, artifacts = graft(engine, store, tail)
    ids = engine.encode(text, bos=not tail)
    out = engine.decode(cache, ids, start, max_tokens, temperature=temperature, seed=seed,
                        stop=(prompts.ANSWER_STOP,))
    return Recalled(artifacts, start, list(ids), list(out.token_ids), out.text, out.seconds)
