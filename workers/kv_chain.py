"""The one owner of a KV chain on an engine: graft it from the store, and extend it by prefilled spans.

- `graft` / `restore_chain`: the chain ending at a tail, read through the one bounded parent walk
  (`flywheel/artifacts/chain.py`, every blob hash-checked) and restored at its own positions, or an empty
  cache.
- `KVChains`: `encode` prefills a span after its parent and encodes its KV; `deposit` also puts the blob
  (durable before it returns). The caches of the last tails produced stay live (an LRU), so consecutive
  spans of one chain cost one prefill each; a live cache is taken, never borrowed, so a failure leaves
  nothing live.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from transformers import DynamicCache

from galahad.flywheel.artifacts.chain import Source, load_chain
from galahad.flywheel.artifacts.format import Artifact
from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.errors import GalahadError
from galahad.workers.engine import Engine
from galahad.workers.graft import deposit_span, restore


@dataclass(frozen=True)
class Span:
    """A deposited span: its artifact id (its blob is durable in the store), where it sits, its size."""

    artifact_id: str
    parent: str | None
    start: int
    tokens: int
    size: int
    # a recall root's answer, decoded once after it where it was deposited (`Depositor.deposit(recall_of=)`)
    answer: dict | None = None


def restore_chain(engine: Engine, chain: list[Artifact]) -> tuple[DynamicCache, int, list[str]]:
    """(cache holding the chain's KV, first free position, the chain's artifact ids); empty: a new cache."""
    if not chain:
        return engine.new_cache(), 0, []
    return restore(engine, chain), chain[-1].meta.end, [a.id for a in chain]


def graft(engine: Engine, source: Source, tail: str | None) -> tuple[DynamicCache, int, list[str]]:
    """The chain ending at `tail` (None: nothing), loaded hash-checked and restored at its own positions."""
    return restore_chain(engine, load_chain(source, tail) if tail else [])


class KVChains:
    """Chains extended on one engine, over one source of parents (a store, or any id -> bytes)."""

    def __init__(self, engine: Engine, source: Source, live_caches: int = 8):
        self.engine, self.source, self.live_caches = engine, source, live_caches
        self._live: OrderedDict[str, DynamicCache] = OrderedDict()

    def cache_after(self, parent: str | None) -> DynamicCache:
        """A cache holding the chain ending at `parent`: its live cache (taken), else restored from the
        source; a new cache for a root (None)."""
        if parent is None:
            return self.engine.new_cache()
        live = self._live.pop(parent, None)
        return live if live is not None else restore(self.engine, load_chain(self.source, parent))

    def _extend(self, token_ids: list[int], parent: str | None, start: int, extra: dict | None
                ) -> tuple[str, bytes, DynamicCache]:
        cache = self.cache_after(parent)
        art_id, data = deposit_span(self.engine, cache, token_ids, start, parent, extra)
        return art_id, data, cache

    def _keep(self, art_id: str, cache: DynamicCache) -> None:
        self._live[art_id] = cache
        while len(self._live) > self.live_caches:
            self._live.popitem(last=False)

    def encode(self, token_ids: list[int], parent: str | None, start: int, extra: dict | None = None,
               keep: bool = True) -> tuple[str, bytes]:
        """Prefill `token_ids` after the chain ending at `parent` (which ends at `start`; None and 0: a new
        chain) and encode the span: (artifact id, bytes). Nothing is written. `keep`: the extended cache
        stays live as the new tail's."""
        art_id, data, cache = self._extend(token_ids, parent, start, extra)
        if keep:
            self._keep(art_id, cache)
        return art_id, data

    def deposit(self, token_ids: list[int], parent: str | None, start: int, extra: dict | None = None,
                keep: bool = True) -> Span:
        """`encode`, then put the blob in the store: it is durable before this returns."""
        if not isinstance(self.source, BlobStore):
            raise TypeError("deposit needs a BlobStore to put the span's blob in")
        art_id, data, cache = self._extend(token_ids, parent, start, extra)
        if self.source.put(data) != art_id:
            raise GalahadError(f"store returned another id than the hash of artifact {art_id[:16]}")
        if keep:
            self._keep(art_id, cache)
        return Span(art_id, parent, start, len(token_ids), len(data))

    def forget(self, art_id: str | None) -> None:
        """Drop a live cache (a span that turned out not to be the one wanted)."""
        if art_id is not None:
            self._live.pop(art_id, None)

    def clear(self) -> None:
        """Drop every live cache."""
        self._live.clear()
