"""The thin Ray wrappers: resource requests, fingerprints through the actor, and restart-and-retry."""

import json
import os
import signal
import threading
from pathlib import Path

import pytest
import ray
from deadlines import wait_for
from local_ray import local_ray as start_local_ray

from galahad.flywheel.catalog import problem_hash
from galahad.workers.actors import pinned_env, placement, start_generator
from galahad.workers.generator import Generator
from galahad.workers.runtime import DEFAULT_RUNTIME, runtime_facts
from galahad.workers.sampling import SamplingConfig

RT = DEFAULT_RUNTIME.with_(threads=1)


@pytest.fixture(scope="module")
def local_ray():
    # A fake GPU lets GPU scheduling be tested on a CPU machine; the model itself stays on the CPU.
    with start_local_ray(num_cpus=2, num_gpus=1):
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        yield


def test_placement_asks_for_gpus_only_when_the_cluster_has_them():
    assert placement(0, "generator").num_gpus == 0 and placement(0, "generator").num_cpus == 1
    assert placement(2, "generator").num_gpus == 1
    assert placement(0, "depositor").num_cpus == 0 and 0 < placement(1, "depositor").num_gpus < 1


def test_generator_actor_matches_the_plain_class(local_ray, model_cache):
    actor = start_generator(1, "tiny", str(model_cache), RT)
    problem = {"id": problem_hash("What is 2 + 2?"), "text": "What is 2 + 2?"}
    cfg = SamplingConfig(k=3, max_tokens=5, seed=11)
    remote = ray.get(actor.attempt.remote(problem, cfg))
    assert ray.available_resources().get("GPU", 0) == 0  # the actor holds the (fake) GPU
    local = Generator("tiny", model_cache, RT).attempt(problem, cfg)
    assert [r.output_text for r in remote] == [r.output_text for r in local]
    assert ray.get(actor.model_fp.remote()) == Generator("tiny", model_cache, RT).model_fingerprint
    # The memory env reaches the actor's process (glibc reads it at start), and is not in the fingerprint.
    assert ray.get(actor.__ray_call__.remote(lambda self: os.environ.get("MALLOC_ARENA_MAX"))) == "2"
    assert "MALLOC_ARENA_MAX" not in json.dumps(runtime_facts(RT))
    assert pinned_env(RT)["env_vars"]["MALLOC_ARENA_MAX"] == "2"  # also for actors on a joined cluster
    ray.kill(actor)


def _hold_the_next_call(marker: str):
    """Run inside the actor: its next `attempt` announces itself in `marker`, then waits to be killed. Only
    this process is changed: the restarted actor reruns `__init__` and answers the retried task normally."""

    def arm(self) -> None:
        def held(*args, **kwargs):
            Path(marker).write_text(str(os.getpid()))
            threading.Event().wait()  # forever: the test kills this process while the task is in flight

        self.attempt_many = held  # `Generator.attempt` calls `self.attempt_many`

    return arm


@pytest.mark.slow  # kill -9 of an actor, its restart (a model load) and the whole task again
def test_a_killed_generator_is_restarted_and_its_task_retried(local_ray, model_cache, tmp_path):
    actor = start_generator(0, "tiny", str(model_cache), RT)
    pid = ray.get(actor.__ray_call__.remote(lambda self: os.getpid()))
    marker = tmp_path / "attempt-started"
    ray.get(actor.__ray_call__.remote(_hold_the_next_call(str(marker))))
    problem = {"id": problem_hash("What is 5 + 1?"), "text": "What is 5 + 1?"}
    cfg = SamplingConfig(k=30, max_tokens=12, seed=3, sampler="sequential")
    ref = actor.attempt.remote(problem, cfg)
    wait_for(marker.exists, "the attempt starts in the actor")  # an event, not a guess at how long it takes
    assert int(marker.read_text()) == pid
    assert not ray.wait([ref], timeout=0)[0], "held in the task: it cannot have finished"
    os.kill(pid, signal.SIGKILL)
    results = ray.get(ref, timeout=600)
    assert len(results) == 30 and [r.sample for r in results] == list(range(30))
    assert [r.output_text for r in results] == [r.output_text for r in Generator("tiny", model_cache, RT).attempt(
        problem, cfg)]  # the retried task is the whole task, as the plain class computes it
    assert ray.get(actor.__ray_call__.remote(lambda self: os.getpid())) != pid
    ray.kill(actor)
