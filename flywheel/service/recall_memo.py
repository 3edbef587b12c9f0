"""A replica's recall decodes already computed: kept in this process, and stored in the catalog.

A recall (the `hash` and `key` routes) is a fixed function of the chain it grafts (named by hashes), the
question, the prompt format and the cap under given (model, runtime) fingerprints, so its `Recalled` is read
back instead of decoded again, from `memo` (this replica's last `ServiceConfig.recall_memo` decodes, LRU; 0:
off) or `stored` (`catalog.recall_answers`, written by the depositor and, write-through, by any replica that
decoded one). Not kept: the lookup and the check against the gold (every request walks the routes), the base
and inexact routes' answers, sampled answers. `Decoding.model_decode` bypasses it. Used under the replica's
engine lock.
"""

from __future__ import annotations

from collections import OrderedDict

from galahad.flywheel.catalog import Catalog
from galahad.flywheel.catalog.part import Fingerprints
from galahad.flywheel.memory.recall import Recalled
from galahad.flywheel.memory.solver import Route

MEMOIZED = ("hash", "key")  # the routes whose decode is a recall of a verified problem's own artifact


class RecallMemo:
    def __init__(self, capacity: int, catalog: Catalog | None = None, fingerprints: Fingerprints | None = None):
        """`catalog` and `fingerprints` (the replica engine's): the stored tier; without them, the memo alone."""
        self.capacity, self.catalog, self.fingerprints = capacity, catalog, fingerprints
        self._kept: OrderedDict[tuple, Recalled] = OrderedDict()
        self.hits = self.misses = self.stored_hits = 0

    @staticmethod
    def key(route: Route) -> tuple | None:
        """What a recall's output is a function of (on one engine), or None for a route never kept."""
        if route.path not in MEMOIZED or route.tail is None:
            return None
        return route.tail, route.decoded, route.prompt, route.max_tokens

    @property
    def _stored(self) -> bool:
        return self.catalog is not None and self.fingerprints is not None

    def get(self, route: Route) -> tuple[Recalled, str] | None:
        """(the recall's decode, the tier that held it: `memo` or `stored`), or None."""
        key = self.key(route)
        if key is None:
            return None
        found = self._kept.get(key) if self.capacity > 0 else None
        if found is not None:
            self._kept.move_to_end(key)
            self.hits += 1
            return found, "memo"
        row = self.catalog.recall_answers.get(route.tail, route.decoded, route.prompt, route.max_tokens,
                                              self.fingerprints) if self._stored else None
        if row is None:
            self.misses += 1
            return None
        self.stored_hits += 1
        r = Recalled(list(row["chain"]), int(row["start"]), list(row["prompt_token_ids"]),
                     list(row["output_token_ids"]), row["output_text"], 0.0)
        self._keep(key, r)
        return r, "stored"

    def put(self, route: Route, r: Recalled) -> None:
        """Keep a recall this replica decoded, here and (write-through) in the catalog."""
        key = self.key(route)
        if key is None:
            return
        self._keep(key, r)
        if self._stored:
            self.catalog.recall_answers.put(route.tail, route.decoded, route.prompt, route.max_tokens,
                                            self.fingerprints, {"chain": r.artifacts, "start": r.start,
                                                                "prompt_token_ids": r.prompt_token_ids,
                                                                "output_token_ids": r.output_token_ids,
                                                                "output_text": r.output_text})

    def _keep(self, key: tuple, r: Recalled) -> None:
        if self.capacity <= 0:
            return
        self._kept[key] = r
        self._kept.move_to_end(key)
        while len(self._kept) > self.capacity:
            self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
