"""`galahad serve`: the HTTP API on Ray Serve, with the learner running beside it on the same cluster.

Checks the token rule first (a non-loopback `--host` needs GALAHAD_API_TOKEN), starts or joins Ray, deploys
the answering replicas and the learner's supervisor (which restarts a dead learner; one stderr line per
restart), prints one stdout line per learner batch (`learner.batch_line`), and serves until SIGINT/SIGTERM,
then shuts down in order with bounded waits and exits 0. On the embedded catalog the learner holds the data
dir's run lock. Killed at any moment, serving again resumes: the catalog is the queue.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import time

from galahad.flywheel.app import cluster
from galahad.flywheel.app.lock import run_lock
from galahad.flywheel.app.storage import is_embedded
from galahad.flywheel.cli.argtypes import count
from galahad.flywheel.cli.flags import add_learner_flags, add_prompt_budget_flag, add_solve_queue_flag
from galahad.flywheel.cli.session import add_storage_args, storage
from galahad.flywheel.config import ANSWER_POLICIES, DEFAULTS, TOKEN_ENV, LoopConfig, ServiceConfig
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.service.proxy_errors import CALLBACK, ENV
from galahad.workers.runtime import DEFAULT_RUNTIME
from galahad.workers.sampling import SamplingConfig

APP_NAME = "galahad"
PORT = count(1, 65535)
# Ray starts every worker process at nice 15 (its `worker_niceness`), so any other load on the machine starves
# the answering replicas. A worker reads the setting from its environment, so the replicas' runtime_env sets
# it to 0, as Ray's own job supervisor does (ray/dashboard/modules/job/job_manager.py); the learner stays niced.
REPLICA_NICENESS_ENV = {"RAY_worker_niceness": "0"}
LEARNER_STOP_S = 10.0  # the learner finishes its drain within this after a signal, else Ray stops it mid-drain
SERVE_STOP_S = 30.0  # Serve's controller deletes the app and its replicas within this (Serve's own bound)


def register(sub: argparse._SubParsersAction) -> None:
    service = DEFAULTS.service
    p = sub.add_parser("serve", help="serve the HTTP API (Ray Serve) with the learner running behind it")
    p.add_argument("--host", default=service.host, help=f"bind address (default {service.host}; any other "
                   f"address needs env {TOKEN_ENV})")
    p.add_argument("--port", type=PORT, default=service.port, help=f"TCP port (default {service.port})")
    p.add_argument("--replicas", type=count(), default=service.replicas,
                   help=f"answering replicas, one model each (default {service.replicas})")
    p.add_argument("--no-learn", action="store_true", help="answer only: no learner")
    p.add_argument("--answer-policy", choices=ANSWER_POLICIES, default=service.answer_policy,
                   help="where the computed value refutes the model: answer the value (computed, the default) or the "
                        "model's answer labelled wrong (model); a request may ask either")
    add_prompt_budget_flag(p)
    add_solve_queue_flag(p)
    # The flags `run` shares (model, budget, seed, workers, device, cluster): one declaration.
    add_learner_flags(p, role="learner: ")
    add_storage_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from galahad.flywheel.service.security import token_for  # deferred: sqlalchemy is heavy

    token = token_for(args.host, os.environ.get(TOKEN_ENV))  # before anything starts or binds
    cluster.prepare(args.model, args.address)  # pinned env, a local cluster on loopback, the model spec
    if not args.address:  # Serve's own error responses as JSON: its proxy inherits this from the local cluster
        os.environ.setdefault(ENV, CALLBACK)
    paths, catalog, store = storage(args, create=True)
    embedded = is_embedded(catalog.url, paths)
    if not args.no_learn and embedded:
        with run_lock(paths.root):  # fail fast when a `galahad run` holds it; the learner then takes it
            pass
    with catalog:
        return _serve(args, paths, catalog, store, token, not args.no_learn, embedded)


def _serve(args, paths, catalog, store, token, learn, embedded) -> int:
    import ray
    from ray import serve

    from galahad.flywheel.service.app import GalahadApi  # deferred: ray is heavy
    from galahad.flywheel.service.learner import LearnerSupervisor, one_line  # deferred: ray is heavy
    from galahad.workers.actors import pinned_env  # deferred: torch is heavy

    config = ServiceConfig(host=args.host, port=args.port, replicas=args.replicas,
                           max_prompt_tokens=args.max_prompt_tokens, max_queued_solves=args.max_queued_solves,
                           answer_policy=args.answer_policy)
    logging.getLogger("ray.serve").setLevel(logging.WARNING)
    cluster.start(args.model, paths, args.address)  # the model snapshot once, before any replica or actor loads it
    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    supervisor = ref = None
    try:
        serve.start(http_options={"host": args.host, "port": args.port}, logging_config={"log_level": "WARNING"})
        if learn:  # the learner is started (and restarted) by its supervisor, whose state the replicas report
            sampling = SamplingConfig(k=args.k, max_tokens=args.max_tokens, temperature=args.temperature,
                                      seed=args.seed)
            loop = LoopConfig(sampling=sampling, store_budget=args.store_budget, gold_solutions=args.gold_solutions)
            supervisor = LearnerSupervisor.options(max_restarts=-1).remote(
                (args.model, str(paths.models), catalog.url, str(store.root), loop,
                 args.generators, args.chain_max_tokens, args.device, config.learner_poll_seconds,
                 str(paths.root) if embedded else None), {"ram_tier_bytes": args.ram_tier, "kernel_mode": args.kernel_mode})
        api = GalahadApi.options(
            num_replicas=args.replicas, max_ongoing_requests=config.max_ongoing_requests,
            ray_actor_options={"num_cpus": 0, "runtime_env": {"env_vars": {
                **pinned_env(DEFAULT_RUNTIME)["env_vars"], **REPLICA_NICENESS_ENV}}},
        ).bind(args.model, str(paths.root), catalog.url, str(store.root), token, config, supervisor, args.ram_tier,
                 args.kernel_mode)
        try:
            serve.run(api, name=APP_NAME, route_prefix="/")
        except Exception as exc:
            raise GalahadError(f"the answering replicas failed to start: {str(exc).strip().splitlines()[-1][:300]}") from None
        if supervisor is not None:
            ref = supervisor.run.remote()
        print(f"galahad: serving on http://{args.host}:{args.port} ({args.replicas} replica(s), learner "
              f"{'on' if learn else 'off'}; docs at /docs)", flush=True)
        restarts, batches = 0, (None, 0)
        while not stop["now"]:
            if ref is None:
                signal.pause()  # answer-only: nothing to watch until a signal
                continue
            done, _ = ray.wait([ref], timeout=1.0)
            restarts = _say_restarts(supervisor, restarts)
            batches = _say_batches(supervisor, batches)
            if done:
                try:
                    ray.get(ref)
                    ref = None  # it was told to stop
                except Exception as exc:  # the supervisor's own process died: Ray restarts it (max_restarts)
                    print(f"galahad: learner supervisor died ({one_line(exc)}); starting it again",
                          file=sys.stderr, flush=True)
                    ref = supervisor.run.remote()
    finally:
        shutdown(supervisor, ref, bool(args.address))
    return 0


def shutdown(supervisor, ref, joined: bool) -> None:
    """In order, each wait bounded: tell the learner to stop and let it finish its drain (`LEARNER_STOP_S`);
    shut Serve down (`stop_serve`; on a joined cluster only our app is deleted); then Ray."""
    import ray
    from ray import serve

    if supervisor is not None:
        with contextlib.suppress(Exception):
            ray.get(supervisor.stop.remote(), timeout=LEARNER_STOP_S)
            if ref is not None:
                ray.wait([ref], timeout=LEARNER_STOP_S)
    with contextlib.suppress(Exception):
        serve.delete(APP_NAME) if joined else stop_serve(SERVE_STOP_S)
    ray.shutdown()


def stop_serve(timeout_s: float) -> None:
    """`serve.shutdown()` without its error line (Ray logs the controller task its own call waits on as
    failed): the controller is told to shut down without waiting, its name watched until it is gone (at most
    `timeout_s`), then `serve.shutdown()` only drops its client."""
    import ray
    from ray import serve
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE

    try:
        controller = ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
    except ValueError:  # Serve is not running
        return
    ray.get(controller.graceful_shutdown.remote(False), timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
        except ValueError:
            break
        time.sleep(0.2)
    serve.shutdown()


def _say_batches(supervisor, seen: tuple[int | None, int]) -> tuple[int | None, int]:
    """Print one line on stdout for each learner batch since `seen` (the learner's pid, its last batch)."""
    import ray

    from galahad.flywheel.service.learner import batch_line  # deferred: ray is heavy

    try:
        got = ray.get(supervisor.batches.remote(*seen), timeout=5)
    except Exception:  # the supervisor is restarting: the watch loop says so
        return seen
    for batch in got["batches"]:
        print(batch_line(batch), flush=True)
    last = got["batches"][-1]["batch"] if got["batches"] else (seen[1] if got["pid"] == seen[0] else 0)
    return got["pid"], last


def _say_restarts(supervisor, seen: int) -> int:
    """Print one line on stderr for each learner failure the supervisor has restarted since `seen`."""
    import ray

    try:
        state = ray.get(supervisor.state.remote(), timeout=5)
    except Exception:  # the supervisor is restarting: the watch loop says so
        return seen
    if state["restarts"] > seen:
        print(f"galahad: learner failed ({state['last_error']}); restarting it (restart {state['restarts']})",
              file=sys.stderr, flush=True)
    return state["restarts"]
