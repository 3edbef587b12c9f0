"""The rebuild check: proving artifacts authentic by rebuilding each one from its token ids and parent.

An artifact is a pure function of (model, runtime, parent chain, tokens), so prefilling its tokens after
its parent must give back the same bytes. A hash check proves bytes intact; this proves the KV is what the
model computes, so a forged artifact is refused. `catalog fsck --verify` and `catalog import --verify` run
it (their `rederive`); another model's or runtime's artifacts are reported unverifiable, never verified.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from galahad.flywheel.artifacts.chain import GetBytes
from galahad.flywheel.artifacts.format import read_meta
from galahad.flywheel.errors import GalahadError, IntegrityError


@dataclass
class Rebuilt:
    verified: list[str] = field(default_factory=list)
    forged: list[str] = field(default_factory=list)  # the rebuild gave other bytes
    unverifiable: list[str] = field(default_factory=list)  # another model/runtime, or a forged ancestor

    def refuse_unless_all_verified(self) -> None:
        if self.forged:
            raise IntegrityError(f"{len(self.forged)} artifact(s) are not what this model computes from their tokens "
                                 f"and parent (re-derived bytes differ), e.g. {self.forged[0][:16]}")
        if self.unverifiable:
            raise IntegrityError(f"{len(self.unverifiable)} artifact(s) cannot be re-derived here (made by another "
                                 f"model or runtime, or on a refused parent), e.g. {self.unverifiable[0][:16]}")


class RebuildCheck:
    """Rebuilds artifacts on one engine through `workers.kv_chain.KVChains`, whose live caches of the last
    tails make a chain cost one prefill per artifact rather than a restore each."""

    def __init__(self, engine, live_caches: int = 4):
        self.engine, self.live_caches = engine, live_caches
        self.fingerprints = (engine.model_fingerprint, engine.runtime_fingerprint)

    def check(self, ids: list[str], get: GetBytes) -> Rebuilt:
        """Rebuild `ids` (parents before children), reading blobs (hash-checked) with `get`. Nothing is
        written anywhere."""
        from galahad.workers.kv_chain import KVChains  # deferred: torch is heavy

        result, chains, bad = Rebuilt(), KVChains(self.engine, get, self.live_caches), set()
        for aid in ids:
            meta = read_meta(get(aid))
            if (meta.model_fingerprint, meta.runtime_fingerprint) != self.fingerprints or meta.parent in bad:
                result.unverifiable.append(aid)
                bad.add(aid)
                continue
            try:
                again, _data = chains.encode(list(meta.token_ids), meta.parent, meta.start, meta.extra)
            except (GalahadError, ValueError):  # a header no deposit could have written, or a broken chain
                again = None
            if again != aid:
                chains.forget(again)  # only a verified artifact's cache stays live
                result.forged.append(aid)
                bad.add(aid)
                continue
            result.verified.append(aid)
        return result
