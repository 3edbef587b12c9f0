"""Tests decide on events and state, never on a sleep or on how long something took.

Time appears only as a generous bound on waiting, so a loaded machine slows a test down but never
changes its outcome: `wait_for` polls a condition until it holds (a deadline minutes away turns a
condition that never comes into a failure instead of a hang), and `returns` runs a call under a hang
guard far above any limit the code itself enforces (it never asserts how fast the call was).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_S = 300.0  # for a condition to come about: far beyond any expected wait on a busy 2-core machine
HANG_S = 120.0  # for one call that is bounded by its own limits (the verifier's is 1 s): only a hang exceeds it


def wait_for(condition: Callable[[], object], what: str, within: float = WAIT_S, every: float = 0.05) -> object:
    """Poll `condition()` until it returns something truthy (returned); fail naming `what` if it never does."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened within {within:.0f} s: {what}")
        time.sleep(every)


def returns(fn: Callable[..., T], *args, within: float = HANG_S, **kwargs) -> T:
    """`fn(*args, **kwargs)`, run in a daemon thread; its exception is re-raised here. Fails if it has not
    returned within `within` seconds: a hang guard, not a performance assertion."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within)
    if thread.is_alive():
        raise AssertionError(f"{getattr(fn, '__name__', fn)} did not return within {within:.0f} s: a hang")
    if "error" in box:
        raise box["error"]
    return box["value"]


def gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie counts as gone: its parent may reap it lazily)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True
