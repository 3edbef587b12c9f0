"""Starting or joining Ray for a learning job or the service: checks before anything starts, then the cluster.

`prepare` pins the process env and checks the model spec (before any state is touched), `check_address`
refuses a Ray address nobody answers in seconds, and `start` builds the model snapshot once and then
starts a local cluster (on loopback) or joins `address`, with Ray's own noise sent to the data dir's log.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from galahad.flywheel.config import Paths
from galahad.flywheel.errors import GalahadError
from galahad.workers.model_loader import check_spec, ensure_snapshot
from galahad.workers.ray_env import RAY_CONNECT_ENV
from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env

CONNECT_TIMEOUT_S = 3.0
# A local cluster's own settings, for memory: Ray's GCS keeps the events of task attempts (~500 B each, up to
# 100,000) for its dashboard and state API, which Galahad does not start; a long-running `serve` makes tasks all
# day, and its gcs_server grew +13.7 MB/h with the store merely capped at 10,000 (bench/soak.py, 45 min). With
# the events not reported at all (Ray: "0 disables task event recording") it stayed level (52.4 -> 51.4 MB over
# minutes 12-27 of a 30-minute soak). A value the user set is kept.
LOCAL_CLUSTER_ENV = {"RAY_task_events_report_interval_ms": "0", "RAY_task_events_max_num_task_in_gcs": "10000"}


def prepare(model: str, address: str | None) -> None:
    """Pin the deterministic runtime's env, keep a local cluster on loopback, and check the model spec."""
    pin_process_env(DEFAULT_RUNTIME)
    if not address:
        # A local cluster stays on loopback: by default Ray advertises the machine's interface address.
        # This setting keeps a single-node cluster on 127.0.0.1; Ray reads it when it is imported.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

    check_spec(model)


def check_address(address: str) -> None:
    """Refuse a Ray address that is malformed or where nothing listens, in seconds: Ray itself retries
    for most of a minute before it gives up on an address nobody answers."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise GalahadError(f"--address must be host:port (or ray://host:port), got {address[:200]!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise GalahadError(f"cannot reach the Ray cluster at {address[:200]}: {reason}") from None


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2 (C/C++ code included) at a log file for the duration of a block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def start_ray(address: str | None, log: Path) -> None:
    """`ray.init`: join `address`, or start a local cluster; a failure is one line."""
    import ray

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        # Ray's C++ core logs connection retries straight to fd 2; users get our one line instead, and
        # the raw lines stay in the data dir's log.
        with stderr_to(log):
            if address:
                for key, value in RAY_CONNECT_ENV.items():
                    os.environ.setdefault(key, value)
                ray.init(address=address, log_to_driver=False, logging_level="ERROR")
            else:
                for key, value in LOCAL_CLUSTER_ENV.items():  # read by the cluster's processes at start
                    os.environ.setdefault(key, value)
                ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
                         logging_level="ERROR")
    except Exception as exc:  # ray raises ConnectionError, RuntimeError or its own types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise GalahadError(f"cannot reach the Ray cluster at {address or 'local'}: {first[:200]}") from exc


def start(model: str, paths: Paths, address: str | None) -> None:
    """Build the model snapshot once, here, before any actor starts (actors that each built it at once
    would read each other's half-written files on a fresh machine; the build is also locked across
    processes), then start or join Ray."""
    ensure_snapshot(model, paths.models)
    start_ray(address, paths.root / "logs" / "ray-driver.log")
