"""Tests for the two-namespace Ray cluster harness (`netns_cluster`).

Proves the cluster is real (two raylets, two addresses, actors pinned to each), that no socket in it
touches anything but loopback or the namespace addresses, that a driver pointed at an unreachable
address fails fast when asked to, and that `stop()` leaves no namespace, process or temp dir behind.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from netns_cluster import (
    FAST_FAIL_ENV,
    HEAD_RESOURCE,
    WORKER_RESOURCE,
    NetnsRayCluster,
    available,
)

pytestmark = pytest.mark.slow  # real 2-node Ray clusters in network namespaces


@pytest.fixture(autouse=True)
def _netns_available(require) -> None:
    ok, why = available()
    require(ok, f"netns unavailable: {why}")  # a skip here, a failure under CI=true


PLACEMENT_DRIVER = f"""
import json, os
import ray

ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR", log_to_driver=False)


@ray.remote(num_cpus=0)
class Where:
    def where(self):
        ctx = ray.get_runtime_context()
        # A Ray worker's parent is the raylet of the node it runs on.
        return {{"ip": ray.util.get_node_ip_address(), "pid": os.getpid(), "ppid": os.getppid(),
                 "node_id": ctx.get_node_id(), "netns_inode": os.stat("/proc/self/ns/net").st_ino}}


pinned = {{"head": Where.options(resources={{"{HEAD_RESOURCE}": 1}}).remote(),
          "worker": Where.options(resources={{"{WORKER_RESOURCE}": 1}}).remote()}}
out = {{name: ray.get(a.where.remote(), timeout=60) for name, a in pinned.items()}}
out["nodes"] = sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])
out["driver_ip"] = ray.util.get_node_ip_address()
print("RESULT " + json.dumps(out))
"""


def _result(done: subprocess.CompletedProcess[str]) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def _netns_of(pid: int) -> str:
    return subprocess.run(
        ["ip", "netns", "identify", str(pid)], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_actors_land_on_two_real_nodes(netns_ray_cluster: NetnsRayCluster) -> None:
    c = netns_ray_cluster
    res = _result(c.run([sys.executable, "-c", PLACEMENT_DRIVER], timeout=90))
    assert res["nodes"] == sorted([c.head_ip, c.worker_ip])
    assert res["driver_ip"] == c.head_ip
    head, worker = res["head"], res["worker"]
    assert (head["ip"], worker["ip"]) == (c.head_ip, c.worker_ip)
    assert head["node_id"] != worker["node_id"]
    # Two distinct raylet processes, each living in its own namespace, each parenting its actor.
    assert head["ppid"] != worker["ppid"]
    for actor, ns in ((head, c.head_ns), (worker, c.worker_ns)):
        assert Path(f"/proc/{actor['ppid']}/comm").read_text().strip() == "raylet"
        # The actor is gone once the driver exits, so it reported its namespace itself.
        assert actor["netns_inode"] == os.stat(f"/run/netns/{ns}").st_ino
        assert _netns_of(actor["ppid"]) == ns


def test_sockets_stay_on_loopback_and_namespace_addresses(netns_ray_cluster: NetnsRayCluster) -> None:
    c = netns_ray_cluster
    allowed = {ipaddress.ip_address(c.head_ip), ipaddress.ip_address(c.worker_ip)}
    for node in ("head", "worker"):
        # No default route: nothing outside 10.213.7.0/24 and loopback is even reachable.
        routes = c.run(["ip", "route", "show"], node=node).stdout
        assert "default" not in routes, routes
        sockets = c.run(["ss", "-tuanH"], node=node).stdout.splitlines()
        assert sockets, f"no sockets in the {node} namespace"
        for line in sockets:
            for endpoint in line.split()[4:6]:
                host = endpoint.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")
                if host in ("*", "0.0.0.0", "::"):  # a listener's wildcard or an unconnected peer
                    continue
                ip = ipaddress.ip_address(host.split("%")[0])
                assert ip.is_loopback or ip in allowed, f"{node}: {line}"


def test_ray_status_sees_both_nodes(netns_ray_cluster: NetnsRayCluster) -> None:
    status = netns_ray_cluster.run(["ray", "status", "-v"], timeout=60)
    assert status.returncode == 0, status.stderr[-2000:]
    active = status.stdout.split("Active:", 1)[1].split("Pending:", 1)[0]
    assert len([x for x in active.splitlines() if x.strip().startswith("1 node_")]) == 2, status.stdout


def test_unreachable_address_fails_fast(netns_ray_cluster: NetnsRayCluster) -> None:
    script = (
        "import ray\n"
        "try:\n"
        "    ray.init(address='10.213.7.99:6379')\n"
        "except ConnectionError as e:\n"
        "    print('CONNECTION_ERROR', e)\n"
    )
    # Decided by the event, not the clock: the driver gave up with a ConnectionError (FAST_FAIL_ENV bounds
    # its retries) instead of retrying forever; the run's timeout is only a hang guard.
    done = netns_ray_cluster.run([sys.executable, "-c", script], env=FAST_FAIL_ENV, timeout=120)
    assert "CONNECTION_ERROR Failed to connect to Ray cluster at 10.213.7.99:6379" in done.stdout, (
        done.stdout + done.stderr[-2000:]
    )


def test_stop_leaves_nothing_behind() -> None:
    # Its own cluster: the session fixture's must outlive this module.
    cluster = NetnsRayCluster()
    with cluster.start():
        pids = [
            pid
            for ns in (cluster.head_ns, cluster.worker_ns)
            for pid in subprocess.run(
                ["ip", "netns", "pids", ns], capture_output=True, text=True
            ).stdout.split()
        ]
        assert len(pids) >= 4
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert cluster.head_ns not in names and cluster.worker_ns not in names
    assert not cluster.temp_root.exists()
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", pid
