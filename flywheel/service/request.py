"""The one per-request context: who calls, the route, the answer path, and where the time went (stages).

`app.guard` calls `begin()` once per request. The route runs in a copy of the middleware's context, so the
`Request` itself is shared: what the route sets on it (`Metrics.answer`: the path; `timing.add`: stages) the
middleware reads after it, and `current_caller()` reads its caller. Functions, not the ContextVar, are the
interface: Serve pickles the deployment class by value, and a function is pickled by reference.
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
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage (`timing.py`), in order added


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
