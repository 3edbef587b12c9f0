"""The depositor: prefill a solution segment after a chain's tail and encode the span's KV artifact.

Plain class (the Ray actor wraps it). It knows nothing of libraries or the catalog: it is handed the
segment text and the tail to extend (`{"id", "token_end"}`, or None for a new chain), and returns the
artifact's bytes; choosing the tail and committing the row is the catalog's job
(`flywheel/learn/deposit.py`). It keeps the live caches of the tails it produced last, so consecutive
deposits into one chain cost one segment prefill, not a chain restore; any other tail is restored from
the store, which is exact at own positions.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from transformers import DynamicCache

from galahad.flywheel.artifacts.chain import load_chain
from galahad.flywheel.artifacts.store import LocalStore
from galahad.workers.engine import Engine
from galahad.workers.graft import deposit_span, restore
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import RuntimeConfig


@dataclass(frozen=True)
class Span:
    """A prefilled segment, ready to be committed: its artifact id and bytes, and where it sits."""

    artifact_id: str
    data: bytes
    parent: str | None
    start: int
    tokens: int


class Depositor:
    def __init__(
        self, model: str, model_cache: str | os.PathLike, runtime: RuntimeConfig, store_path: str | os.PathLike,
        chain_max_tokens: int | None = None, live_caches: int = 8,
    ):
        self.engine = Engine(load_model(model, Path(model_cache), runtime), runtime)
        self.store = LocalStore(store_path)
        window = self.engine.loaded.context_window
        self.chain_max_tokens = min(chain_max_tokens or window, window)
        self.live_caches = live_caches
        self._live: OrderedDict[str, DynamicCache] = OrderedDict()

    @property
    def fingerprints(self) -> tuple[str, str]:
        return self.engine.model_fingerprint, self.engine.runtime_fingerprint

    def deposit(self, segment: str, tail: dict | None, extra: dict | None = None) -> Span:
        """Prefill `segment` after `tail`; a new chain (root) when there is no tail or the segment would
        take the chain past `chain_max_tokens`."""
        ids = self.engine.encode(segment, bos=False)
        if tail is None or tail["token_end"] + len(ids) > self.chain_max_tokens:
            ids = self.engine.encode(segment, bos=True)
            start, parent, cache = 0, None, self.engine.new_cache()
        else:
            start, parent = int(tail["token_end"]), tail["id"]
            live = self._live.pop(parent, None)  # taken, not borrowed: a failed prefill must not leave it live
            cache = live if live is not None else restore(self.engine, load_chain(self.store, parent))
        art_id, data = deposit_span(self.engine, cache, ids, start, parent, extra)
        if (extra or {}).get("role") == "recall":  # a recall root is never extended: keep chain tails live
            return Span(art_id, data, parent, start, len(ids))
        self._live[art_id] = cache
        while len(self._live) > self.live_caches:
            self._live.popitem(last=False)
        return Span(art_id, data, parent, start, len(ids))
