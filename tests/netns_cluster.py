"""A real two-node Ray cluster for tests, each node in its own Linux network namespace.

Owns: creating and deleting the namespaces and the veth link between them, starting and stopping the
head and worker Ray nodes inside them, and running commands (drivers, the `galahad` CLI) inside the
head's namespace with a pass-through environment.

Why namespaces: Ray advertises the machine's interface address by default, and the test network rule
allows traffic only to loopback or to test hosts we create. Inside these namespaces the only interfaces
are `lo` and one veth end with an address in a private /24 that exists nowhere else, and there is no
default route, so nothing a Ray process does can leave them. Every Ray process (head, worker, driver)
runs inside a namespace with `--node-ip-address` set to its namespace address.

Why the fixed subnet is safe for parallel runs: each cluster gets its own pair of namespaces joined by
its own veth, so two clusters using 10.213.7.0/24 at the same time never see each other.

Process ownership: namespaces share the PID space and the filesystem with the host, so `ray stop` would
kill every Ray process on the machine (other sessions' too). `stop()` instead kills exactly the
processes that live in our namespaces (`ip netns pids`), then deletes the namespaces.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from galahad.workers.ray_env import RAY_CONNECT_ENV

NS_PREFIX = "gh-"
# Our namespace names are exactly this shape; stale-namespace reaping never touches anything else.
_NS_RE = re.compile(r"^gh-([0-9a-f]{6})-[hw]$")
SUBNET_PREFIX = "10.213.7"
HEAD_IP = f"{SUBNET_PREFIX}.1"
WORKER_IP = f"{SUBNET_PREFIX}.2"
GCS_PORT = 6379
HEAD_RESOURCE = "node_head"
WORKER_RESOURCE = "node_w1"
# Ray's minimum is 75 MB; keep the two plasma stores small because /dev/shm is shared with other tests.
DEFAULT_OBJECT_STORE_BYTES = 200 * 1024 * 1024

# Layer over `NetnsRayCluster.env` so that `ray.init(address=...)` to a dead or unreachable address raises
# ConnectionError within ~10 s. Ray's defaults retry 20 times (RAY_gcs_server_port_wait_time_s) at about 36 s
# each (connect 5 s + pubsub 5 s + cluster-id fetch py_gcs_connect_timeout_s=30 s): ~12 minutes.
# Keep gcs_rpc_server_reconnect_timeout_s above py_gcs_connect_timeout_s: when it is lower, the C++ client
# aborts the whole process ("Failed to connect to GCS within N seconds ... will terminate") instead of raising.
FAST_FAIL_ENV: dict[str, str] = RAY_CONNECT_ENV

# Env that selects a Ray cluster or auth for the *caller*; it must not leak into our nodes.
# RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (what keeps a local single-node cluster on loopback) makes
# `ray start` refuse a second node.
_STRIPPED_ENV = ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE",
                 "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")


# Run by `_wait_for_nodes` in the head's namespace: argv = address, head ip, worker ip, timeout.
_WAIT_SCRIPT = """
import json, sys, time
import ray
address, want, timeout_s = sys.argv[1], set(sys.argv[2:4]), float(sys.argv[4])
ray.init(address=address, logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + timeout_s
while True:
    ips = {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
    if ips >= want or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print(json.dumps(sorted(ips)))
"""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


@functools.cache
def available() -> tuple[bool, str]:
    """Whether network namespaces can be used here; the string says why not. Probed once per process."""
    if sys.platform != "linux":
        return False, "network namespaces need Linux"
    if os.geteuid() != 0:
        return False, "network namespaces need root"
    if shutil.which("ip") is None:
        return False, "iproute2 `ip` not found"
    if _ray_executable() is None:
        return False, "`ray` executable not found next to the interpreter or on PATH"
    # Being root is not enough inside some containers (no CAP_SYS_ADMIN): try one for real.
    probe = f"{NS_PREFIX}probe{secrets.token_hex(3)}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return False, f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return True, "ok"


def _ray_executable() -> str | None:
    # The venv's `ray` script, even when the venv is not activated (PATH may lack .venv/bin).
    beside = Path(sys.executable).parent / "ray"
    if beside.exists():
        return str(beside)
    return shutil.which("ray")


def _alive(pid: int) -> bool:
    """True while `pid` runs; a zombie counts as dead (PID 1 here reaps lazily)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the parenthesised command name, which may itself contain spaces.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _netns_pids(ns: str) -> list[int]:
    out = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in out.stdout.split() if p.isdigit()] if out.returncode == 0 else []


def _kill_netns_processes(namespaces: Sequence[str], grace_s: float = 3.0) -> None:
    """SIGTERM everything in `namespaces`, then SIGKILL what is left after `grace_s`.

    gcs_server ignores SIGTERM for well over 20 s here, so the SIGKILL step is the normal path for it.
    """
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        pids = [p for ns in namespaces for p in _netns_pids(ns)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)


def _existing_namespaces() -> list[str]:
    out = _ip("netns", "list", check=False)
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


def reap_stale() -> list[str]:
    """Delete `gh-` namespaces left by a run that died without `stop()` (e.g. SIGKILLed pytest).

    A namespace counts as stale only when its owner file names a process that is gone, so a cluster
    that another live session is using is never touched.
    """
    reaped: list[str] = []
    for ns in _existing_namespaces():
        m = _NS_RE.match(ns)
        if not m:
            continue
        owner_file = Path(tempfile.gettempdir()) / f"{NS_PREFIX}{m.group(1)}" / "owner.pid"
        try:
            owner = int(owner_file.read_text())
        except (OSError, ValueError):
            continue
        if _alive(owner):
            continue
        _kill_netns_processes([ns])
        _ip("netns", "del", ns, check=False)
        shutil.rmtree(owner_file.parent, ignore_errors=True)
        reaped.append(ns)
    return reaped


class NetnsRayCluster:
    """Head node in namespace `gh-XXXXXX-h` (10.213.7.1), one worker in `gh-XXXXXX-w` (10.213.7.2).

    Use as a context manager, or call `start()` and then `stop()` (which is idempotent and also runs at
    interpreter exit if forgotten). The head carries the custom resource `node_head`, the worker
    `node_w1`, so tests can pin actors to a node with `resources={"node_w1": 1}`.
    """

    def __init__(self, base_env: Mapping[str, str] | None = None) -> None:
        """`base_env`: the environment `run()` builds on; default is `os.environ` as it is at each call."""
        self.id = secrets.token_hex(3)
        self.head_ns = f"{NS_PREFIX}{self.id}-h"
        self.worker_ns = f"{NS_PREFIX}{self.id}-w"
        # Interface names are capped at 15 characters; these are 11.
        self._head_if = f"{NS_PREFIX}{self.id}-a"
        self._worker_if = f"{NS_PREFIX}{self.id}-b"
        self.head_ip = HEAD_IP
        self.worker_ip = WORKER_IP
        self.address = f"{HEAD_IP}:{GCS_PORT}"
        # Short path: Ray puts unix sockets under the temp dir, and those are limited to 107 bytes.
        self.temp_root = Path(tempfile.gettempdir()) / f"{NS_PREFIX}{self.id}"
        self.ray_temp_dir = self.temp_root / "ray"
        # Our own token file keeps the shared ~/.ray/auth_token (used by other sessions) untouched.
        self.auth_token_path = self.temp_root / "auth_token"
        self._base_env = None if base_env is None else dict(base_env)
        self._node_extra_env: dict[str, str] = {}
        self._started = False
        self._stopped = False
        self._owns_temp_root = False

    # --- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> NetnsRayCluster:
        if not self._started:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(
        self,
        head_cpus: int = 1,
        worker_cpus: int = 1,
        worker_resources: Mapping[str, float] | None = None,
        head_resources: Mapping[str, float] | None = None,
        object_store_bytes: int = DEFAULT_OBJECT_STORE_BYTES,
        include_dashboard: bool = False,
        node_env: Mapping[str, str] | None = None,
        timeout_s: float = 90.0,
    ) -> NetnsRayCluster:
        """Create the namespaces, start both nodes and wait until the GCS reports both alive.

        The Ray nodes, and so every task and actor on them, inherit `self.env` as it is now plus
        `node_env`; later changes reach drivers started with `run()` but not the nodes' workers (use a
        `runtime_env={"env_vars": ...}` for those).
        """
        if self._started:
            raise RuntimeError("NetnsRayCluster.start() called twice")
        ray = _ray_executable()
        if ray is None:
            raise RuntimeError("`ray` executable not found")
        self._started = True
        self._node_extra_env = dict(node_env or {})
        # Registered before anything is created, so a crash half-way still cleans up at exit.
        atexit.register(self.stop)
        try:
            reap_stale()
            self.temp_root.mkdir(parents=True, exist_ok=False)
            self._owns_temp_root = True
            (self.temp_root / "owner.pid").write_text(str(os.getpid()))
            self.auth_token_path.write_text(secrets.token_hex(32))
            self.auth_token_path.chmod(0o600)
            self._make_network()
            common = [
                f"--temp-dir={self.ray_temp_dir}",
                "--disable-usage-stats",
                "--num-gpus=0",
                f"--object-store-memory={object_store_bytes}",
            ]
            head_res = {HEAD_RESOURCE: 1, **(head_resources or {})}
            worker_res = {WORKER_RESOURCE: 1, **(worker_resources or {})}
            head_cmd = [
                ray, "start", "--head",
                f"--node-ip-address={self.head_ip}",
                f"--port={GCS_PORT}",
                f"--num-cpus={head_cpus}",
                f"--resources={json.dumps(head_res)}",
                f"--include-dashboard={'true' if include_dashboard else 'false'}",
                *common,
            ]  # fmt: skip
            worker_cmd = [
                ray, "start",
                f"--address={self.address}",
                f"--node-ip-address={self.worker_ip}",
                f"--num-cpus={worker_cpus}",
                f"--resources={json.dumps(worker_res)}",
                *common,
            ]  # fmt: skip
            # One after the other: a worker started before the head's GCS listens only gets ~20 one-second
            # retries, which a loaded machine can exhaust; in parallel it saved nothing measurable here.
            self._ray_start(self.head_ns, head_cmd, timeout_s)
            self._ray_start(self.worker_ns, worker_cmd, timeout_s)
            self._wait_for_nodes(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kill every process in both namespaces, delete them (and the veth pair) and the temp dir."""
        if self._stopped or not self._started:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        # Both namespaces in one sweep, so no Ray process spends the grace period reconnecting to a peer.
        _kill_netns_processes([self.worker_ns, self.head_ns])
        for ns in (self.worker_ns, self.head_ns):
            # Deleting a namespace destroys the veth end inside it, and with it the peer.
            _ip("netns", "del", ns, check=False)
        if self._owns_temp_root:
            shutil.rmtree(self.temp_root, ignore_errors=True)

    # --- running commands ------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """Environment for drivers: the caller's env, venv first on PATH, our auth token, RAY_ADDRESS."""
        base = os.environ if self._base_env is None else self._base_env
        env = {k: v for k, v in base.items() if k not in _STRIPPED_ENV}
        venv_bin = str(Path(sys.executable).parent)
        path = env.get("PATH", os.defpath)
        if venv_bin not in path.split(os.pathsep):
            path = os.pathsep.join([venv_bin, path])
        env.update(
            PATH=path,
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN_PATH=str(self.auth_token_path),
            RAY_USAGE_STATS_ENABLED="0",
            RAY_ADDRESS=self.address,
        )
        return env

    def run(
        self,
        cmd: Sequence[str],
        env: Mapping[str, str] | None = None,
        timeout: float = 120.0,
        node: str = "head",
        cwd: str | os.PathLike[str] | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run `cmd` inside the head's (or with node="worker", the worker's) namespace.

        `env` is layered over `self.env`. On timeout the whole process group is killed and
        `subprocess.TimeoutExpired` is raised, so a hung driver never outlives the call.
        """
        ns = {"head": self.head_ns, "worker": self.worker_ns}[node]
        full_env = {**self.env, **(env or {})}
        return self._exec(ns, list(cmd), full_env, timeout, cwd=cwd, input=input)

    # --- internals -------------------------------------------------------------------------------

    def _exec(
        self,
        ns: str,
        cmd: list[str],
        env: Mapping[str, str],
        timeout: float,
        cwd: str | os.PathLike[str] | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return self._wait(self._spawn(ns, cmd, env, cwd=cwd, has_input=input is not None), timeout, input)

    @staticmethod
    def _spawn(
        ns: str,
        cmd: list[str],
        env: Mapping[str, str],
        cwd: str | os.PathLike[str] | None = None,
        has_input: bool = False,
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["ip", "netns", "exec", ns, *cmd],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.PIPE if has_input else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # own process group: a timeout kills its children too
        )

    @staticmethod
    def _wait(
        proc: subprocess.Popen[str], timeout: float, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(proc.args, timeout, output=out, stderr=err) from None
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def _make_network(self) -> None:
        _ip("netns", "add", self.head_ns)
        _ip("netns", "add", self.worker_ns)
        # Both veth ends are born inside their namespaces: nothing ever appears in the host's netns.
        _ip(
            "link", "add", self._head_if, "netns", self.head_ns,
            "type", "veth", "peer", "name", self._worker_if, "netns", self.worker_ns,
        )  # fmt: skip
        for ns, ifname, ip in (
            (self.head_ns, self._head_if, self.head_ip),
            (self.worker_ns, self._worker_if, self.worker_ip),
        ):
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", ifname)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", ifname, "up")

    def _node_env(self) -> dict[str, str]:
        env = self.env
        env.pop("RAY_ADDRESS")  # `ray start` takes the address on its command line
        env.update(self._node_extra_env)
        return env

    def _ray_start(self, ns: str, cmd: list[str], timeout_s: float) -> None:
        done = self._exec(ns, cmd, self._node_env(), timeout_s)
        if done.returncode != 0:
            raise RuntimeError(
                f"`ray start` in {ns} failed (rc={done.returncode}):\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}{self._log_tail()}"
            )

    def _wait_for_nodes(self, timeout_s: float) -> None:
        # A driver in the head's namespace asks the GCS; `ray status` lags behind the autoscaler monitor.
        done = self.run(
            [sys.executable, "-c", _WAIT_SCRIPT, self.address, self.head_ip, self.worker_ip, str(timeout_s)],
            timeout=timeout_s + 30,
        )
        lines = done.stdout.strip().splitlines()
        alive = json.loads(lines[-1]) if done.returncode == 0 and lines else None
        if alive != sorted([self.head_ip, self.worker_ip]):
            raise RuntimeError(
                f"cluster did not come up with both nodes (alive={alive}, rc={done.returncode}):\n"
                f"{done.stderr[-3000:]}{self._log_tail()}"
            )

    def _log_tail(self, lines: int = 20) -> str:
        """The ends of the Ray error logs, for start-up failures (the temp dir is deleted by stop())."""
        logs = self.ray_temp_dir / "session_latest" / "logs"
        parts: list[str] = []
        for name in ("gcs_server.err", "gcs_server.out", "raylet.err", "raylet.out"):
            path = logs / name
            if path.is_file():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {name} ---\n" + "\n".join(tail))
        return ("\n" + "\n".join(parts)) if parts else ""
