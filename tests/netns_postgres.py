"""A private PostgreSQL server inside a test network namespace: the catalog several netns nodes share.

The machine's own PostgreSQL listens on the host's loopback, which a process inside a namespace cannot
reach (its loopback is its own). `NetnsPostgres(ns, ip)` runs the installed server binaries (`initdb`,
`postgres`, as the `postgres` user) in a fresh temp cluster, bound to the namespace's address only, with
trust auth, fsync off (a test database), and its unix socket in its own folder. `stop()` (also at exit)
sends a fast shutdown, then SIGKILL to its process group, and deletes the folder: nothing is left.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

PORT = 5432  # the namespace's own port space: free
START_TIMEOUT_S = 60.0


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or ([shutil.which(name)] if shutil.which(name) else [])
    if not found:
        raise RuntimeError(f"PostgreSQL's `{name}` not found (apt-get install postgresql)")
    return found[-1]


class NetnsPostgres:
    def __init__(self, netns: str, ip: str):
        self.netns, self.ip = netns, ip
        self.root = Path(tempfile.mkdtemp(prefix="gh-pg-"))
        self.proc: subprocess.Popen | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@{self.ip}:{PORT}/{database}"

    def _as_postgres(self, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, "setpriv", "--reuid=postgres", "--regid=postgres",
                "--init-groups", *cmd]

    def start(self) -> NetnsPostgres:
        atexit.register(self.stop)
        user = pwd.getpwnam("postgres")
        os.chown(self.root, user.pw_uid, user.pw_gid)
        data = self.root / "data"
        subprocess.run(self._as_postgres([_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                                          "--no-sync"]), check=True, capture_output=True, timeout=120)
        with open(data / "pg_hba.conf", "a") as hba:  # initdb trusts local sockets only: the nodes' subnet too
            hba.write(f"host all all {self.ip.rsplit('.', 1)[0]}.0/24 trust\n")
        log = open(self.root / "postgres.log", "ab")
        self.proc = subprocess.Popen(
            self._as_postgres([_bin("postgres"), "-D", str(data), "-p", str(PORT), "-k", str(self.root),
                               "-c", f"listen_addresses={self.ip}", "-c", "fsync=off", "-c", "max_connections=200"]),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while subprocess.run(["ip", "netns", "exec", self.netns, _bin("pg_isready"), "-h", self.ip, "-p", str(PORT)],
                             capture_output=True, timeout=30).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.root / "postgres.log").read_text(errors="replace")[-1500:]
                self.stop()
                raise RuntimeError(f"PostgreSQL in {self.netns} did not start: {tail}")
            time.sleep(0.3)
        return self

    def stop(self) -> None:
        atexit.unregister(self.stop)
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGINT)  # fast shutdown: clients are disconnected
                proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> NetnsPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
