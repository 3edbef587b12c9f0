"""A small pool of verifier worker processes, with a hard per-request deadline.

Processes, not `signal.alarm`: an alarm works only in the main thread (not in threaded or async Ray
actors), and a hung C-level sympy call ignores it. A worker that misses its deadline is killed and replaced
by a fresh fork of the warm zygote (`worker`), ready in milliseconds. Works from any thread: each request
holds one worker, idle workers wait in a queue.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import socket
import subprocess
import sys
import threading
import time
import weakref

from galahad.verifier.worker import MEMORY_LIMIT_ENV


def _read_until(fd: int, buffer: bytearray, deadline: float) -> bytes | None:
    """One line from `fd` (None when the deadline passes first); EOFError when the writer is gone."""
    while b"\n" not in buffer:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        readable, _, _ = select.select([fd], [], [], left)
        if readable:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError("verifier worker exited")
            buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line


class _Worker:
    """One forked child: its pid and our ends of its stdin and stdout pipes."""

    def __init__(self, pid: int, stdin_fd: int, stdout_fd: int):
        self.pid, self.stdin_fd, self.stdout_fd = pid, stdin_fd, stdout_fd
        self.buffer = bytearray()
        self.ready = False

    def send(self, request: dict) -> None:
        data = json.dumps(request).encode() + b"\n"
        while data:
            data = data[os.write(self.stdin_fd, data):]

    def close(self) -> None:
        for fd in (self.stdin_fd, self.stdout_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


class _Zygote:
    """The warm process that forks workers; all its traffic is short request/reply over one socket."""

    def __init__(self, memory_mb: int, timeout_s: float):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "galahad.verifier.worker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=dict(os.environ, **{MEMORY_LIMIT_ENV: str(memory_mb)}),
            start_new_session=True,  # a Ctrl-C in the caller's terminal is the caller's, not ours
        )
        theirs.close()
        self.sock = ours
        self.timeout_s = timeout_s
        self.lock = threading.Lock()
        self.ready = False

    def _ask(self, message: bytes, fds: list[int] | None = None) -> bytes:
        with self.lock:
            self.sock.settimeout(self.timeout_s)
            if not self.ready:
                self.ready = self.sock.recv(64) == b"ready"
                if not self.ready:
                    raise OSError("verifier zygote did not start")
            if fds:
                socket.send_fds(self.sock, [message], fds)
            else:
                self.sock.send(message)
            reply = self.sock.recv(64)
        if not reply or reply == b"error":
            raise OSError(f"verifier zygote refused {message!r}")
        return reply

    def fork(self) -> _Worker:
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            pid = int(self._ask(b"fork", [in_r, out_w]))
        except (OSError, ValueError):
            for fd in (in_w, out_r):
                os.close(fd)
            raise OSError("verifier zygote cannot fork") from None
        finally:
            os.close(in_r)
            os.close(out_w)
        return _Worker(pid, in_w, out_r)

    def kill(self, w: _Worker) -> None:
        try:
            self._ask(b"kill %d" % w.pid)
        except OSError:
            pass  # the zygote is gone, and with it (by their watchdog) its children
        w.close()

    def close(self) -> None:
        self.sock.close()  # the zygote kills its children and exits on EOF
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _shutdown(state: dict) -> None:
    zygote = state.pop("zygote", None)
    if zygote is not None:
        zygote.close()


class WorkerPool:
    """Up to `size` workers, forked on first use from one zygote (itself started on first use)."""

    def __init__(self, size: int = 1, start_timeout_s: float = 60.0, memory_mb: int = 3072):
        self.size = max(1, size)
        self.start_timeout_s = start_timeout_s
        self.memory_mb = memory_mb
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._active = 0
        self._state: dict = {}  # {"zygote": _Zygote}, shared with the finalizer
        self._lock = threading.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, _shutdown, self._state)
        self._pid = os.getpid()

    def _forget_parent(self) -> None:
        """In a forked copy of the caller, the zygote and workers belong to the parent: leave them be."""
        self._finalizer.detach()
        self._idle, self._active, self._state = queue.Queue(), 0, {}
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _shutdown, self._state)
        self._pid = os.getpid()

    def _zygote(self) -> _Zygote:
        with self._lock:
            z = self._state.get("zygote")
            if z is None or z.proc.poll() is not None:
                if z is not None:
                    z.close()
                z = self._state["zygote"] = _Zygote(self.memory_mb, self.start_timeout_s)
            return z

    def _spawn(self) -> _Worker:
        try:
            return self._zygote().fork()
        except OSError:
            return self._zygote().fork()  # once more, in case the zygote had just died

    def _retire(self, w: _Worker) -> None:
        z = self._state.get("zygote")
        if z is not None:
            z.kill(w)
        else:
            w.close()

    def _acquire(self) -> _Worker | None:
        with contextlib.suppress(queue.Empty):
            return self._idle.get_nowait()
        with self._lock:
            grow = self._active < self.size
            if grow:
                self._active += 1
        if grow:
            try:
                return self._spawn()
            except OSError:
                with self._lock:
                    self._active -= 1
                raise
        try:
            return self._idle.get(timeout=self.start_timeout_s)
        except queue.Empty:
            return None

    def _release(self, w: _Worker) -> None:
        if self._closed:
            self._retire(w)
        else:
            self._idle.put(w)

    def _replace(self, w: _Worker) -> None:
        self._retire(w)
        if self._closed:
            return
        try:
            self._idle.put(self._spawn())  # at once: another caller may be waiting for any worker
        except OSError:
            with self._lock:
                self._active -= 1  # `_acquire` tries again when next needed

    def warm(self) -> None:
        """Start the zygote and every worker now (about two seconds), so that no check waits later."""
        taken = [w for w in (self._acquire() for _ in range(self.size)) if w is not None]
        for w in taken:
            if self._ensure_ready(w):
                self._release(w)
            else:
                self._replace(w)

    def _ensure_ready(self, w: _Worker) -> bool:
        if not w.ready:
            try:
                line = _read_until(w.stdout_fd, w.buffer, time.monotonic() + self.start_timeout_s)
            except (EOFError, OSError):
                return False
            w.ready = line is not None and b"ready" in line
        return w.ready

    def call(self, request: dict, timeout_s: float) -> dict:
        """The worker's reply to `request`, or {"ok": False, "reason": ...} for a timeout or a crash."""
        if self._closed:
            return {"ok": False, "reason": "error: verifier closed"}
        if self._pid != os.getpid():
            self._forget_parent()
        try:
            w = self._acquire()
        except OSError:
            return {"ok": False, "reason": "error: cannot start a verifier worker"}
        if w is None:
            return {"ok": False, "reason": "error: no verifier worker free"}
        try:
            if not self._ensure_ready(w):
                self._replace(w)
                return {"ok": False, "reason": "error: verifier worker did not start"}
            w.send(request)
            line = _read_until(w.stdout_fd, w.buffer, time.monotonic() + timeout_s)
            if line is None:
                self._replace(w)
                return {"ok": False, "reason": "timeout"}
            reply = json.loads(line)
        except (EOFError, OSError, ValueError):
            self._replace(w)
            return {"ok": False, "reason": "error: verifier worker crashed"}
        except BaseException:  # interrupted mid-request: the worker's state is unknown
            self._replace(w)
            raise
        self._release(w)
        return reply

    def pids(self) -> list[int]:
        """Process ids of the zygote and of the idle workers."""
        z = self._state.get("zygote")
        idle = list(self._idle.queue)
        return ([z.proc.pid] if z is not None else []) + [w.pid for w in idle]

    def close(self) -> None:
        """Kill the zygote and every worker; callers mid-check get an error verdict."""
        self._closed = True
        self._finalizer()
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                break
