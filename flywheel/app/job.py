"""The learning job: the one way to start the verify-then-cache loop, for `galahad run` and the service.

`LearningJob` returns stale claims to the queue when its caller holds the data dir's run lock, starts the
generator and depositor actors on the connected Ray cluster, records the run in the catalog, and drives
the `Flywheel`: drained once (`galahad run`) or continuously, draining, polling for newly queued problems,
again, until stopped (the service's learner). It resumes after a kill as the catalog says: each drain
first reconciles verdicts whose deposit the kill interrupted, then claims every queued problem. Each drain
that learned something is kept as a batch record (`batches`: problems, verified, failed, seconds, rate), the
line `serve` prints per batch.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from galahad.flywheel.app.lock import RunLock
from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.evictions import evict
from galahad.flywheel.config import DEFAULTS, LoopConfig
from galahad.flywheel.learn.loop import Flywheel, Tally
from galahad.kernels.modes import resolve
from galahad.workers.runtime import DEFAULT_RUNTIME


@dataclass(frozen=True)
class WorkerSpec:
    """The actors a job starts: `generators` generators and one depositor of `model`, on `device`
    (`auto`: cuda when the cluster has GPUs); a chain past `chain_max_tokens` starts a new one."""

    model: str
    model_cache: str
    generators: int
    chain_max_tokens: int | None
    device: str = "auto"
    kernel_mode: str = DEFAULTS.kernel_mode  # the generators' and the depositor's (config.KERNEL_MODES)


BATCHES_KEPT = 100  # batch records a job keeps (the service's driver reads them every second)


class LearningJob:
    """One learning job on the connected Ray cluster, writing `catalog` and `store`. `lock`: the data dir's
    run lock, held by the caller (so every claim left in the catalog is stale and returned to the queue) and
    referenced for the job's life. `run_info` is recorded with the run beside the model, its fingerprint, the
    generator count and the loop config."""

    def __init__(self, catalog: Catalog, store: LocalStore, workers: WorkerSpec, config: LoopConfig,
                 run_info: dict[str, Any] | None = None, lock: RunLock | None = None):
        import ray

        from galahad.workers.actors import start_workers  # deferred: torch is heavy

        self.catalog, self.store, self.config, self.lock = catalog, store, config, lock
        if lock is not None:
            catalog.queue.release_all()  # claims left by a killed local job: we hold the lock, so they are stale
        self.generators, self.depositor, self.fingerprint, self.sampler = start_workers(
            workers.model, workers.model_cache, DEFAULT_RUNTIME.with_(kernel_mode=resolve(workers.kernel_mode, workers.device)[0]), workers.device, workers.generators,
            str(store.root), workers.chain_max_tokens, store.ram.capacity, config.sampling.dtype)
        # The facts behind the depositor's runtime fingerprint, as it read them (its device, its model's
        # architecture facts), so that on another machine a foreign artifact's difference can be named.
        catalog.runtimes.record(*ray.get(self.depositor.runtime_record.remote()))
        self.run_id = catalog.runs.start({"model": workers.model, "model_fingerprint": self.fingerprint,
                                         "generators": workers.generators, "sampler": self.sampler, **(run_info or {}),
                                         "loop": asdict(config)})
        self.wheel = Flywheel(catalog, store, self.generators, self.depositor, self.fingerprint, config)
        self.stopping = threading.Event()
        self.drains = 0
        self.batches: deque[dict[str, Any]] = deque(maxlen=BATCHES_KEPT)  # the latest drains that learned

    @property
    def tally(self) -> Tally:
        return self.wheel.tally

    def nodes(self) -> dict[str, Any]:
        """The address each actor's node registered with (what the cluster's traffic uses)."""
        import ray

        addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
        actors = [*self.generators, self.depositor]
        nodes = [addresses.get(i, "?") for i in ray.get([a.node_id.remote() for a in actors])]
        return {"generators": nodes[:-1], "depositor": nodes[-1]}

    def drain(self, on_progress: Callable[[Tally], None] | None = None) -> Tally:
        """Reconcile interrupted deposits, then claim and learn every queued problem (up to the config's
        `limit`); returns when the queue is empty. A failed deposit ends it with its one-line reason."""
        counts = ("problems", "verified", "gold_solutions", "failed")
        before, t0 = [getattr(self.tally, c) for c in counts], time.perf_counter()
        tally = self.wheel.run(self.run_id, on_progress)
        self.drains += 1
        problems, verified, gold, failed = (getattr(tally, c) - then for c, then in zip(counts, before, strict=True))
        if problems:
            seconds = time.perf_counter() - t0
            self.batches.append({"batch": self.drains, "problems": problems, "verified": verified,
                                 "gold_solutions": gold, "failed": failed, "seconds": round(seconds, 3),
                                 "rate": round(problems / seconds, 4) if seconds > 0 else 0.0})
        if self.config.store_budget is not None:  # the disk budget: least recently grafted blobs go first
            evict(self.catalog, self.store, self.config.store_budget)
        return tally

    def run_until_stopped(self, poll_seconds: float) -> Tally:
        """Drain the queue, wait for more, again, until `stop()`."""
        while not self.stopping.is_set():
            before = self.tally.problems
            self.drain()
            if self.tally.problems == before:  # nothing was queued: wait before looking again
                self.stopping.wait(poll_seconds)
        return self.tally

    def stop(self) -> None:
        self.stopping.set()

    def finish(self, summary: dict[str, Any]) -> None:
        """Record the run's summary in the catalog."""
        self.catalog.runs.finish(self.run_id, summary)
