"""A replica's memo of recall decodes: the output of a memory route already computed by this replica's engine.

A recall (the `hash` and `key` routes: a verified problem's own artifact grafted, its own question asked
again, greedy) is a fixed function of what it reads: the chain ending at the route's tail (artifacts are
named by the hash of their bytes), the question decoded after it, the prompt format and the decode cap, on
this replica's engine (one model, one pinned runtime: the same inputs give the same bits, which is what
every exactness test of the project asserts). So its `Recalled` is kept here, keyed by exactly those, and a
repeated recall reads it back instead of grafting and decoding again: the same output bytes, without the
forward passes. What is not memoized: the catalog lookup and the verification against the gold (each
request still walks the routes and checks the answer: a gold revoked or an artifact replaced changes the
route, hence the key), the base model's and the inexact routes' answers, and sampled answers.

Bounded: at most `ServiceConfig.recall_memo` entries (token ids and text, a few hundred bytes each), least
recently used out first; 0 turns it off. Used under the replica's engine lock (`Answering.solve`).
"""

from __future__ import annotations

from collections import OrderedDict

from galahad.flywheel.memory.recall import Recalled
from galahad.flywheel.memory.solver import Route

MEMOIZED = ("hash", "key")  # the routes whose decode is a recall of a verified problem's own artifact


class RecallMemo:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self._kept: OrderedDict[tuple, Recalled] = OrderedDict()
        self.hits = self.misses = 0

    @staticmethod
    def key(route: Route) -> tuple | None:
        """What a recall's output is a function of (on one engine), or None for a route never memoized."""
        if route.path not in MEMOIZED or route.tail is None:
            return None
        return route.tail, route.decoded, route.prompt, route.max_tokens

    def get(self, route: Route) -> Recalled | None:
        key = self.key(route) if self.capacity > 0 else None
        found = self._kept.get(key) if key is not None else None
        if found is not None:
            self._kept.move_to_end(key)
            self.hits += 1
        elif key is not None:
            self.misses += 1
        return found

    def put(self, route: Route, r: Recalled) -> None:
        key = self.key(route) if self.capacity > 0 else None
        if key is None:
            return
        self._kept[key] = r
        self._kept.move_to_end(key)
        while len(self._kept) > self.capacity:
            self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
