"""Test-only helpers over product objects: what only tests ask of them, kept out of the product modules."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from galahad.flywheel.artifacts.store import atomic_write
from galahad.flywheel.problems.records import Problem


def match_key(solver, text: str) -> dict | None:
    """The verified problem with `text`'s canonical key (a `Solver`'s `key` match), or None."""
    hits = solver.lookup(text, shape=False)["key"]
    return hits[0] if hits else None


def worker_pids(verifier) -> list[int]:
    """Process ids of a `Verifier`'s zygote and idle workers (killing one costs at most one verdict)."""
    return verifier._pool.pids()


def dump_jsonl(problems: Iterable[Problem], path: str | Path) -> None:
    """Write problems as JSONL (atomically: a reader never sees half a file), as `load_jsonl` reads them."""
    atomic_write(Path(path), "".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n"
                                     for p in problems).encode("utf-8"))


def record_gate(catalog, model_fingerprint: str, library: str, route: str = "transfer", route_correct: int = 3,
                base_correct: int = 1, n: int = 4, manifest_id: str = "0" * 64) -> dict:
    """Record a transfer gate's evidence as `eval transfer` would (`catalog.gates`): the route right on
    `route_correct` of `n` held-out problems, the base model on `base_correct` (open when more)."""
    row = {"model_fingerprint": model_fingerprint, "library": library, "route": route,
           "open": route_correct > base_correct, "manifest_id": manifest_id, "condition": "transfer",
           "route_correct": route_correct, "route_n": n, "base_correct": base_correct, "base_n": n}
    catalog.gates.record([row])
    return row
