"""The one per-request context: who calls, the route, the answer path, and where the time went.

`app.guard` calls `begin()` once per request; the route runs in a copy of its context, so the `Request` is
shared: what the route sets (`Metrics.answer`: the path; `add_stage`: stages) the middleware reads after it,
and `current_caller()` reads its caller. Functions, not the ContextVar, are the interface: Serve pickles the
deployment class by value, and a function is pickled by reference. Outside a request nothing is recorded.
Stages go back as the `Server-Timing` header (`server_timing`, milliseconds); the stage names are listed in
docs/operations.md.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

from galahad.flywheel.service.security import Caller

NO_PATH = "none"  # the answer path of a request that answered no problem (reads, /metrics, errors)


@dataclass
class Request:
    caller: Caller | None = None  # set once the guard identified it (None: not yet, or refused)
    route: str = "unrouted"  # the route's path template, once routed
    path: str = NO_PATH  # the answer path (`memory.solver.PATHS`), once a route answered
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage, in the order added


_CURRENT: contextvars.ContextVar[Request | None] = contextvars.ContextVar("galahad_request", default=None)


def begin() -> Request:
    """A fresh context for the request being handled."""
    ctx = Request()
    _CURRENT.set(ctx)
    return ctx


def current() -> Request | None:
    return _CURRENT.get()


def current_caller() -> Caller:
    """The request's caller; RuntimeError (a JSON 500) where none was identified: never a default view."""
    ctx = _CURRENT.get()
    if ctx is None or ctx.caller is None:
        raise RuntimeError("no caller identified for this request")
    return ctx.caller


def add_stage(stage: str, seconds: float) -> None:
    """Add `seconds` to `stage` of the request being handled (nothing outside a request)."""
    ctx = _CURRENT.get()
    if ctx is not None:
        ctx.stages[stage] = ctx.stages.get(stage, 0.0) + seconds


def server_timing(stages: dict[str, float]) -> str:
    """The `Server-Timing` value: each stage's milliseconds, in the order they were added."""
    return ", ".join(f"{name};dur={1000 * s:.2f}" for name, s in stages.items())


def parse_server_timing(value: str | None) -> dict[str, float]:
    """A `Server-Timing` value back into {stage: milliseconds} (what the bench reads)."""
    out: dict[str, float] = {}
    for part in (value or "").split(","):
        name, _, rest = part.strip().partition(";dur=")
        if name and rest:
            out[name] = float(rest)
    return out
