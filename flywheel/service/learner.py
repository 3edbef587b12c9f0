"""The learner behind the service: the learning job run continuously, beside the answering replicas.

`start_learner` (plain) takes the data dir's run lock when the catalog is the embedded one, opens the
catalog and store, and starts the same `LearningJob` that `galahad run` starts (`flywheel/app/job.py`).
The job keeps draining the queue; between drains it polls for newly queued problems (from `/v1/solve`
with a gold answer or `/v1/problems`). It resumes after a kill exactly as `galahad run` does: the catalog
is the queue. `LearnerActor` only places it on the Ray cluster, where its generator and depositor actors
start.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import ray

from galahad.flywheel.app.job import LearningJob, WorkerSpec
from galahad.flywheel.app.lock import LEARNING, run_lock
from galahad.flywheel.app.storage import open_catalog
from galahad.flywheel.config import LoopConfig


def start_learner(model: str, model_cache: str, catalog_url: str, store_path: str, config: LoopConfig,
                  generators: int, chain_max_tokens: int | None, device: str, lock_root: str | None = None,
                  lock_wait_seconds: float = 60.0) -> LearningJob:
    """The service's learning job. Embedded catalog (`lock_root`, the data dir): the run lock is held here,
    where the queue is written (not in the driver: the learner can outlive a killed driver), for the job's
    life; a predecessor still holding it is waited for, then the job fails closed."""
    from galahad.flywheel.artifacts.store import LocalStore

    lock = run_lock(Path(lock_root), lock_wait_seconds, LEARNING) if lock_root else None
    catalog = open_catalog(catalog_url)
    workers = WorkerSpec(model, model_cache, generators, chain_max_tokens, device)
    return LearningJob(catalog, LocalStore(store_path), workers, config, {"service": True}, lock)


@ray.remote(max_restarts=0, max_concurrency=4)
class LearnerActor:
    """Starts the service's `LearningJob` (`start_learner`), then runs it until told to stop."""

    def __init__(self, model: str, model_cache: str, catalog_url: str, store_path: str, config: LoopConfig,
                 generators: int, chain_max_tokens: int | None, device: str, poll_seconds: float,
                 lock_root: str | None = None, lock_wait_seconds: float = 60.0):
        self.poll_seconds = poll_seconds
        self.job = start_learner(model, model_cache, catalog_url, store_path, config, generators, chain_max_tokens,
                                 device, lock_root, lock_wait_seconds)

    def run(self) -> dict:
        tally = self.job.run_until_stopped(self.poll_seconds)
        self.job.finish(asdict(tally))
        return asdict(tally)

    def tally(self) -> dict:
        return {**asdict(self.job.tally), "drains": self.job.drains, "run_id": self.job.run_id}

    def stop(self) -> None:
        self.job.stop()
