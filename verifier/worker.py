"""The worker side: a warm "zygote" process that forks one child per worker the pool asks for.

`python -m galahad.verifier.worker FD` imports sympy and math-verify, warms the LaTeX parser, says "ready"
on the Unix socket FD, then serves "fork" (a child with the given stdin/stdout pipes) and "kill PID" (kill
and reap one: only its own children, so a pid is never reused behind the pool's back). Children answer
JSON lines and own everything that can hang. The zygote exits on EOF from its socket, a child when the
zygote is gone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time

MEMORY_LIMIT_ENV = "GALAHAD_VERIFIER_MEMORY_MB"


def _cap_memory() -> None:
    try:
        import resource

        mb = int(os.environ.get(MEMORY_LIMIT_ENV, "3072"))
        resource.setrlimit(resource.RLIMIT_AS, (mb * 1024 * 1024, mb * 1024 * 1024))
    except (ImportError, ValueError, OSError):
        pass  # not every platform lets a process cap itself; the pool's timeout still holds


def _exit_with_parent() -> None:
    # Polling the parent pid, not PR_SET_PDEATHSIG: that signal follows the parent *thread*.
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def serve(stdin, stdout) -> None:
    """Answer {"gold", "answer"} requests, one JSON line each, until stdin closes."""
    from galahad.verifier.equivalence import equivalent  # deferred: sympy loads after the memory cap

    stdout.write(b'{"ready": true}\n')
    stdout.flush()
    for line in stdin:
        try:
            req = json.loads(line)
            ok, reason = equivalent(str(req["gold"]), str(req["answer"]))
            reply = {"ok": bool(ok), "reason": reason}
        except MemoryError:
            reply = {"ok": False, "reason": "too large: out of memory"}
        except RecursionError:
            reply = {"ok": False, "reason": "too large: recursion"}
        except Exception as exc:  # a verdict, never a crash: the next request must still be served
            reply = {"ok": False, "reason": f"error: {type(exc).__name__}"}
        stdout.write(json.dumps(reply).encode() + b"\n")
        stdout.flush()


def _child(sock: socket.socket, stdin_fd: int, stdout_fd: int) -> None:
    try:
        sock.close()
        _exit_with_parent()
        with os.fdopen(stdin_fd, "rb") as stdin, os.fdopen(stdout_fd, "wb") as stdout:
            serve(stdin, stdout)
    finally:
        os._exit(0)


def zygote(fd: int) -> None:
    """Warm up once, then fork ready workers on request until the pool's end of `fd` closes."""
    from galahad.verifier.equivalence import warm_up  # deferred: sympy loads after the memory cap

    sock = socket.socket(fileno=fd)
    warm_up()
    sock.send(b"ready")
    children: set[int] = set()
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64, 2)
        except OSError:
            break
        if not msg:
            break
        reply = b"error"
        if msg == b"fork" and len(fds) == 2:
            pid = os.fork()
            if pid == 0:
                _child(sock, fds[0], fds[1])
            children.add(pid)
            reply = str(pid).encode()
        elif msg.startswith(b"kill ") and msg[5:].isdigit() and int(msg[5:]) in children:
            pid = int(msg[5:])
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            children.discard(pid)
            reply = b"ok"
        for f in fds:
            os.close(f)
        while children:  # reap crashed children; a reaped pid is dropped, so it is never killed later
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
        sock.send(reply)
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def main() -> None:
    _cap_memory()
    logging.disable(logging.CRITICAL)
    sys.setrecursionlimit(5000)
    zygote(int(sys.argv[1]))


if __name__ == "__main__":
    main()
