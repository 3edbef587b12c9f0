"""Admitting problems into the catalog: golds checked, conflicts refused, provenance recorded.

Every way a problem reaches the learner (`run --problems FILE`, `POST /v1/problems`, `POST /v1/solve` with
a gold) goes through `admit`. A gold that disagrees with the computed value is refused (`problems/golds.py`);
two different golds for one problem (text hash or canonical key), in the batch or against the catalog, are a
`GoldConflict` (HTTP 409), checked atomically with the insert (`catalog.golds`); a batch goes into one scope;
each problem records who vouches for its gold (`gold_source`: `computed`, else `given_by`). Text is parsed
outside any transaction; the batch is all or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.check import refuse_bad_golds
from galahad.flywheel.problems.golds import check_gold, gold_source, same_gold
from galahad.flywheel.problems.records import Problem
from galahad.flywheel.problems.scope_ids import SHARED, scoped_id


class GoldConflict(GalahadError):
    """A second, different gold for a problem the catalog already holds (HTTP 409)."""


def _conflict_check(problems: Sequence[Problem], places: Sequence[str], keys: list[str | None], ids: list[str]):
    """The check `catalog.golds.add_checked` runs inside its write transaction, on the stored rows it locked."""

    def check(by_hash: dict[str, dict], by_key: dict[str, list[dict]]) -> None:
        for p, where, key, pid in zip(problems, places, keys, ids, strict=True):
            own = [by_hash[i] for i in dict.fromkeys((pid, p.hash)) if i in by_hash]
            for row in own + by_key.get(key or "", []):
                if not same_gold(row["answer"], p.answer):
                    how = "this text" if row in own else "the same mathematics (canonical key)"
                    raise GoldConflict(f"{where}: gold {p.answer[:60]!r} conflicts with gold {row['answer'][:60]!r} "
                                       f"already in the catalog for {how}: problem {row['id'][:12]} "
                                       f"{' '.join(row['text'].split())[:80]!r}")

    return check


def admit(catalog, problems: Sequence[Problem], places: Sequence[str], given_by: str, scope: str = SHARED) -> list[str]:
    """Check and add a batch of problems to `scope`'s memory; their ids. GalahadError (or GoldConflict)
    before any write. The conflict check against the catalog is atomic with the insert
    (`catalog.golds.add_checked`): of two conflicting submits at the same moment, exactly one is admitted."""
    checks = [check_gold(p.problem, p.answer) for p in problems]  # each text read once
    refuse_bad_golds(problems, places, checks)
    keys = [c.key for c in checks]
    ids = [scoped_id(p.problem, scope) for p in problems]
    catalog.problems.ensure_keys()  # rows added under an older key version are keyed before they are compared
    items = [dict(id=pid, text=p.problem, answer=p.answer, source=p.source, topic=p.topic, template=p.template,
                  external_id=p.id, gold_source=gold_source(c, f"{given_by}:{p.source}"[:300]))
             for p, c, pid in zip(problems, checks, ids, strict=True)]
    return catalog.golds.add_checked(items, _conflict_check(problems, places, keys, ids), scope=scope)
