"""Loading an artifact chain from the store: walk parents from a tail to its root, hash-checking each blob.

A chain is a persistent prefix tree of spans: every artifact extends its parent's KV at its own positions,
so any prefix of a chain grafts exactly.
"""

from __future__ import annotations

from galahad.flywheel.artifacts.format import Artifact, decode_checked
from galahad.flywheel.artifacts.store import BlobStore, check_id
from galahad.flywheel.errors import GalahadError


def load_chain(store: BlobStore, tail_id: str, max_len: int = 100_000) -> list[Artifact]:
    """Walk parents from the tail to the root; every blob is hash-checked as it is read (one read into one
    buffer, hashed as it arrives; the tensors are views over that buffer)."""
    chain: list[Artifact] = []
    current: str | None = check_id(tail_id)
    while current is not None:
        if len(chain) >= max_len:
            raise GalahadError(f"artifact chain from {tail_id[:16]} is longer than {max_len}: refusing a cycle")
        art = decode_checked(store.get_checked(current))
        chain.append(art)
        current = art.meta.parent
    chain.reverse()
    return chain
