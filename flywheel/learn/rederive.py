"""Proving artifacts authentic: re-derive each one from its token ids and parent on the local engine.

An artifact is a pure function of (model, runtime, parent chain, tokens): prefilling its tokens after its
parent's restored KV and encoding the span must give back the very same bytes (the same SHA-256). A
hash check proves bytes intact; this proves the KV is what the model computes, so a forged artifact
(plausible tensors under a consistent header and id) is refused. `catalog import --verify` and
`catalog fsck --verify` use it. Artifacts made by another model or runtime cannot be re-derived here:
they are reported as unverifiable, never as verified.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from galahad.flywheel.artifacts.format import Artifact, decode, read_meta
from galahad.flywheel.errors import GalahadError, IntegrityError

GetBytes = Callable[[str], bytes]  # artifact id -> its (hash-checked) bytes


@dataclass
class Rederived:
    verified: list[str] = field(default_factory=list)
    forged: list[str] = field(default_factory=list)  # re-derivation gave other bytes
    unverifiable: list[str] = field(default_factory=list)  # another model/runtime, or a forged ancestor

    def refuse_unless_all_verified(self) -> None:
        if self.forged:
            raise IntegrityError(f"{len(self.forged)} artifact(s) are not what this model computes from their tokens "
                                 f"and parent (re-derived bytes differ), e.g. {self.forged[0][:16]}")
        if self.unverifiable:
            raise IntegrityError(f"{len(self.unverifiable)} artifact(s) cannot be re-derived here (made by another "
                                 f"model or runtime, or on a refused parent), e.g. {self.unverifiable[0][:16]}")


class Rederiver:
    """Re-derives artifacts on one engine, keeping the live caches of the last tails it produced, so a chain
    costs one prefill per artifact rather than a restore each."""

    def __init__(self, engine, live_caches: int = 4):
        self.engine, self.live_caches = engine, live_caches
        self.fingerprints = (engine.model_fingerprint, engine.runtime_fingerprint)

    def _chain(self, parent: str, get: GetBytes) -> list[Artifact]:
        out, cur = [], parent
        while cur is not None:
            art = decode(get(cur), cur)
            out.append(art)
            cur = art.meta.parent
        return out[::-1]

    def check(self, ids: list[str], get: GetBytes) -> Rederived:
        """Re-derive `ids` (parents before children). Nothing is written anywhere."""
        from galahad.workers.graft import deposit_span, restore

        result, live, bad = Rederived(), OrderedDict(), set()
        for aid in ids:
            meta = read_meta(get(aid))
            if (meta.model_fingerprint, meta.runtime_fingerprint) != self.fingerprints or meta.parent in bad:
                result.unverifiable.append(aid)
                bad.add(aid)
                continue
            try:
                if meta.parent is None:
                    cache = self.engine.new_cache()
                else:
                    cache = live.pop(meta.parent, None)
                    if cache is None:
                        cache = restore(self.engine, self._chain(meta.parent, get))
                again, _data = deposit_span(self.engine, cache, list(meta.token_ids), meta.start, meta.parent,
                                            meta.extra)
            except (GalahadError, ValueError):  # a header no deposit could have written, or a broken chain
                again = None
            if again != aid:
                result.forged.append(aid)
                bad.add(aid)
                continue
            result.verified.append(aid)
            live[aid] = cache
            while len(live) > self.live_caches:
                live.popitem(last=False)
        return result
