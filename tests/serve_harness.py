"""Test infrastructure for the service: a real `galahad serve` subprocess on a free loopback port, and a
catalog seeded with a verified, deposited solution (the state a learner leaves behind)."""

from __future__ import annotations

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
            time.sleep(1)
        raise AssertionError(f"serve not ready after {timeout} s: {self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        return (self.data.parent / f"serve-{self.port}.log").read_bytes()[-3000:].decode("utf-8", "replace")

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout: float = 120) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        self.log.close()
        return self.proc.returncode


def seed_solution(data: Path, model: str, model_cache: Path, text: str, answer: str,
                  template: str = "seed", topic: str = "arith") -> str:
    """A verified, deposited solution in DATA's catalog and store, as the learner deposits one; its artifact id."""
    from galahad.flywheel.catalog import problem_hash
    from galahad.flywheel.learn.deposit import LocalDepositor
    from galahad.verifier.verifier import Verifier
    from galahad.workers.runtime import DEFAULT_RUNTIME

    data.mkdir(parents=True, exist_ok=True)
    dep = LocalDepositor(model, model_cache, DEFAULT_RUNTIME, f"sqlite:///{data / 'catalog.sqlite3'}", data / "store")
    cat = dep.catalog
    cat.add_problem(text, answer, "test", topic, template)
    pid = problem_hash(text)
    attempt = cat.add_attempt(pid, None, dep.engine.model_fingerprint, {}, f" {answer}", 1, 0.0, 0.0)
    verdict = Verifier().check_answer(answer, answer)
    vid = cat.add_verification(attempt, verdict.version, verdict.verified, verdict.reason)
    cat.mark(pid, "verified")
    dep.deposit({"id": pid, "text": text, "answer": answer, "template": template, "topic": topic}, answer, vid)
    art = cat.verified_solution(pid)["artifact_id"]
    cat.close()
    return art
