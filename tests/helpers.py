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
