"""What a sampled attempt is, independent of the engine that sampled it: config, seeds, results.

Torch-free on purpose: the loop, the evals and `galahad rescore` import these without loading a model.
Seeds derive from (run seed, problem id, sample index), so a rerun samples the same attempts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingConfig:
    k: int = 8
    max_tokens: int = 12
    temperature: float = 1.0
    seed: int = 0
    sampler: str = "batched"  # workers/sampler.py: "batched" (one forward per step for all rows) or "sequential"
    batch_rows: int = 32  # the batched sampler's most live rows (a generator call's samples share them)


@dataclass(frozen=True)
class AttemptResult:
    problem_id: str
    sample: int
    seed: int
    output_text: str
    answer: str
    tokens: int
    seconds: float
    cpu_seconds: float
    energy_joules: float | None
    sampling: dict


def sample_seed(run_seed: int, problem_id: str, index: int) -> int:
    digest = hashlib.sha256(f"{run_seed}:{problem_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)
