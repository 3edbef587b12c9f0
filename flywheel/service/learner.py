"""The learner behind the service: the verify-then-cache loop run continuously, beside the answering replicas.

`Learner` (plain) keeps calling `Flywheel.run`, which reconciles interrupted deposits, claims every queued
problem and returns when the queue is empty; between drains it polls for newly queued problems (from
`/v1/solve` with a gold answer or `/v1/problems`). It resumes after a kill exactly as `galahad run` does:
the catalog is the queue. `LearnerActor` only places it on the Ray cluster with its generator and
depositor actors.
"""

from __future__ import annotations

import fcntl
import threading
import time
from dataclasses import asdict
from pathlib import Path

import ray

from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.learn.loop import Flywheel, LoopConfig, Tally


def hold_lock(path: Path, wait_seconds: float):
    """The data dir's run lock (the one `galahad run` takes), held by the process that writes the queue.
    A predecessor killed with its driver may outlive it for seconds: wait for it, then fail closed."""
    f = open(path, "w")  # noqa: SIM115 - held for the actor's life
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return f
        except BlockingIOError:
            if time.monotonic() > deadline:
                f.close()
                raise GalahadError(f"another `galahad run` or `serve` is learning in {path.parent}") from None
            time.sleep(0.2)


class Learner:
    def __init__(self, catalog: Catalog, store: BlobStore, generators: list, depositor, model_fingerprint: str,
                 config: LoopConfig, poll_seconds: float = 1.0):
        self.catalog, self.config, self.poll_seconds = catalog, config, poll_seconds
        self.wheel = Flywheel(catalog, store, generators, depositor, model_fingerprint, config)
        self.stopping = threading.Event()
        self.drains = 0

    @property
    def tally(self) -> Tally:
        return self.wheel.tally

    def run(self, run_id: str) -> Tally:
        """Drain the queue, wait for more, again, until `stop()`; a failed deposit ends it with its reason."""
        while not self.stopping.is_set():
            before = self.tally.problems
            self.wheel.run(run_id)
            self.drains += 1
            if self.tally.problems == before:  # nothing was queued: wait before looking again
                self.stopping.wait(self.poll_seconds)
        return self.tally

    def stop(self) -> None:
        self.stopping.set()


@ray.remote(max_restarts=0, max_concurrency=4)
class LearnerActor:
    """Starts the generator and depositor actors, then runs a `Learner` until told to stop."""

    def __init__(self, model: str, model_cache: str, catalog_url: str, store_path: str, config: LoopConfig,
                 generators: int, chain_max_tokens: int | None, device: str, poll_seconds: float,
                 lock_path: str | None = None, lock_wait_seconds: float = 60.0):
        from galahad.flywheel.artifacts.store import LocalStore
        from galahad.workers.actors import start_workers
        from galahad.workers.runtime import DEFAULT_RUNTIME

        # Embedded catalog: hold the run lock here, where the queue is written (not in the driver: this actor
        # can outlive a killed driver); holding it proves every claim left in the catalog is stale.
        self.lock = hold_lock(Path(lock_path), lock_wait_seconds) if lock_path else None
        self.catalog = Catalog(catalog_url)
        if self.lock is not None:
            self.catalog.release_claims()
        self.generators, self.depositor, fingerprint = start_workers(
            model, model_cache, DEFAULT_RUNTIME, device, generators, store_path, chain_max_tokens)
        self.run_id = self.catalog.start_run({"model": model, "model_fingerprint": fingerprint, "generators": generators,
                                              "service": True, "loop": asdict(config)})
        self.learner = Learner(self.catalog, LocalStore(store_path), self.generators, self.depositor, fingerprint, config,
                               poll_seconds)

    def run(self) -> dict:
        tally = self.learner.run(self.run_id)
        self.catalog.finish_run(self.run_id, asdict(tally))
        return asdict(tally)

    def tally(self) -> dict:
        return {**asdict(self.learner.tally), "drains": self.learner.drains, "run_id": self.run_id}

    def stop(self) -> None:
        self.learner.stop()
