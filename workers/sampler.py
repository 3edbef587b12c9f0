"""Samplers: how a generator decodes the seeded samples of one call's prompts (one or several problems).

`SequentialSampler` decodes them one after another (batch 1); `BatchedSampler` decodes every prompt's
samples in one continuous, left-padded batch (`workers/batch.py`), a row that ends making room for the next.
Both apply the same rules per sample: a token is drawn from the row's own seeded `torch.Generator` (on the
logits' device); EOS ends a sample unkept; a kept token completing a stop string ends it; at most
`max_tokens` are kept. Batching never touches exactness (deposits and grafts keep the pinned schedule), but
under the stock kernels it changes the logits' last bits, so the two samplers may draw differently; each
is deterministic per seed and call, and both sampler and group are recorded in every attempt.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from galahad.workers.batch import DecodeBatch
from galahad.workers.engine import Engine, draw_rows, ends
from galahad.workers.sampling import SamplingConfig


@dataclass(frozen=True)
class Sample:
    """One decoded sample: kept tokens, their text, and whether it stopped (EOS/stop) before the budget."""

    token_ids: list[int]
    text: str
    stopped: bool


@dataclass(frozen=True)
class Prompt:
    """One prefilled prompt and the seeds of the samples to decode after it (its cache is never touched)."""

    cache: DynamicCache
    logits: torch.Tensor  # the prompt's last-position logits [vocab]
    pos: int  # the next position (the prompt's length)
    seeds: list[int]
    mask: torch.Tensor | None = None  # the cache's real slots [slots] when it holds padding (prefilled in a batch)


class Sampler(ABC):
    """Decode one sample per seed after each prompt; `sample_many` returns them prompt by prompt."""

    name = "base"
    padded_prompts = False  # whether prompts prefilled together (with a padding mask) may be given

    @abstractmethod
    def sample_many(self, engine: Engine, prompts: list[Prompt], max_tokens: int, temperature: float,
                    stop: tuple[str, ...], max_rows: int) -> list[list[Sample]]: ...

    def sample(self, engine: Engine, cache: DynamicCache, logits: torch.Tensor, pos: int, seeds: list[int],
               max_tokens: int, temperature: float, stop: tuple[str, ...],
               max_rows: int = SamplingConfig.batch_rows) -> list[Sample]:
        """One prompt's samples."""
        return self.sample_many(engine, [Prompt(cache, logits, pos, seeds)], max_tokens, temperature, stop,
                                max_rows)[0]


class SequentialSampler(Sampler):
    """One sample at a time, batch 1: the reference behaviour (`Engine.continue_decode` per seed)."""

    name = "sequential"

    def sample_many(self, engine, prompts, max_tokens, temperature, stop, max_rows):
        if any(p.mask is not None for p in prompts):
            raise ValueError("the sequential sampler decodes unpadded prompts only")
        out = []
        for p in prompts:
            samples = []
            for seed in p.seeds:
                d = engine.continue_decode(copy.deepcopy(p.cache), p.logits, p.pos, max_tokens,
                                           temperature=temperature, seed=seed, stop=stop)
                samples.append(Sample(d.token_ids, d.text, d.stopped))
            out.append(samples)
        return out


@dataclass
class _Row:
    prompt: int
    sample: int
    gen: torch.Generator
    kept: list[int]


class BatchedSampler(Sampler):
    """Every sample of every prompt in one continuous batch (`workers/batch.py`): one forward per step
    for all live rows, each row at its own position. A prompt's rows join when the batch has room for
    all of them (at most `max_rows` live rows; a prompt with more samples than that joins an empty
    batch alone); a row that ends leaves at once, so the next prompt's rows take its place instead of
    waiting for the batch's longest sample. The admission order is the prompts' order: the same prompts
    and seeds give the same batches, hence the same texts, in any process."""

    name = "batched"
    padded_prompts = True

    def sample_many(self, engine, prompts, max_tokens, temperature, stop, max_rows):
        out: list[list[Sample | None]] = [[None] * len(p.seeds) for p in prompts]
        batch, live = DecodeBatch(engine), []
        logits: torch.Tensor | None = None  # [live rows, vocab]: what each live row draws from next
        waiting = list(range(len(prompts)))
        eos = engine.loaded.eos_ids

        def finish(row: _Row, stopped: bool) -> None:
            out[row.prompt][row.sample] = Sample(
                row.kept, engine.tokenizer.decode(row.kept, skip_special_tokens=True), stopped)

        while waiting or live:
            while waiting and (not live or len(live) + len(prompts[waiting[0]].seeds) <= max_rows):
                index = waiting.pop(0)
                p = prompts[index]
                if not p.seeds:
                    continue
                if max_tokens <= 0:
                    out[index] = [Sample([], "", False) for _ in p.seeds]
                    continue
                batch.admit(p.cache, len(p.seeds), p.pos, p.mask)
                live += [_Row(index, j, torch.Generator(device=p.logits.device).manual_seed(s), [])
                         for j, s in enumerate(p.seeds)]
                fresh = p.logits.reshape(1, -1).expand(len(p.seeds), -1)
                logits = fresh if logits is None else torch.cat([logits, fresh], dim=0)
            if not live:
                break
            assert logits is not None
            drawn = draw_rows(logits, temperature, [r.gen for r in live], engine.runtime.threads)
            still, toks = [], []
            for b, (row, tok) in enumerate(zip(live, drawn, strict=True)):
                if tok in eos:
                    finish(row, True)
                    continue
                row.kept.append(tok)
                if ends(engine.tokenizer, row.kept, stop):
                    finish(row, True)
                elif len(row.kept) == max_tokens:
                    finish(row, False)  # budget spent: the last token's forward would feed nothing
                else:
                    still.append(b)
                    toks.append(tok)
            batch.keep(still)
            live = [live[b] for b in still]
            logits = batch.step(toks) if live else None
        assert all(s is not None for samples in out for s in samples)
        return out  # type: ignore[return-value]


SAMPLERS: dict[str, type[Sampler]] = {"sequential": SequentialSampler, "batched": BatchedSampler}


def get_sampler(name: str) -> Sampler:
    try:
        return SAMPLERS[name]()
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}; known: {', '.join(sorted(SAMPLERS))}") from None

