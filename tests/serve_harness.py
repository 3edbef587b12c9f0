"""Test infrastructure for the service: a real `galahad serve` subprocess on a free loopback port, and a
catalog seeded with a verified, deposited solution (the state a learner leaves behind)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

GALAHAD = [sys.executable, "-m", "galahad.flywheel.cli.main"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`galahad --data DATA serve --port P ARGS` in its own session (kill -9 takes its Ray cluster with it)."""

    def __init__(self, data: Path, args: list[str], env: dict, token: str | None = None):
        self.data, self.port, self.token = data, free_port(), token
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(data.parent / f"serve-{self.port}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([*GALAHAD, "--data", str(data), "serve", "--port", str(self.port), *args],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def request(self, method: str, path: str, body: bytes | None = None, token: str | None = "default",
                headers: dict | None = None) -> tuple[int, dict, bytes]:
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        token = self.token if token == "default" else token
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(self, method: str, path: str, obj=None, **kw) -> tuple[int, object]:
        body = None if obj is None else json.dumps(obj).encode()
        status, _, raw = self.request(method, path, body, **kw)
        return status, json.loads(raw)

    def metrics(self) -> dict[str, float]:
        """`GET /metrics` as {sample: value}: `name` for a sample without labels, `name{labels}` for one with."""
        out = {}
        for line in self.request("GET", "/metrics")[2].decode().splitlines():
            if line and not line.startswith("#"):
                sample, _, value = line.rpartition(" ")
                out[sample] = float(value)
        return out

    def wait_ready(self, timeout: float = 400) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited {self.proc.returncode}: {self.tail()}")
            try:
                if self.request("GET", "/readyz")[0] == 200:
                    return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.25)  # a poll costs a refused connect or one small request
        raise AssertionError(f"serve not ready after {timeout} s: {self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        return (self.data.parent / f"serve-{self.port}.log").read_bytes()[-3000:].decode("utf-8", "replace")

    def session(self) -> list[int]:
        """Every live process of the server's session: the driver and the whole Ray cluster it started (Ray's
        processes take their own process groups, not their own sessions)."""
        return session_pids(self.proc.pid)

    def reap(self) -> None:
        """SIGKILL, by PID, whatever of the server's session is left (actors outlive a killed driver)."""
        for pid in session_pids(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.reap()

    def stop(self, timeout: float = 120) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        self.reap()
        self.log.close()
        return self.proc.returncode


def session_pids(sid: int) -> list[int]:
    """PIDs of the live processes whose session id is `sid` (from /proc/<pid>/stat)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "(comm)": state ppid pgrp session ...
        if fields[0] != "Z" and int(fields[3]) == sid:
            out.append(int(entry.name))
    return sorted(out)


def listening_tcp(pids: list[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of every listening TCP socket (IPv4 and IPv6) the processes `pids` hold, read from
    /proc/net/tcp{,6} and each process's /proc/<pid>/fd. IPv4-mapped IPv6 addresses as `::ffff:127.0.0.1`."""
    import ipaddress

    listening = {}  # socket inode -> (address, port)
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != "0A":  # TCP_LISTEN
                continue
            hex_addr, hex_port = cols[1].split(":")
            raw = bytes.fromhex(hex_addr)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            addr = ipaddress.ip_address(raw)
            mapped = getattr(addr, "ipv4_mapped", None)
            listening[cols[9]] = (f"::ffff:{mapped}" if mapped else str(addr), int(hex_port, 16))
    out = []
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in listening:
                out.append((pid, *listening[target[8:-1]]))
    return sorted(set(out))


def seed_solution(data: Path, model: str, model_cache: Path, text: str, answer: str,
                  template: str = "seed", topic: str = "arith", catalog_url: str | None = None) -> str:
    """A verified, deposited solution in DATA's catalog (or `catalog_url`'s) and store, as the learner deposits
    one; its artifact id."""
    return seed_solutions(data, model, model_cache, [(text, answer, template, topic)], catalog_url=catalog_url)[0]


def seed_solutions(data: Path, model: str, model_cache: Path, items: list[tuple[str, str, str, str]],
                   runtime=None, catalog_url: str | None = None) -> list[str]:
    """`seed_solution` for several (text, answer, template, topic), by one depositor (the model loaded once)
    under `runtime` (default: `DEFAULT_RUNTIME`, the stock kernel mode); their artifact ids."""
    from local_depositor import LocalDepositor

    from galahad.flywheel.catalog import problem_hash
    from galahad.flywheel.memory.foreign import record_runtime
    from galahad.verifier.verifier import Verifier
    from galahad.workers.runtime import DEFAULT_RUNTIME

    data.mkdir(parents=True, exist_ok=True)
    dep = LocalDepositor(model, model_cache, runtime or DEFAULT_RUNTIME,
                         catalog_url or f"sqlite:///{data / 'catalog.sqlite3'}", data / "store")
    cat, arts = dep.catalog, []
    for text, answer, template, topic in items:
        cat.problems.add(text, answer, "test", topic, template)
        pid = problem_hash(text)
        attempt = cat.runs.add_attempt(pid, None, dep.engine.model_fingerprint, {}, f" {answer}", 1, 0.0, 0.0)
        verdict = Verifier().check_answer(answer, answer)
        vid = cat.runs.add_verification(attempt, verdict.version, verdict.verified, verdict.reason)
        cat.queue.mark(pid, "verified")
        dep.deposit({"id": pid, "text": text, "answer": answer, "template": template, "topic": topic}, answer, vid)
        record_runtime(cat, dep.engine)  # as the learning job records its depositor's runtime
        arts.append(cat.runs.verified_solution(pid)["artifact_id"])
    cat.close()
    return arts


def serve_env(model_cache: Path) -> dict:
    """The environment a test's server runs in: this one's, the test's model cache, no ambient API token."""
    base = {k: v for k, v in os.environ.items() if k != "GALAHAD_API_TOKEN"}
    return {**base, "GALAHAD_MODEL_CACHE": str(model_cache)}


@contextlib.contextmanager
def serving(data: Path, args: list[str], env: dict, token: str | None = None):
    """A ready `Served` for the block, stopped after it (a non-zero exit fails the test, with the log)."""
    server = Served(data, args, {**env, "GALAHAD_API_TOKEN": token} if token else env, token=token)
    try:
        server.wait_ready()
        yield server
    finally:
        assert server.stop() == 0, server.tail()
