"""The learner behind the service: the learning job run continuously, beside the answering replicas.

`start_learner` takes the data dir's run lock when the catalog is the embedded one and starts the same
`LearningJob` as `galahad run`, which keeps draining the queue and polls for newly queued problems between
drains; after a kill it resumes from the catalog. `LearnerActor` only places it on the Ray cluster.

`LearnerSupervisor` keeps one `LearnerActor` running: when it dies, it kills what is left of it (so its run
lock and workers go too), waits a backoff (1 s doubling to 30 s; reset after a minute's run) and starts a new
one. Its `state()` is what `/readyz` and `/metrics` report; its `batches()` hands on the learner's batch
records, which `serve` prints one line each (`batch_line`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import ray

from galahad.flywheel.app.job import LearningJob, WorkerSpec
from galahad.flywheel.app.lock import LEARNING, run_lock
from galahad.flywheel.app.storage import open_catalog
from galahad.flywheel.artifacts.store import open_store
from galahad.flywheel.config import DEFAULTS, LoopConfig


def start_learner(model: str, model_cache: str, catalog_url: str, store_path: str, config: LoopConfig,
                  generators: int, chain_max_tokens: int | None, device: str, lock_root: str | None = None,
                  lock_wait_seconds: float = 60.0, ram_tier_bytes: int | None = None,
                  kernel_mode: str = DEFAULTS.kernel_mode) -> LearningJob:
    """The service's learning job. Embedded catalog (`lock_root`, the data dir): the run lock is held here,
    where the queue is written (not in the driver: the learner can outlive a killed driver), for the job's
    life; a predecessor still holding it is waited for, then the job fails closed."""
    lock = run_lock(Path(lock_root), lock_wait_seconds, LEARNING) if lock_root else None
    catalog = open_catalog(catalog_url)
    workers = WorkerSpec(model, model_cache, generators, chain_max_tokens, device, kernel_mode)
    return LearningJob(catalog, open_store(store_path, ram_tier_bytes), workers, config, {"service": True}, lock)


@ray.remote(max_restarts=0, max_concurrency=4)
class LearnerActor:
    """Starts the service's `LearningJob` (`start_learner`), then runs it until told to stop."""

    def __init__(self, model: str, model_cache: str, catalog_url: str, store_path: str, config: LoopConfig,
                 generators: int, chain_max_tokens: int | None, device: str, poll_seconds: float,
                 lock_root: str | None = None, lock_wait_seconds: float = 60.0, ram_tier_bytes: int | None = None,
                 kernel_mode: str = DEFAULTS.kernel_mode):
        self.poll_seconds = poll_seconds
        self.job = start_learner(model, model_cache, catalog_url, store_path, config, generators, chain_max_tokens,
                                 device, lock_root, lock_wait_seconds, ram_tier_bytes, kernel_mode)

    def run(self) -> dict:
        tally = self.job.run_until_stopped(self.poll_seconds)
        self.job.finish(asdict(tally))
        return asdict(tally)

    def tally(self) -> dict:
        return {**asdict(self.job.tally), "drains": self.job.drains, "run_id": self.job.run_id}

    def stop(self) -> None:
        self.job.stop()

    def batches(self, after: int) -> list[dict]:
        """The job's batch records numbered after `after` (oldest first)."""
        return [b for b in list(self.job.batches) if b["batch"] > after]

    def pid(self) -> int:
        """This actor's process id (answered once `__init__` is done: the lock held, the workers started)."""
        return os.getpid()


def batch_line(batch: dict) -> str:
    """One learner batch as `serve` prints it: plain `key=value` fields, one line, greppable."""
    return (f"galahad: learner batch {batch['batch']}: problems={batch['problems']} verified={batch['verified']} "
            f"gold={batch.get('gold_solutions', 0)} failed={batch['failed']} seconds={batch['seconds']:.1f} "
            f"rate={batch['rate']:.3g}/s")


FIRST_BACKOFF_S, MAX_BACKOFF_S = 1.0, 30.0
HEALTHY_S = 60.0  # a learner that ran this long resets the backoff


def one_line(exc: BaseException) -> str:
    """A learner failure in one line: the job's own exception (`Type: first line`), or Ray's reason for a
    dead actor (the last line of its message, which says how the process ended)."""
    cause = getattr(exc, "cause", None)
    if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(cause, BaseException):
        exc = cause
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if isinstance(exc, ray.exceptions.RayError):  # Ray's last line, without its list of common causes
        text = lines[-1].split(" Some common causes", 1)[0] if lines else ""
    else:
        text = lines[0] if lines else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


@ray.remote(num_cpus=0, max_restarts=0)
class LearnerSupervisor:
    """Starts `LearnerActor(*args, **kwargs)` and starts a new one each time it dies, until `stop()`.
    An async actor: `state()` answers while `run()` waits on the learner. `learner_cls` (an actor class
    with `pid`, `run` and `stop`) stands in for `LearnerActor` in tests."""

    def __init__(self, args: tuple, kwargs: dict, first_backoff_s: float = FIRST_BACKOFF_S,
                 max_backoff_s: float = MAX_BACKOFF_S, learner_cls=None):
        self.args, self.kwargs = args, kwargs
        self.learner_cls = learner_cls or LearnerActor
        self.first_backoff_s, self.max_backoff_s = first_backoff_s, max_backoff_s
        self.learner = None
        self.stopping = asyncio.Event()
        self.status: dict[str, Any] = {"state": "starting", "up": False, "restarts": 0, "last_error": None,
                                       "last_error_at": None, "pid": None}

    async def run(self) -> dict[str, Any]:
        delay = self.first_backoff_s
        while not self.stopping.is_set():
            self.learner = self.learner_cls.options(num_cpus=0).remote(*self.args, **self.kwargs)
            started = time.monotonic()
            try:
                pid = await self.learner.pid.remote()  # its __init__ is done: lock held, workers up
                self.status.update(state="running", up=True, pid=pid)
                await self.learner.run.remote()  # returns only once told to stop
                if self.stopping.is_set():
                    break
                raise RuntimeError("the learner returned without being told to stop")
            except Exception as exc:  # the learner's process died, or its job raised
                if self.stopping.is_set():
                    break
                error = one_line(exc)
                self.status.update(state="restarting", up=False, pid=None, last_error=error,
                                   last_error_at=time.time(), restarts=self.status["restarts"] + 1)
                ray.kill(self.learner)  # its process (holding the run lock) and, with it, its workers
                self.learner = None
                if time.monotonic() - started >= HEALTHY_S:
                    delay = self.first_backoff_s
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), delay)
                delay = min(2 * delay, self.max_backoff_s)
        self.status.update(state="stopped", up=False)
        return dict(self.status)

    async def state(self) -> dict[str, Any]:
        return dict(self.status)

    async def batches(self, pid: int | None, after: int) -> dict[str, Any]:
        """The running learner's batch records after `after`, all of them when it is not the learner `pid`
        (a restarted learner numbers its batches from 1), and its pid; none while no learner runs."""
        learner, now = self.learner, self.status.get("pid")
        if learner is None or now is None:
            return {"pid": None, "batches": []}
        try:
            return {"pid": now, "batches": await learner.batches.remote(after if now == pid else 0)}
        except Exception:  # it is dying: the supervisor says so through state()
            return {"pid": now, "batches": []}

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Tell the learner to stop after its current drain; wait for that at most `timeout_s`."""
        self.stopping.set()
        if self.learner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.learner.stop.remote(), timeout_s)
