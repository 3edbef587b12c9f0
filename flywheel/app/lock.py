"""The data dir's run lock: one local learning job per data dir, the one implementation.

Holding it proves no other local job owns the embedded catalog's claims, so the holder may return them to
the queue. `galahad run` holds it for the run; `galahad serve` checks it and its learner actor holds it for
its life. The lock file is opened with `O_NOFOLLOW`, created if missing, never truncated, and must be a
regular file; the lock is an `flock`, released when the file is closed or the process dies.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from pathlib import Path

from galahad.flywheel.errors import GalahadError

LOCK_FILE = "run.lock"
POLL_SECONDS = 0.2
BUSY = "another `galahad run` is using {root}"
LEARNING = "another `galahad run` or `serve` is learning in {root}"


def lock_path(root: Path) -> Path:
    return Path(root) / LOCK_FILE


class RunLock:
    """The run lock of the data dir `root`. `acquire()` returns it held; use it in a `with` block, or keep
    the object alive as long as the lock must be held (closing or collecting it releases the lock)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.path = lock_path(self.root)
        self._file = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def acquire(self, wait_seconds: float = 0.0, busy: str = BUSY) -> RunLock:
        """Take the lock, waiting up to `wait_seconds` for its holder; then fail closed with `busy`
        (formatted with `root`). A lock path that is a symlink or not a regular file is refused."""
        if self._file is not None:
            raise GalahadError(f"the run lock {self.path} is already held by this job")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise GalahadError(f"cannot open the run lock {self.path}: {exc.strerror or exc} "
                               "(it must be a regular file, not a symlink)") from None
        f = os.fdopen(fd, "r+b")
        try:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise GalahadError(f"the run lock {self.path} is not a regular file")
            deadline = time.monotonic() + wait_seconds
            while True:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise GalahadError(busy.format(root=self.root)) from None
                    time.sleep(POLL_SECONDS)
        except BaseException:
            f.close()
            raise
        self._file = f
        return self

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the descriptor drops the flock
            self._file = None

    def __enter__(self) -> RunLock:
        if self._file is None:
            self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def run_lock(root: Path, wait_seconds: float = 0.0, busy: str = BUSY) -> RunLock:
    """The data dir's run lock, held: `with run_lock(paths.root): ...` (see `RunLock.acquire`)."""
    return RunLock(root).acquire(wait_seconds, busy)
