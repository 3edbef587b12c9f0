"""The generator: samples k seeded attempts per problem with the base model's few-shot prompt.

Plain class (the Ray actor in `workers/actors.py` only wraps it). The prompt is prefilled once per
problem and the cache copied for each sample, so k attempts cost one prefill plus k short decodes.
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
from galahad.workers.sampling import AttemptResult, SamplingConfig, sample_seed
from galahad.workers.telemetry import EnergyMeter, Stopwatch


class Generator:
    def __init__(self, model: str, model_cache: str | os.PathLike, runtime: RuntimeConfig):
        self.engine = Engine(load_model(model, Path(model_cache), runtime), runtime)
        self.meter = EnergyMeter()

    @property
    def model_fingerprint(self) -> str:
        return self.engine.model_fingerprint

    def attempt(self, problem: dict, cfg: SamplingConfig, first: int = 0, count: int | None = None) -> list[AttemptResult]:
        """Samples `first .. first+count-1` of the problem's k: the loop asks in rounds and stops early."""
        count = cfg.k - first if count is None else count
        ids = self.engine.encode(prompts.few_shot_prompt(problem["text"]))
        with Stopwatch(self.meter) as prefill:
            base = self.engine.new_cache()
            logits = self.engine.prefill(base, ids, 0)[-1]
        results = []
        for i in range(first, first + count):
            seed = sample_seed(cfg.seed, problem["id"], i)
            with Stopwatch(self.meter) as sw:
                out = self.engine.continue_decode(
                    copy.deepcopy(base), logits, len(ids), cfg.max_tokens,
                    temperature=cfg.temperature, seed=seed, stop=(prompts.ANSWER_STOP,),
                )
            m = sw.result
            # The shared prefill is charged to the first sample of the round, so totals stay honest.
            share = prefill.result if i == first else None
            results.append(AttemptResult(
                problem_id=problem["id"], sample=i, seed=seed, output_text=out.text,
                answer=prompts.answer_from_output(out.text),
                tokens=len(out.token_ids), seconds=m.seconds + (share.seconds if share else 0.0),
                cpu_seconds=m.cpu_seconds + (share.cpu_seconds if share else 0.0),
                energy_joules=None if m.energy_joules is None else m.energy_joules + (
                    (share.energy_joules or 0.0) if share else 0.0),
                sampling={**asdict(cfg), "sample": i, "sample_seed": seed, "prompt": "few-shot-v1"},
            ))
        return results
