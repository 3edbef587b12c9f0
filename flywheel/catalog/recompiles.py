"""`catalog.recompiles`: which artifacts another runtime made, and recording their rebuilt twins.

An artifact is a pure function of (model, runtime, parent chain, tokens, header extra), and its row holds
all but the runtime, so one made under another runtime is rebuilt from its row (`learn/recompile.py`) as a
new artifact whose `recompiled_from` names the original (every rebuild of one artifact is one lineage:
`coalesce(recompiled_from, id)`). Recording a twin is one transaction (its row, library entries and recall
rows), so a kill leaves it recompiled completely or not at all, and a rerun is idempotent.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import exists, func, select

from galahad.flywheel.catalog.artifacts import _artifact_row, _stored_header, store_location
from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import Fingerprints, Part, made_under, rows
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError, IntegrityError

ART, ENT, REC = TABLES["artifacts"], TABLES["library_entries"], TABLES["recalls"]


def lineage(table=ART):
    """The original an artifact descends from: itself, or what it was recompiled from."""
    return func.coalesce(table.c.recompiled_from, table.c.id)


class Recompiles(Part):
    def pending(self, fingerprints: Fingerprints) -> list[dict[str, Any]]:
        """Full rows of the artifacts of this model made under another runtime that have no twin under
        `fingerprints` yet, one per lineage (the original where it is here), parents first."""
        model, runtime = fingerprints
        t = ART.alias("t")
        twin = exists().where(t.c.model_fingerprint == model, t.c.runtime_fingerprint == runtime,
                              lineage(t) == lineage())
        stmt = (select(ART).where(ART.c.model_fingerprint == model, ART.c.runtime_fingerprint != runtime, ~twin)
                .order_by(ART.c.token_start, ART.c.recompiled_from.is_not(None), ART.c.id))
        found = self.read(stmt)
        seen: set[str] = set()
        return [r for r in found if not ((r["recompiled_from"] or r["id"]) in seen
                                         or seen.add(r["recompiled_from"] or r["id"]))]

    def other_models(self, fingerprints: Fingerprints) -> int:
        """Artifacts of another model: their token ids are that model's, so they are not rebuilt here."""
        return int(self.scalar(select(func.count()).select_from(ART)
                               .where(ART.c.model_fingerprint != fingerprints[0])) or 0)

    def twin(self, artifact_id: str, fingerprints: Fingerprints) -> str | None:
        """The artifact of `artifact_id`'s lineage made under `fingerprints` (itself, if it was), or None."""
        with self.engine.connect() as conn:
            root = conn.execute(select(lineage()).where(ART.c.id == artifact_id)).scalar()
            if root is None:
                return None
            return conn.execute(select(ART.c.id).where(made_under(fingerprints), lineage() == root)
                                .order_by(ART.c.id).limit(1)).scalar()

    def record(self, store, new_id: str, source: dict[str, Any], fingerprints: Fingerprints) -> str:
        """Record the twin `new_id` (its blob already durable in `store`) rebuilt from `source` (a full
        row): checked against the source (tokens, start, extra, its parent's twin) before one transaction
        writes its row, library entries and recall rows. Idempotent."""
        meta, size = _stored_header(store, new_id)
        parent = self.twin(source["parent_id"], fingerprints) if source["parent_id"] else None
        expect = (list(source["token_ids"]), source["token_start"], parent, dict(source["extra"] or {}), fingerprints)
        got = (list(meta.token_ids), meta.start, meta.parent, dict(meta.extra),
               (meta.model_fingerprint, meta.runtime_fingerprint))
        if got != expect:
            raise IntegrityError(f"recompiled artifact {new_id[:16]} is not a rebuild of {source['id'][:16]} under "
                                 "this runtime (tokens, start, parent, extra or fingerprints differ)")
        root = source["recompiled_from"] or source["id"]
        row = {**_artifact_row(new_id, meta, size, source["verification_id"], store_location(store), now()),
               "recompiled_from": root if new_id != root else None}
        with self.engine.connect() as conn:
            entries = rows(conn.execute(select(ENT).where(ENT.c.artifact_id == source["id"])))
            recalls = rows(conn.execute(select(REC.c.problem_id, REC.c.verification_id).distinct()
                                        .join(ART, ART.c.id == REC.c.artifact_id).where(lineage() == root)))
        with self.write() as conn:
            self.insert_ignore(conn, ART, [row])
            for e in entries:
                self._place(conn, e, new_id, parent)
            self.insert_ignore(conn, REC, [dict(problem_id=r["problem_id"], artifact_id=new_id,
                                                verification_id=r["verification_id"], created_at=now())
                                           for r in recalls])
        return new_id

    def _place(self, conn, entry: dict[str, Any], new_id: str, parent: str | None) -> None:
        """The twin's library entry: the chain its parent's twin sits in (one position on), or a new chain
        where the original starts one. Nothing when the parent's twin is not in that library."""
        lib, pos = entry["library"], entry["position"]
        if conn.execute(select(ENT.c.position).where(ENT.c.library == lib, ENT.c.artifact_id == new_id)).first():
            return  # already placed
        if pos == 0:
            top = conn.execute(select(func.max(ENT.c.chain_index)).where(ENT.c.library == lib)).scalar()
            chain = 0 if top is None else top + 1
        else:
            chain = conn.execute(select(ENT.c.chain_index).where(
                ENT.c.library == lib, ENT.c.artifact_id == parent, ENT.c.position == pos - 1)).scalar()
            if chain is None:
                return
        if not self.insert_ignore(conn, ENT, [dict(library=lib, chain_index=chain, position=pos,
                                                   artifact_id=new_id, added_at=now())]):
            raise GalahadError(f"library {lib!r} chain {chain} position {pos} is taken: cannot place {new_id[:16]}")
