"""Admitting problems into the catalog: golds checked, conflicts refused, provenance recorded.

Every way a problem reaches the learner goes through `admit`: `galahad run --problems FILE`, `POST
/v1/problems` and `POST /v1/solve` with a gold. Before anything is written:
- a gold that disagrees with the problem's computed value is refused, naming both (`problems/golds.py`);
- two golds for the same problem (the same text hash or the same canonical key) must agree, within the
  batch and against the catalog: a second, different gold is a `GoldConflict` (HTTP 409), never a silent
  first-wins;
- each problem records who vouches for its gold (`gold_source`): `computed` when it equals the computed
  value, else `given_by` (a file and its `source`, or the API caller's identity and `source`).
All text is parsed here, outside any database transaction; the batch is all or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.check import refuse_bad_golds
from galahad.flywheel.problems.golds import check_gold, gold_source, same_gold
from galahad.flywheel.problems.records import Problem


class GoldConflict(GalahadError):
    """A second, different gold for a problem the catalog already holds (HTTP 409)."""


def _conflicts(catalog, problems: Sequence[Problem], places: Sequence[str], keys: list[str | None]) -> None:
    by_hash = {r["id"]: r for r in catalog.problems.by_ids([p.hash for p in problems])}
    catalog.problems.ensure_keys()  # rows added under an older key version are keyed before they are compared
    by_key: dict[str, list[dict]] = {}
    for r in catalog.problems.by_keys([k for k in keys if k]):
        by_key.setdefault(r["canonical_key"], []).append(r)
    for p, where, key in zip(problems, places, keys, strict=True):
        rows = ([by_hash[p.hash]] if p.hash in by_hash else []) + by_key.get(key or "", [])
        for row in rows:
            if not same_gold(row["answer"], p.answer):
                how = "this text" if row["id"] == p.hash else "the same mathematics (canonical key)"
                raise GoldConflict(f"{where}: gold {p.answer[:60]!r} conflicts with gold {row['answer'][:60]!r} "
                                   f"already in the catalog for {how}: problem {row['id'][:12]} "
                                   f"{' '.join(row['text'].split())[:80]!r}")


def admit(catalog, problems: Sequence[Problem], places: Sequence[str], given_by: str) -> list[str]:
    """Check and add a batch of problems; their ids. GalahadError (or GoldConflict) before any write."""
    checks = [check_gold(p.problem, p.answer) for p in problems]  # each text read once
    refuse_bad_golds(problems, places, checks)
    _conflicts(catalog, problems, places, [c.key for c in checks])
    return catalog.problems.add_many([
        dict(text=p.problem, answer=p.answer, source=p.source, topic=p.topic, template=p.template,
             external_id=p.id, gold_source=gold_source(c, f"{given_by}:{p.source}"[:300]))
        for p, c in zip(problems, checks, strict=True)])
