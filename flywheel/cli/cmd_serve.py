"""`galahad serve`: the HTTP API on Ray Serve, with the learner running beside it on the same cluster.

Checks the token rule before anything starts (a non-loopback `--host` needs GALAHAD_API_TOKEN), starts or
joins Ray, deploys the answering replicas (model loaded once per
replica) and the learner actor, and serves until SIGINT/SIGTERM. On the embedded catalog the learner
actor holds the data dir's run lock (as `galahad run` does) and returns stale claims to the queue. Killed at any moment, serving again
resumes: the catalog is the queue, and the learner's first drain deposits interrupted verdicts.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys

from galahad.flywheel.app import cluster
from galahad.flywheel.app.lock import run_lock
from galahad.flywheel.app.storage import is_embedded
from galahad.flywheel.cli.argtypes import count
from galahad.flywheel.cli.flags import add_learner_flags
from galahad.flywheel.cli.session import add_storage_args, storage
from galahad.flywheel.config import DEFAULTS, TOKEN_ENV, ServiceConfig
from galahad.flywheel.errors import GalahadError
from galahad.workers.sampling import SamplingConfig

APP_NAME = "galahad"
PORT = count(1, 65535)


def register(sub: argparse._SubParsersAction) -> None:
    service = DEFAULTS.service
    p = sub.add_parser("serve", help="serve the HTTP API (Ray Serve) with the learner running behind it")
    p.add_argument("--host", default=service.host, help=f"bind address (default {service.host}; any other "
                   f"address needs env {TOKEN_ENV})")
    p.add_argument("--port", type=PORT, default=service.port, help=f"TCP port (default {service.port})")
    p.add_argument("--replicas", type=count(), default=service.replicas,
                   help=f"answering replicas, one model each (default {service.replicas})")
    p.add_argument("--no-learn", action="store_true", help="answer only: no learner")
    # The flags `run` shares (model, budget, seed, workers, device, cluster): one declaration.
    add_learner_flags(p, role="learner: ")
    add_storage_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from galahad.flywheel.service.security import token_for

    token = token_for(args.host, os.environ.get(TOKEN_ENV))  # before anything starts or binds
    if not 0 < args.port < 65536:
        raise GalahadError("--port must be between 1 and 65535")
    for name in ("replicas", "k", "max_tokens", "generators"):
        if getattr(args, name) < 1:
            raise GalahadError(f"--{name.replace('_', '-')} must be at least 1")
    cluster.prepare(args.model, args.address)  # pinned env, a local cluster on loopback, the model spec
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

    from galahad.flywheel.learn.loop import LoopConfig
    from galahad.flywheel.service.app import GalahadApi
    from galahad.flywheel.service.learner import LearnerActor
    from galahad.workers.actors import pinned_env
    from galahad.workers.runtime import DEFAULT_RUNTIME

    config = ServiceConfig(host=args.host, port=args.port, replicas=args.replicas)
    logging.getLogger("ray.serve").setLevel(logging.WARNING)
    cluster.start(args.model, paths, args.address)  # the model snapshot once, before any replica or actor loads it
    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    learner = ref = None
    try:
        serve.start(http_options={"host": args.host, "port": args.port}, logging_config={"log_level": "WARNING"})
        api = GalahadApi.options(
            num_replicas=args.replicas, max_ongoing_requests=config.max_ongoing_requests,
            ray_actor_options={"num_cpus": 0, "runtime_env": pinned_env(DEFAULT_RUNTIME)},
        ).bind(args.model, str(paths.root), catalog.url, str(store.root), token, config)
        try:
            serve.run(api, name=APP_NAME, route_prefix="/")
        except Exception as exc:
            raise GalahadError(f"the answering replicas failed to start: {str(exc).strip().splitlines()[-1][:300]}") from None
        if learn:
            sampling = SamplingConfig(k=args.k, max_tokens=args.max_tokens, temperature=args.temperature,
                                      seed=args.seed)
            learner = LearnerActor.options(num_cpus=0).remote(
                args.model, str(paths.models), catalog.url, str(store.root), LoopConfig(sampling=sampling),
                args.generators, args.chain_max_tokens, args.device, config.learner_poll_seconds,
                str(paths.root) if embedded else None)
            ref = learner.run.remote()
        print(f"galahad: serving on http://{args.host}:{args.port} ({args.replicas} replica(s), learner "
              f"{'on' if learn else 'off'}; docs at /docs)", flush=True)
        while not stop["now"]:
            if ref is None:
                signal.pause()  # answer-only: nothing to watch until a signal
                continue
            done, _ = ray.wait([ref], timeout=1.0)
            if done:
                try:
                    ray.get(ref)
                except Exception as exc:  # the learner stopped: keep answering, say why once
                    print(f"galahad: learner stopped: {str(exc).strip().splitlines()[-1][:300]}", file=sys.stderr,
                          flush=True)
                ref = None
    finally:
        if learner is not None:
            with contextlib.suppress(Exception):
                ray.get(learner.stop.remote(), timeout=5)
        with contextlib.suppress(Exception):
            serve.delete(APP_NAME) if args.address else serve.shutdown()
        ray.shutdown()
    return 0
