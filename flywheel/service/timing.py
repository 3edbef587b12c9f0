"""Where one request's time went inside the replica: per-stage seconds, sent back as a `Server-Timing` header.

`add(stage, seconds)` sums into the request context's `stages` (`request.py`: set once per request by
`app.guard`); `header()` renders them (milliseconds, the W3C Server-Timing syntax: `check;dur=0.4,
walk;dur=1.9, ...`). Always on: a few `perf_counter` calls and dict adds a request, against an answer's tens
of milliseconds at the least. Outside a request (`add` with no context) it does nothing.

The stages of a solve (`Answering.solve`), in order: `check` (input checks and the prompt-length check),
`wait` (the engine lock), then per route decoded `memo` (a recall read from the replica's memo) or `graft`
(the chain's load, hash-checked, and restore; the base route: the kept prefix's copy), `forward` (encoding
and the prompt's forward to the first token's logits) and `decode`; `walk` (the rest of `Solver.solve`: the
catalog lookup, the verifier, the computed-value check), `choices` (shaping the answers), `queue` (handing
a problem to the learner), `solve` (the whole); the middleware adds `replica` (the request from the
middleware's entry to its response: JSON parsing, the caller's identity, the threadpool hop and the
reply's serialization included).
"""

from __future__ import annotations

from galahad.flywheel.service import request


def add(stage: str, seconds: float) -> None:
    """Add `seconds` to `stage` of the request being handled (nothing outside a request)."""
    ctx = request.current()
    if ctx is not None:
        ctx.stages[stage] = ctx.stages.get(stage, 0.0) + seconds


def header(stages: dict[str, float]) -> str:
    """The `Server-Timing` value: each stage's milliseconds, in the order they were added."""
    return ", ".join(f"{name};dur={1000 * s:.2f}" for name, s in stages.items())


def parse(value: str | None) -> dict[str, float]:
    """A `Server-Timing` value back into {stage: milliseconds} (what the bench reads)."""
    out: dict[str, float] = {}
    for part in (value or "").split(","):
        name, _, rest = part.strip().partition(";dur=")
        if name and rest:
            out[name] = float(rest)
    return out
