"""The generator: samples k seeded attempts per problem with the base model's few-shot prompt.

Plain class (the Ray actor in `workers/actors.py` wraps it). Prompts are built by the pinned few-shot
schedule (`workers/schedule.py`) and samples decoded by the configured `Sampler`, so k attempts cost one
prefill plus the decode steps. Seeds derive from (run seed, problem id, sample index): a rerun samples the
same attempts.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from galahad.flywheel.problems import prompts
from galahad.workers import schedule
from galahad.workers.engine import Engine
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import RuntimeConfig
from galahad.workers.sampler import Prompt, get_sampler
from galahad.workers.sampling import AttemptResult, SamplingConfig, sample_seed
from galahad.workers.telemetry import EnergyMeter, Stopwatch


class Generator:
    def __init__(self, model: str, model_cache: str | os.PathLike, runtime: RuntimeConfig):
        self.engine = Engine(load_model(model, Path(model_cache), runtime), runtime)
        self.meter = EnergyMeter()

    @property
    def model_fingerprint(self) -> str:
        return self.engine.model_fingerprint

    def prompt(self, problem: dict):
        """The problem's few-shot prompt prefilled (`schedule.few_shot`): (cache, last-position logits, next
        position)."""
        ctx = schedule.few_shot(self.engine, problem["text"], 0)
        return ctx.cache, ctx.logits, ctx.pos

    def prompts_together(self, problems: list[dict], max_tokens: int) -> list[tuple] | None:
        """Several problems' prompts in one forward, where that is exact (`schedule.few_shot_rows`)."""
        return schedule.few_shot_rows(self.engine, [p["text"] for p in problems], max_tokens)

    def attempt(self, problem: dict, cfg: SamplingConfig, first: int = 0, count: int | None = None) -> list[AttemptResult]:
        """Samples `first .. first+count-1` of the problem's k: the loop asks in rounds and stops early."""
        count = cfg.k - first if count is None else count
        return self.attempt_many([(problem, first, count)], cfg)[0]

    def attempt_many(self, requests: list[tuple[dict, int, int]], cfg: SamplingConfig) -> list[list[AttemptResult]]:
        """Several problems' rounds in one call: (problem, first, count) each, results in the same order. The
        prompts are prefilled in one forward where that is exact (`prompts_together`), else one by one, and
        the sampler decodes their samples together. A sample's draws depend on which rows share its batch, so
        every attempt records the call's requests (`group`: a hash of them)."""
        sampler = get_sampler(cfg.sampler)
        seeds = [[sample_seed(cfg.seed, problem["id"], i) for i in range(first, first + count)]
                 for problem, first, count in requests]
        together, tried = None, None
        if sampler.padded_prompts and len(requests) > 1:
            with Stopwatch(self.meter) as attempt:
                together = self.prompts_together([p for p, _, _ in requests], cfg.max_tokens)
            tried = attempt.result
        if together is not None and tried is not None:  # one forward for all: its cost is shared evenly
            batch = [Prompt(c, lg, pos, s, mask) for (c, lg, pos, mask), s in zip(together, seeds, strict=True)]
            prefill_shares = [tried.split(len(requests))] * len(requests)
        else:
            batch, prefill_shares = [], []
            for (problem, _, _), s in zip(requests, seeds, strict=True):
                with Stopwatch(self.meter) as prefill:
                    base, logits, pos = self.prompt(problem)
                batch.append(Prompt(base, logits, pos, s))
                prefill_shares.append(prefill.result)
            if tried is not None:  # the check that refused to batch (and any examples' prefill) is paid too
                prefill_shares[0] = prefill_shares[0].plus(tried)
        with Stopwatch(self.meter) as sw:
            outs = sampler.sample_many(self.engine, batch, cfg.max_tokens, cfg.temperature, (prompts.ANSWER_STOP,),
                                       cfg.batch_rows)
        group = call_group(requests)
        # The call's decode time is split evenly over its samples and each problem's prefill is charged to its
        # first, so the attempts' totals are the call's cost under either sampler.
        decode = sw.result.split(max(1, sum(count for _, _, count in requests)))
        results = []
        for (problem, first, _), prompt, share, samples in zip(requests, batch, prefill_shares, outs, strict=True):
            mine = []
            for j, (seed, out) in enumerate(zip(prompt.seeds, samples, strict=True)):
                i, cost = first + j, decode.plus(share) if j == 0 else decode
                mine.append(AttemptResult(
                    problem_id=problem["id"], sample=i, seed=seed, output_text=out.text,
                    answer=prompts.answer_from_output(out.text), tokens=len(out.token_ids),
                    seconds=cost.seconds, cpu_seconds=cost.cpu_seconds, energy_joules=cost.energy_joules,
                    sampling={**asdict(cfg), "sample": i, "sample_seed": seed, "prompt": "few-shot-v1",
                              "group": group, "group_size": len(requests)},
                ))
            results.append(mine)
        return results


def call_group(requests: list[tuple[dict, int, int]]) -> str:
    """The identity of one generator call's requests (problem ids, first sample, count, in order)."""
    spec = json.dumps([[p["id"], first, count] for p, first, count in requests], separators=(",", ":"))
    return hashlib.sha256(spec.encode()).hexdigest()[:16]
