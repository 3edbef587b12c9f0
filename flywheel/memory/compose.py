"""Composing a chain of chosen verified solutions (the `nearest` and `random` memories of `eval transfer`):
the k solutions prefilled once as a new chain through `workers.kv_chain.KVChains` and deposited,
content-addressed, so composing the same solutions again gives the same artifacts.
"""

from __future__ import annotations

from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.problems import prompts


def compose(engine, catalog: Catalog, store: BlobStore, solutions: list[tuple[str, str]],
            role: str = "composed") -> str:
    """Deposit (problem, answer) solutions as one chain, in order; returns its tail artifact id."""
    from galahad.workers.kv_chain import KVChains  # deferred: torch is heavy

    if not solutions:
        raise ValueError("nothing to compose")
    chains, start, parent = KVChains(engine, store, live_caches=1), 0, None
    for problem, answer in solutions:
        ids = engine.encode(prompts.solution_segment(problem, answer), bos=parent is None)
        span = chains.deposit(ids, parent, start, {"role": role})  # the blob is durable: record its row
        parent = catalog.artifacts.deposit(store, span.artifact_id)
        start += len(ids)
    return parent
