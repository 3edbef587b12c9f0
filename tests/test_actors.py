"""The thin Ray wrappers: resource requests, fingerprints through the actor, and restart-and-retry."""

import os
import signal
import time

import pytest
import ray

from galahad.flywheel.catalog import problem_hash
from galahad.workers.actors import placement, start_generator
from galahad.workers.generator import Generator
from galahad.workers.runtime import DEFAULT_RUNTIME
from galahad.workers.sampling import SamplingConfig

RT = DEFAULT_RUNTIME.with_(threads=1)


@pytest.fixture(scope="module")
def local_ray():
    # A fake GPU lets GPU scheduling be tested on a CPU machine; the model itself stays on the CPU.
    # ...and stays on loopback (see flywheel/cmd_run.py). Ray reads this setting into a constant when it
    # is imported, so the constant is set for the init and the env for the processes it spawns; both are
    # restored after, or the multi-node tests' `ray start` would refuse a second node.
    from ray._private import ray_constants

    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"), ray_constants.ENABLE_RAY_CLUSTER
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    finally:
        if saved[0] is None:
            del os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"]
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved[0]
        ray_constants.ENABLE_RAY_CLUSTER = saved[1]
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    yield
    ray.shutdown()


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
    ray.kill(actor)


def test_a_killed_generator_is_restarted_and_its_task_retried(local_ray, model_cache):
    actor = start_generator(0, "tiny", str(model_cache), RT)
    pid = ray.get(actor.__ray_call__.remote(lambda self: os.getpid()))
    problem = {"id": problem_hash("What is 5 + 1?"), "text": "What is 5 + 1?"}
    cfg = SamplingConfig(k=300, max_tokens=12, seed=3, sampler="sequential")  # slow enough to kill mid-task
    ref = actor.attempt.remote(problem, cfg)
    time.sleep(1.0)
    assert not ray.wait([ref], timeout=0)[0], "the task must still be running when its process is killed"
    os.kill(pid, signal.SIGKILL)
    results = ray.get(ref, timeout=600)
    assert len(results) == 300 and [r.sample for r in results] == list(range(300))
    assert ray.get(actor.__ray_call__.remote(lambda self: os.getpid())) != pid
    ray.kill(actor)
