"""Samplers: how a generator decodes the k seeded samples of a round from one prefilled prompt.

`SequentialSampler` decodes them one after another (batch 1, the prompt cache copied per sample);
`BatchedSampler` decodes them as one batch: the prompt cache is expanded to k rows and each step is one
forward over every live row. Both apply the same rules, sample by sample: a token is drawn from the
row's own seeded `torch.Generator` (on the logits' device, so CUDA logits are never drawn on a CPU
generator); EOS ends a sample without being kept; a kept token that completes a stop string ends it;
at most `max_tokens` tokens are kept. A row that ends leaves the batch (its cache row is dropped).

Sampled text is verified text whatever sampled it: deposits and grafts keep the pinned single-sequence
schedule, so batching never touches exactness. Batching changes the GEMM row count, hence the logits'
last bits, so the same seed may draw other tokens under the two samplers; each sampler is deterministic
per seed, and the sampler's name is recorded in every attempt's sampling parameters.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from galahad.workers.engine import Engine, draw_rows, ends


@dataclass(frozen=True)
class Sample:
    """One decoded sample: kept tokens, their text, and whether it stopped (EOS/stop) before the budget."""

    token_ids: list[int]
    text: str
    stopped: bool


class Sampler(ABC):
    """Decode one sample per seed after a prompt whose cache and last logits are given (cache untouched)."""

    name = "base"

    @abstractmethod
    def sample(self, engine: Engine, cache: DynamicCache, logits: torch.Tensor, pos: int, seeds: list[int],
               max_tokens: int, temperature: float, stop: tuple[str, ...]) -> list[Sample]: ...


class SequentialSampler(Sampler):
    """One sample at a time, batch 1: the reference behaviour (`Engine.continue_decode` per seed)."""

    name = "sequential"

    def sample(self, engine, cache, logits, pos, seeds, max_tokens, temperature, stop):
        out = []
        for seed in seeds:
            d = engine.continue_decode(copy.deepcopy(cache), logits, pos, max_tokens, temperature=temperature,
                                       seed=seed, stop=stop)
            out.append(Sample(d.token_ids, d.text, d.stopped))
        return out


class BatchedSampler(Sampler):
    """All samples as one batch: one forward per step for every live row; ended rows leave the batch.
    No padding is needed: every row has the same prompt, so every live row sits at the same position."""

    name = "batched"

    def sample(self, engine, cache, logits, pos, seeds, max_tokens, temperature, stop):
        k = len(seeds)
        gens = [torch.Generator(device=logits.device).manual_seed(s) for s in seeds]
        kept: list[list[int]] = [[] for _ in range(k)]
        stopped = [False] * k
        live = list(range(k))  # sample index of each batch row
        rows = logits.reshape(1, -1).expand(k, -1)
        batch: DynamicCache | None = None
        eos = engine.loaded.eos_ids
        for step in range(max_tokens):
            still, toks = [], []
            drawn = draw_rows(rows, temperature, [gens[i] for i in live], engine.runtime.threads)
            for r, (i, tok) in enumerate(zip(live, drawn, strict=True)):
                if tok in eos:
                    stopped[i] = True
                    continue
                kept[i].append(tok)
                if ends(engine.tokenizer, kept[i], stop):
                    stopped[i] = True
                    continue
                still.append(r)
                toks.append(tok)
            if not still or step == max_tokens - 1:
                break
            if batch is None:
                batch = copy.deepcopy(cache)
                batch.batch_repeat_interleave(len(live))
            if len(still) < len(live):
                batch.batch_select_indices(torch.tensor(still, device=engine.device))
            live = [live[r] for r in still]
            rows = engine.forward_rows(batch, toks, pos)
            pos += 1
        return [Sample(kept[i], engine.tokenizer.decode(kept[i], skip_special_tokens=True), stopped[i])
                for i in range(k)]


SAMPLERS: dict[str, type[Sampler]] = {"sequential": SequentialSampler, "batched": BatchedSampler}


def get_sampler(name: str) -> Sampler:
    try:
        return SAMPLERS[name]()
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}; known: {', '.join(sorted(SAMPLERS))}") from None

