"""Thin Ray wrappers around the plain worker classes, and how they ask for resources.

The logic lives in `Generator` and `Depositor`; these wrappers only place them: on a GPU when the
cluster has one (`num_gpus`), otherwise on CPUs. Actors restart when their process dies and their
tasks are retried, so a lost worker costs time, never a verified solution.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import ray

from galahad.flywheel.artifacts.s3_store import ENV_VARS as STORE_ENV
from galahad.flywheel.errors import GalahadError
from galahad.kernels.modes import MODE_ENV
from galahad.workers.depositor import Depositor
from galahad.workers.generator import Generator
from galahad.workers.runtime import (
    PINNED_ENV,
    PROCESS_ENV,
    SAMPLER_MODES,
    GeneratorRuntime,
    RuntimeConfig,
    runtime_facts,
)
from galahad.workers.sampler_choice import choose


@dataclass(frozen=True)
class Placement:
    num_cpus: float
    num_gpus: float


def placement(cluster_gpus: float, role: str) -> Placement:
    """Generators take a whole GPU (or one CPU); the depositor shares: it is idle most of the time."""
    if cluster_gpus >= 1:
        return Placement(num_cpus=1, num_gpus=1.0 if role == "generator" else 0.1)
    return Placement(num_cpus=1 if role == "generator" else 0, num_gpus=0)


def pinned_env(runtime: RuntimeConfig) -> dict:
    """Actors are new processes: the deterministic env must be set before their first torch import,
    which happens when Ray unpickles the actor class, so it travels as the actor's runtime_env."""
    env = dict(PINNED_ENV)
    env.update(OMP_NUM_THREADS=str(runtime.threads), MKL_NUM_THREADS=str(runtime.threads))
    env.update({k: os.environ.get(k, v) for k, v in PROCESS_ENV.items()})  # memory and scheduling, not bits (runtime.py)
    # An s3:// store's endpoint and credentials: an actor on another node of a joined cluster does not inherit
    # this process's environment (its raylet's is what it gets), and the depositor and replicas open the store.
    env.update({k: os.environ[k] for k in STORE_ENV if k in os.environ})
    return {"env_vars": env}


class _Located:
    """Mixed into the actors: where they run (tests check placement across nodes)."""

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def model_fp(self) -> str:
        return self.engine.model_fingerprint

    def fingerprint_pair(self) -> tuple[str, str]:
        """(model, runtime) fingerprints: the artifacts this worker can graft or extend."""
        return self.engine.model_fingerprint, self.engine.runtime_fingerprint

    def runtime_record(self) -> tuple[str, dict]:
        """(runtime fingerprint, the facts it hashes, as this worker read them): what the catalog records so
        that another machine can name the fields its runtime differs in."""
        return self.engine.runtime_fingerprint, runtime_facts(self.engine.runtime, self.engine.arch_facts)


@ray.remote(max_restarts=3, max_task_retries=3)
class GeneratorActor(Generator, _Located):
    pass


@ray.remote(max_restarts=3, max_task_retries=3)
class DepositorActor(Depositor, _Located):
    pass


def start_generator(cluster_gpus: float, model: str, model_cache: str, runtime: RuntimeConfig):
    p = placement(cluster_gpus, "generator")
    return GeneratorActor.options(num_cpus=p.num_cpus, num_gpus=p.num_gpus, runtime_env=pinned_env(runtime)).remote(
        model, model_cache, runtime)


def start_depositor(cluster_gpus: float, model: str, model_cache: str, runtime: RuntimeConfig, store_path: str,
                    chain_max_tokens: int | None, ram_tier_bytes: int | None = None):
    p = placement(cluster_gpus, "depositor")
    return DepositorActor.options(num_cpus=p.num_cpus, num_gpus=p.num_gpus, runtime_env=pinned_env(runtime)).remote(
        model, model_cache, runtime, store_path, chain_max_tokens, ram_tier_bytes=ram_tier_bytes)


def start_workers(model: str, model_cache: str, runtime: RuntimeConfig, device: str, generators: int,
                  store_path: str, chain_max_tokens: int | None, ram_tier_bytes: int | None = None,
                  sampler_dtype: str = "auto") -> tuple[list, object, str, dict]:
    """The learning job's actors on the connected cluster: `generators` generators and one depositor, on GPUs
    when the cluster has them (`device="auto"`); returns (generators, depositor, model fingerprint, what the
    generators compute in) once every worker has loaded the same model, else one line naming why not.
    Generators compute in `sampler_dtype` (`GeneratorRuntime`); with `auto` on a CPU, under a sampling kernel
    mode the user did not pin (`$GALAHAD_KERNEL_MODE`), in the kernel mode and dtype that measured fastest here
    (`workers/sampler_choice.py`)."""
    gpus = ray.cluster_resources().get("GPU", 0)
    device = ("cuda" if gpus >= 1 else "cpu") if device == "auto" else device
    runtime = runtime.with_(device=device)
    chosen = GeneratorRuntime(compute_dtype=sampler_dtype)
    seconds: dict[str, float] = {}
    if sampler_dtype == "auto" and device == "cpu" and runtime.kernel_mode in SAMPLER_MODES \
            and not os.environ.get(MODE_ENV):
        mode, dtype, seconds = choose(model, model_cache)
        chosen = GeneratorRuntime(compute_dtype=dtype, kernel_mode=mode)
    gen_runtime = chosen.apply(runtime)
    sampler = {"kernel_mode": gen_runtime.kernel_mode, "compute_dtype": gen_runtime.compute_dtype,
               "seconds_per_step": seconds}
    gens = [start_generator(gpus, model, model_cache, gen_runtime) for _ in range(generators)]
    depositor = start_depositor(gpus, model, model_cache, runtime, store_path, chain_max_tokens, ram_tier_bytes)
    try:
        fps = ray.get([a.model_fp.remote() for a in [*gens, depositor]])
    except ray.exceptions.RayActorError as exc:
        raise GalahadError(f"model {model!r} failed to load in a worker: {str(exc).splitlines()[-1][:200]}") from exc
    if len(set(fps)) != 1:
        raise GalahadError("workers loaded different models (model fingerprints differ)")
    return gens, depositor, fps[0], sampler
