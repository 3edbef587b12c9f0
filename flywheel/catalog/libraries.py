"""`catalog.libraries`: libraries, each a named sequence of chains of artifacts (`library_entries`).

An append must extend the chain's tail or start the next chain (a chain grafts only if each artifact
extends the previous one's KV). Each model/runtime sees its own chains, so an imported bundle's never
become the tail a deposit must extend. Appends happen in a deposit's transaction; the reads here find the
chain a graft uses and the tail a deposit extends.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, insert, select, text

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import ART_LIGHT, Fingerprints, Part, made_under, one
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import ChainConflict, GalahadError
from galahad.flywheel.problems.scope_ids import library_scope

ART, LIB, ENT = (TABLES[t] for t in ("artifacts", "libraries", "library_entries"))


class Libraries(Part):
    def ensure(self, name: str, topic: str | None = None, template: str | None = None) -> str:
        """Create the library if it does not exist yet; returns its name."""
        with self.write() as conn:
            self._ensure(conn, name, topic, template)
        return name

    def _ensure(self, conn: Connection, name: str, topic: str | None, template: str | None) -> None:
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise GalahadError("a library name must be 1 to 200 characters")
        self.insert_ignore(conn, LIB, [dict(name=name, topic=topic, template=template, created_at=now(),
                                            scope=library_scope(name))])

    def append(self, conn: Connection, name: str, artifact_id: str, new_chain: bool) -> tuple[int, int]:
        """In `conn`'s write transaction: append a recorded artifact to the library's current chain (or, with
        `new_chain`, start the next one); returns (chain_index, position). Appending it again is a no-op."""
        self._ensure(conn, name, None, None)
        # Serialize appends per library (PostgreSQL row lock; SQLite already holds the write lock).
        conn.execute(select(LIB.c.name).where(LIB.c.name == name).with_for_update())
        parent = conn.execute(select(ART.c.parent_id, ART.c.model_fingerprint, ART.c.runtime_fingerprint)
                              .where(ART.c.id == artifact_id)).first()
        if parent is None:
            raise GalahadError(f"unknown artifact {artifact_id[:16]}")
        here = conn.execute(select(ENT.c.chain_index, ENT.c.position)
                            .where(ENT.c.library == name, ENT.c.artifact_id == artifact_id)).first()
        if here is not None:
            return (here.chain_index, here.position)  # idempotent
        # Each model/runtime sees its own chains of a library: another fingerprint's chains (an imported
        # bundle's) never become the tail a deposit must extend.
        last = conn.execute(select(ENT.c.chain_index, ENT.c.position, ENT.c.artifact_id)
                            .join(ART, ART.c.id == ENT.c.artifact_id)
                            .where(ENT.c.library == name, ART.c.model_fingerprint == parent.model_fingerprint,
                                   ART.c.runtime_fingerprint == parent.runtime_fingerprint)
                            .order_by(ENT.c.chain_index.desc(), ENT.c.position.desc()).limit(1)).first()
        top = conn.execute(select(func.max(ENT.c.chain_index)).where(ENT.c.library == name)).scalar()
        if last is None:
            chain, pos = (0 if top is None else top + 1), 0
        elif new_chain:
            chain, pos = top + 1, 0
        elif parent.parent_id != last.artifact_id:
            # A chain is graftable only if each artifact extends the previous one's KV.
            raise ChainConflict(
                f"artifact {artifact_id[:16]} does not extend library {name!r}: its parent is "
                f"{(parent.parent_id or 'none')[:16]}, the tail is {last.artifact_id[:16]}"
            )
        else:
            chain, pos = last.chain_index, last.position + 1
        conn.execute(insert(ENT).values(library=name, chain_index=chain, position=pos,
                                        artifact_id=artifact_id, added_at=now()))
        return (chain, pos)

    def _chain_index(self, conn, name: str, chain_index: int | None, fingerprints: Fingerprints | None = None
                     ) -> int | None:
        if chain_index is not None:
            return chain_index
        stmt = select(func.max(ENT.c.chain_index)).where(ENT.c.library == name)
        if fingerprints is not None:
            stmt = stmt.join(ART, ART.c.id == ENT.c.artifact_id).where(made_under(fingerprints))
        return conn.execute(stmt).scalar()

    def chain(self, name: str, chain_index: int | None = None,
              fingerprints: Fingerprints | None = None) -> list[str]:
        """Artifact ids of one chain in order (default: the current, highest-numbered chain). With
        `fingerprints` (model, runtime): the current chain among those made under them, and only its
        artifacts made under them: what a graft may use (another model's chains never block it)."""
        if fingerprints is not None and chain_index is None:  # the current chain: one statement
            found = self.first_chain([name], fingerprints)
            return found[1] if found else []
        with self.engine.connect() as conn:
            idx = self._chain_index(conn, name, chain_index, fingerprints)
            if idx is None:
                return []
            stmt = select(ENT.c.artifact_id).where(ENT.c.library == name, ENT.c.chain_index == idx)
            if fingerprints is not None:
                stmt = stmt.join(ART, ART.c.id == ENT.c.artifact_id).where(made_under(fingerprints))
            return list(conn.execute(stmt.order_by(ENT.c.position)).scalars())

    def first_chain(self, names: list[str], fingerprints: Fingerprints) -> tuple[str, list[str]] | None:
        """The first of `names` (in that order) holding a chain made under `fingerprints`: (name, the
        artifact ids of its current chain in order, those made under them; what `chain(name,
        fingerprints=...)` returns); None when none does. One statement for all the names (what
        routing a new problem asks of its template's and its topic's libraries)."""
        if not names:
            return None
        heads = (select(ENT.c.library, func.max(ENT.c.chain_index).label("idx"))
                 .join(ART, ART.c.id == ENT.c.artifact_id)
                 .where(ENT.c.library.in_(names), made_under(fingerprints))
                 .group_by(ENT.c.library).subquery())
        stmt = (select(ENT.c.library, ENT.c.artifact_id)
                .join(heads, (heads.c.library == ENT.c.library) & (heads.c.idx == ENT.c.chain_index))
                .join(ART, ART.c.id == ENT.c.artifact_id).where(made_under(fingerprints))
                .order_by(ENT.c.library, ENT.c.position))
        found: dict[str, list[str]] = {}
        with self.engine.connect() as conn:
            for library, artifact_id in conn.execute(stmt):
                found.setdefault(library, []).append(artifact_id)
        return next(((n, found[n]) for n in names if found.get(n)), None)

    def slot(self, name: str, chain_index: int, position: int) -> str | None:
        """The artifact at one position of one chain of a library, or None."""
        return self.scalar(select(ENT.c.artifact_id).where(
            ENT.c.library == name, ENT.c.chain_index == chain_index, ENT.c.position == position))

    def tail(self, name: str, chain_index: int | None = None,
             fingerprints: Fingerprints | None = None) -> dict[str, Any] | None:
        """The last artifact of a chain (default: the current chain) with its chain_index and position.
        With `fingerprints` (model, runtime): of the current chain made under them (what a deposit extends)."""
        with self.engine.connect() as conn:
            idx = self._chain_index(conn, name, chain_index, fingerprints)
            if idx is None:
                return None
            stmt = (select(*ART_LIGHT, ENT.c.chain_index, ENT.c.position).join(ENT, ENT.c.artifact_id == ART.c.id)
                    .where(ENT.c.library == name, ENT.c.chain_index == idx))
            if fingerprints is not None:
                stmt = stmt.where(made_under(fingerprints))
            return one(conn.execute(stmt.order_by(ENT.c.position.desc()).limit(1)))

    def all(self) -> list[dict[str, Any]]:
        """Each library with chains, artifacts, stored_tokens and bytes (the `library_tokens` view)."""
        return self.read(text("SELECT * FROM library_tokens ORDER BY library"))
