"""What a sampled attempt is, independent of the engine that sampled it: config (its defaults are
`flywheel/config.py`'s `SamplingConfig`), seeds, results.

Torch-free on purpose: the loop, the evals and `galahad rescore` import these without loading a model.
Seeds derive from (run seed, problem id, sample index), so a rerun samples the same attempts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from galahad.flywheel.config import SamplingConfig

__all__ = ["AttemptResult", "SamplingConfig", "sample_seed"]


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
