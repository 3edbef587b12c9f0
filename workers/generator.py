"""The generator: samples k seeded attempts per problem with the base model's few-shot prompt.

Plain class (the Ray actor in `workers/actors.py` only wraps it). The few-shot examples every prompt
starts with are prefilled once per process, the problem's question once per round after them; its samples are decoded by the configured `Sampler` (`workers/sampler.py`: one batch, or one
after another), so k attempts cost one prefill plus the decode steps.
Seeds derive from (run seed, problem id, sample index) (`workers/sampling.py`): a rerun samples the
same attempts.
"""

from __future__ import annotations

import copy
import os
from dataclasses import asdict
from pathlib import Path

from galahad.flywheel.problems import prompts
from galahad.workers.engine import Engine
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import RuntimeConfig
from galahad.workers.sampler import get_sampler
from galahad.workers.sampling import AttemptResult, SamplingConfig, sample_seed
from galahad.workers.telemetry import EnergyMeter, Stopwatch


class Generator:
    def __init__(self, model: str, model_cache: str | os.PathLike, runtime: RuntimeConfig):
        self.engine = Engine(load_model(model, Path(model_cache), runtime), runtime)
        self.meter = EnergyMeter()
        self._shots = None

    @property
    def model_fingerprint(self) -> str:
        return self.engine.model_fingerprint

    def _shots_cache(self, ids: list[int]):
        """(cache, positions it holds): a copy of the few-shot examples' cache, prefilled once per process and
        shared by every problem's prompt (they all start with the same examples), when the prompt's tokens
        really start with the examples' tokens; otherwise an empty cache. Always the same schedule (examples,
        then the question), so a seed samples the same text in any process."""
        if self._shots is None:
            shots = self.engine.encode("".join(prompts.solution_segment(q, a) for q, a in prompts.BASE_SHOTS))
            cache = self.engine.new_cache()
            self.engine.prefill(cache, shots, 0, last_only=True)
            self._shots = (shots, cache)
        shots, cache = self._shots
        if len(ids) > len(shots) and ids[: len(shots)] == shots:
            return copy.deepcopy(cache), len(shots)
        return self.engine.new_cache(), 0

    def prompt(self, problem: dict):
        """The problem's few-shot prompt prefilled: (cache, last-position logits, next position)."""
        ids = self.engine.encode(prompts.few_shot_prompt(problem["text"]))
        cache, done = self._shots_cache(ids)
        logits = self.engine.prefill(cache, ids[done:], done, last_only=True)[-1]
        return cache, logits, len(ids)

    def attempt(self, problem: dict, cfg: SamplingConfig, first: int = 0, count: int | None = None) -> list[AttemptResult]:
        """Samples `first .. first+count-1` of the problem's k: the loop asks in rounds and stops early."""
        count = cfg.k - first if count is None else count
        sampler = get_sampler(cfg.sampler)
        seeds = [sample_seed(cfg.seed, problem["id"], i) for i in range(first, first + count)]
        with Stopwatch(self.meter) as prefill:
            base, logits, pos = self.prompt(problem)
        with Stopwatch(self.meter) as sw:
            outs = sampler.sample(self.engine, base, logits, pos, seeds, cfg.max_tokens, cfg.temperature,
                                  (prompts.ANSWER_STOP,))
        # The round's decode time is split evenly over its samples and the shared prefill is charged to the
        # first, so the attempts' totals are the round's cost under either sampler.
        m, share = sw.result, prefill.result
        results = []
        for j, (i, seed, out) in enumerate(zip(range(first, first + count), seeds, outs, strict=True)):
            first_share = j == 0
            energy = None if m.energy_joules is None else m.energy_joules / count + (
                (share.energy_joules or 0.0) if first_share else 0.0)
            results.append(AttemptResult(
                problem_id=problem["id"], sample=i, seed=seed, output_text=out.text,
                answer=prompts.answer_from_output(out.text),
                tokens=len(out.token_ids), seconds=m.seconds / count + (share.seconds if first_share else 0.0),
                cpu_seconds=m.cpu_seconds / count + (share.cpu_seconds if first_share else 0.0),
                energy_joules=energy,
                sampling={**asdict(cfg), "sample": i, "sample_seed": seed, "prompt": "few-shot-v1"},
            ))
        return results
