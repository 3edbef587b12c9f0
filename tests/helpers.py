"""Test-only helpers over product objects: what only tests ask of them, kept out of the product modules."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from galahad.flywheel.artifacts.store import atomic_write
from galahad.flywheel.catalog import problem_hash
from galahad.flywheel.memory.library_names import candidate_libraries
from galahad.flywheel.memory.policy import RetrievalPolicy
from galahad.flywheel.memory.solver import Answer, Route, Solver, provenance
from galahad.flywheel.problems.records import Problem


def match_key(solver, text: str) -> dict | None:
    """The verified problem with `text`'s canonical key (a `Solver`'s `key` match), or None."""
    hits = solver.lookup(text, shape=False)["key"]
    return hits[0] if hits else None


def recurrence(solver: Solver, text: str) -> Answer | None:
    """The `hash` path alone: the problem's recall artifact, its own question asked again."""
    hit = solver.catalog.recalls.get(problem_hash(text), solver.fingerprints)
    if not hit:
        return None
    return solver.answer_route(Route("hash", hit["artifact_id"], hit["text"], "query", solver.max_tokens,
                                     hit["answer"], hit["id"], provenance(hit)))


def transfer(solver: Solver, text: str, template: str, topic: str) -> Answer | None:
    """The `transfer` path alone: the chain of `template`'s (or `topic`'s) library grafted, `text` asked."""
    policy = RetrievalPolicy()
    chain = solver.transfer_chain(candidate_libraries(policy, template, topic), policy)
    return solver.answer_route(Route("transfer", chain[1], text, "query", solver.max_tokens,
                                     library=chain[0])) if chain else None


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
