"""The depositor: prefill a solution segment after a chain's tail and put the span's KV artifact in the store.

Plain class (the Ray actor wraps it) that knows nothing of libraries or the catalog: handed the segment
text and the tail to extend, it writes the blob itself (durable before it returns) and returns the span's
id and place (`kv_chain.Span`); choosing the tail and recording the row is `flywheel/learn/deposit.py`'s.
A recall root (`recall_of`) is also decoded once as a hit would decode it (`answer.answer_decode`), and the
decode travels back for the catalog to store, so a hit is a catalog read.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from galahad.flywheel.artifacts.store import open_store
from galahad.flywheel.config import BUDGETS
from galahad.workers.answer import answer_decode
from galahad.workers.engine import Engine
from galahad.workers.kv_chain import KVChains, Span
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import RuntimeConfig

__all__ = ["Depositor", "Span"]


class Depositor:
    def __init__(
        self, model: str, model_cache: str | os.PathLike, runtime: RuntimeConfig, store_path: str | os.PathLike,
        chain_max_tokens: int | None = None, live_caches: int = 8, ram_tier_bytes: int | None = None,
    ):
        self.engine = Engine(load_model(model, Path(model_cache), runtime), runtime)
        self.store = open_store(store_path, ram_tier_bytes)  # a folder, or an s3:// store's spec
        window = self.engine.loaded.context_window
        self.chain_max_tokens = min(chain_max_tokens or window, window)
        self.chains = KVChains(self.engine, self.store, live_caches)

    @property
    def fingerprints(self) -> tuple[str, str]:
        return self.engine.model_fingerprint, self.engine.runtime_fingerprint

    def deposit(self, segment: str, tail: dict | None, extra: dict | None = None, recall_of: str | None = None) -> Span:
        """Prefill `segment` after `tail` and put its blob; a new chain (root) when there is no tail or the
        segment would take the chain past `chain_max_tokens`. `recall_of`: a recall root's question, whose
        decode after it comes back as `Span.answer` (`recall_answer`)."""
        ids = self.engine.encode(segment, bos=False)
        if tail is None or tail["token_end"] + len(ids) > self.chain_max_tokens:
            ids = self.engine.encode(segment, bos=True)
            start, parent = 0, None
        else:
            start, parent = int(tail["token_end"]), tail["id"]
        # A recall root is never extended: it does not take a live slot from the chain tails.
        keep = (extra or {}).get("role") != "recall"
        span = self.chains.deposit(ids, parent, start, extra, keep=keep)
        return span if recall_of is None else replace(span, answer=self.recall_answer(span.artifact_id, recall_of))

    def recall_answer(self, tail: str, question: str, max_tokens: int = BUDGETS.answer_tokens) -> dict:
        """What a hit on the recall root `tail` decodes (the `hash` and `key` routes: the problem's own question
        after it, the query prompt, greedy), as `catalog.recall_answers.put` stores it."""
        r = answer_decode(self.engine, self.store, tail, question, "query", max_tokens)
        return {"tail": tail, "question": question, "prompt": "query", "max_tokens": max_tokens,
                "fingerprints": self.fingerprints, "chain": list(r.artifacts), "start": r.start,
                "prompt_token_ids": list(r.prompt_token_ids), "output_token_ids": list(r.output_token_ids),
                "output_text": r.output_text}
