"""Tests' single-node Ray on loopback: `ray.init` with Ray's cluster mode off for this process.

Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER into a constant when it is imported, so the constant is set for
the init and the env for the processes it spawns; both are restored after, or the multi-node tests'
`ray start` would refuse a second node (see flywheel/app/cluster.py for the loopback rule).
"""

from __future__ import annotations

import contextlib
import os

import ray


@contextlib.contextmanager
def local_ray(**init):
    from ray._private import ray_constants

    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"), ray_constants.ENABLE_RAY_CLUSTER
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR", **init)
    finally:
        if saved[0] is None:
            del os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"]
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved[0]
        ray_constants.ENABLE_RAY_CLUSTER = saved[1]
    try:
        yield
    finally:
        ray.shutdown()
