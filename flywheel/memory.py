"""Galahad's memory model: libraries of verified solutions, and loading artifact chains from the store.

A library groups solutions by template (or topic when there is no template). Its chains are persistent
prefix trees of segments: every solution is prefilled after the chain's current tail, so any prefix of
a chain grafts exactly at its own positions.
"""

from __future__ import annotations

from galahad.flywheel.artifact import Artifact, decode
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.store import BlobStore, check_id


def library_name(problem: dict) -> str:
    """`template:<id>` when the problem has a template, else `topic:<topic>`."""
    if problem.get("template"):
        return f"template:{problem['template']}"
    return f"topic:{problem.get('topic') or 'general'}"


def load_chain(store: BlobStore, tail_id: str, max_len: int = 100_000) -> list[Artifact]:
    """Walk parents from the tail to the root; every blob is hash-checked as it is read."""
    chain: list[Artifact] = []
    current: str | None = check_id(tail_id)
    while current is not None:
        if len(chain) >= max_len:
            raise GalahadError(f"artifact chain from {tail_id[:16]} is longer than {max_len}: refusing a cycle")
        art = decode(store.get(current), current)
        chain.append(art)
        current = art.meta.parent
    chain.reverse()
    return chain
