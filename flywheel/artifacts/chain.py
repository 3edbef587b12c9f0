"""Walking an artifact chain: from a tail to its root over parents, bounded, every blob hash-checked.

A chain is a persistent prefix tree of spans: every artifact extends its parent's KV at its own positions,
so any prefix of a chain grafts exactly. This module owns the one parent walk (`walk`): at most
`MAX_CHAIN_ARTIFACTS` links, and a walk that comes back to an artifact it already passed (a cycle, which
content addressing makes impossible for honest bytes) is refused with a clear error, never looped on.
Over it: `load_chain` (the artifacts, to graft: `workers/kv_chain.py`), `chain_headers` (headers only: the
token ids a recompute prefills), the catalog's `lineage` (the same bound, over rows), a bundle's ancestors
and parents-first order (`catalog/bundle.py`) and the context eval's graftable verdicts (`evals/context.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from galahad.flywheel.artifacts.format import Artifact, ArtifactMeta, decode, decode_checked, read_meta
from galahad.flywheel.artifacts.store import BlobStore, check_id
from galahad.flywheel.errors import GalahadError

MAX_CHAIN_ARTIFACTS = 100_000  # more spans than any context window holds tokens for
GetBytes = Callable[[str], bytes]  # artifact id -> its bytes (a bundle being imported, say)
Source = BlobStore | GetBytes
T = TypeVar("T")


def walk(tail_id: str, read: Callable[[str], T | None], parent_of: Callable[[T], str | None],
         max_len: int = MAX_CHAIN_ARTIFACTS) -> list[T]:
    """What `read` gives for each link from the root to `tail_id` (root first), following `parent_of`.
    `read` returning None ends the walk at that link (a reader that lacks it, or a memoized walk that already
    passed it); a reader that must have every link raises instead. A cycle or more than `max_len` links is
    refused."""
    out: list[T] = []
    seen: set[str] = set()
    current: str | None = tail_id
    while current is not None:
        if current in seen:
            raise GalahadError(f"artifact chain from {tail_id[:16]} comes back to {current[:16]}: refusing a cycle")
        if len(out) >= max_len:
            raise GalahadError(f"artifact chain from {tail_id[:16]} is longer than {max_len:,} artifacts: refused")
        item = read(current)
        if item is None:
            break
        seen.add(current)
        out.append(item)
        current = parent_of(item)
    out.reverse()
    return out


def _artifact_reader(source: Source) -> Callable[[str], Artifact]:
    if isinstance(source, BlobStore):  # one read into one buffer, hashed as it arrives; tensors are views
        return lambda aid: decode_checked(source.get_checked(aid))
    return lambda aid: decode(source(aid), aid)  # hash-checked before any tensor is built


def load_chain(source: Source, tail_id: str, max_len: int = MAX_CHAIN_ARTIFACTS) -> list[Artifact]:
    """The chain ending at `tail_id`, root first; every blob is hash-checked as it is read, from a store
    or from any `GetBytes` (the rebuild check reads a bundle's blobs before they are imported)."""
    return walk(check_id(tail_id), _artifact_reader(source), lambda a: a.meta.parent, max_len)


def chain_headers(store: BlobStore, tail_id: str, max_len: int = MAX_CHAIN_ARTIFACTS
                  ) -> list[tuple[str, ArtifactMeta]]:
    """(artifact id, header) of each artifact of the chain ending at `tail_id`, root first; no tensors are
    built, but each blob is still hash-checked."""
    return walk(check_id(tail_id), lambda aid: (aid, read_meta(store.get(aid))), lambda p: p[1].parent, max_len)
