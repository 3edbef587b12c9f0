"""Composing a chain of chosen verified solutions (the `nearest` and `random` memories of `eval transfer`).

A library chain holds solutions in deposit order; an eval that picks its own k solutions prefills them
once as a new chain (root after BOS, each next one after the previous) and deposits it, content-addressed,
so composing the same solutions again is the same artifacts and costs one lookup. The chain then grafts
exactly at its own positions like any other (`recall.graft_decode`).
"""

from __future__ import annotations

from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.problems import prompts


def compose(engine, catalog: Catalog, store: BlobStore, solutions: list[tuple[str, str]],
            role: str = "composed") -> str:
    """Deposit (problem, answer) solutions as one chain, in order; returns its tail artifact id."""
    from galahad.workers.graft import deposit_span  # torch: off the import path of model-free commands

    if not solutions:
        raise ValueError("nothing to compose")
    cache, start, parent = engine.new_cache(), 0, None
    for problem, answer in solutions:
        ids = engine.encode(prompts.solution_segment(problem, answer), bos=parent is None)
        _, data = deposit_span(engine, cache, ids, start, parent, {"role": role})
        parent = catalog.deposit(store, data)
        start += len(ids)
    return parent
