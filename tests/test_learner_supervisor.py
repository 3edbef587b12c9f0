"""The service's learner supervisor on a local Ray cluster, with a stand-in learner (no model): a learner whose
job raises (an OperationalError, as a broken SQLite write gives) is killed and started again, the failure
in one line, the count kept; `stop()` ends it. The real learner, killed by PID over HTTP, is in
test_service.py (`test_a_killed_learner_restarts_visibly_and_a_killed_replica_answers_json`)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import ray
from deadlines import wait_for
from local_ray import local_ray as start_local_ray

from galahad.flywheel.service.learner import LearnerSupervisor, one_line


@pytest.fixture(scope="module")
def local_ray():
    with start_local_ray(num_cpus=1):
        yield


def test_one_line_names_the_jobs_own_error_or_rays_reason():
    assert one_line(sqlite3.OperationalError("database is locked\n[SQL: INSERT ...]")) == \
        "OperationalError: database is locked"
    died = ray.exceptions.ActorDiedError()
    assert one_line(died).startswith("ActorDiedError: ") and "\n" not in one_line(died)
    assert len(one_line(RuntimeError("x" * 1000))) == 300


def test_a_learner_whose_job_raises_is_restarted_and_the_error_is_visible(local_ray, tmp_path):
    @ray.remote(max_restarts=0, max_concurrency=4)
    class FlakyLearner:
        """Its first incarnation's job raises; later ones run until stopped."""

        def __init__(self, marker: str):
            self.first = not Path(marker).exists()
            Path(marker).touch()
            import threading

            self.stopping = threading.Event()

        def pid(self) -> int:
            return os.getpid()

        def run(self) -> dict:
            if self.first:
                raise sqlite3.OperationalError("database is locked")
            self.stopping.wait()
            return {}

        def stop(self) -> None:
            self.stopping.set()

    sup = LearnerSupervisor.remote((str(tmp_path / "started"),), {}, 0.05, 0.05, FlakyLearner)
    ref = sup.run.remote()

    def restarted():
        s = ray.get(sup.state.remote())
        return s if s["restarts"] == 1 and s["up"] else None

    state = wait_for(restarted, "the learner restarted once and running again")
    assert state["state"] == "running" and state["pid"] is not None, state
    assert state["last_error"] == "OperationalError: database is locked", state
    ray.get(sup.stop.remote())
    final = ray.get(ref, timeout=120)
    assert final["state"] == "stopped" and final["restarts"] == 1 and not final["up"], final
