"""`catalog.runtimes`: the readable facts behind each runtime fingerprint an engine used on this catalog.

A fingerprint is a hash; its facts (`workers.runtime.runtime_facts`: CPU identity, torch/transformers,
pinned env, ...) are recorded by the engines that answer or rebuild from the catalog (and travel in
bundles), so an artifact made elsewhere can be explained field by field ("fields: cpu.model, torch").
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import Part
from galahad.flywheel.catalog.schema import TABLES

RT = TABLES["runtimes"]


def flatten(facts: Any, prefix: str = "") -> dict[str, Any]:
    """{"cpu": {"model": "167"}} -> {"cpu.model": "167"} (lists and scalars are leaves)."""
    if not isinstance(facts, dict):
        return {prefix: facts}
    out: dict[str, Any] = {}
    for k, v in facts.items():
        out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def differing(mine: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """The dotted fields where two runtimes' facts differ, sorted (e.g. ["cpu.model", "torch"])."""
    a, b = flatten(mine), flatten(theirs)
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


class Runtimes(Part):
    def record(self, fingerprint: str, facts: dict[str, Any]) -> None:
        """Idempotent: the facts of a fingerprint never change (the fingerprint is their hash)."""
        if self.facts(fingerprint) is not None:
            return
        with self.write() as conn:
            self.insert_ignore(conn, RT, [dict(fingerprint=fingerprint, facts=facts, created_at=now())])

    def facts(self, fingerprint: str) -> dict[str, Any] | None:
        return self.scalar(select(RT.c.facts).where(RT.c.fingerprint == fingerprint))

    def explain(self, mine: str, theirs: list[str]) -> list[str]:
        """The fields in which runtimes `theirs` differ from `mine` ("unrecorded" where a runtime's facts
        never reached this catalog)."""
        here = self.facts(mine)
        fields: set[str] = set()
        for fp in theirs:
            there = self.facts(fp)
            fields.update(differing(here, there) if here is not None and there is not None else ["unrecorded"])
        return sorted(fields)
