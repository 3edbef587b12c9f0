"""What every part of the catalog shares: `Part` (one concept's rows, on its catalog's engine), row helpers.

A part holds no connection or state: it reads through its catalog's pooled engine and writes through
`Catalog.write()` and `Catalog.insert_ignore`. Rows come back as plain dicts (datetimes naive UTC).
"""

from __future__ import annotations

import re
import uuid
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, Table, and_, exists, select

from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.scope_ids import SHARED, check_scope

if TYPE_CHECKING:
    from galahad.flywheel.catalog.catalog import Catalog  # cycle: catalog.catalog imports part

ART = TABLES["artifacts"]
ART_LIGHT = [c for c in ART.c if c.name != "token_ids"]  # listings leave out token_ids (up to tens of KB a row)
PREFIX = re.compile(r"^[0-9a-f]{8,64}$")

Fingerprints = tuple[str, str]  # (model fingerprint, runtime fingerprint) of the running engine


class Part:
    """One concept's rows in a catalog (`catalog.problems`, `catalog.runs`, ...), sharing its engine."""

    def __init__(self, catalog: Catalog):
        self._catalog = catalog

    @property
    def engine(self) -> Engine:
        """What a part's reads connect to: the catalog's reader (`db.reader_engine`). Writes go through
        `write()`, a transaction on the catalog's engine."""
        return self._catalog.reader

    def write(self) -> AbstractContextManager[Connection]:
        return self._catalog.write()

    def insert_ignore(self, conn: Connection, table: Table, rows: list[dict[str, Any]]) -> int:
        return self._catalog.insert_ignore(conn, table, rows)

    def read(self, stmt) -> list[dict[str, Any]]:
        """`stmt`'s rows, read on a connection of `engine` (the reader)."""
        with self.engine.connect() as conn:
            return rows(conn.execute(stmt))

    def read_one(self, stmt) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            return one(conn.execute(stmt))

    def scalar(self, stmt) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(stmt).scalar()

    def column(self, stmt) -> list[Any]:
        """The first column of `stmt`'s rows."""
        with self.engine.connect() as conn:
            return list(conn.execute(stmt).scalars())

    def __repr__(self) -> str:
        return f"{self._catalog!r}.{type(self).__name__.lower()}"


def rows(result) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in result]


def one(result) -> dict[str, Any] | None:
    r = result.first()
    return None if r is None else dict(r._mapping)


def require(conn: Connection, table: Table, key: str, what: str) -> None:
    """Refuse a reference to a row that does not exist ("unknown <what> <key>")."""
    pk = next(iter(table.primary_key.columns))
    if not conn.execute(select(exists().where(pk == key))).scalar():
        raise GalahadError(f"unknown {what} {str(key)[:80]!r}")


def id_prefix(col, prefix: str):
    # A range the primary-key index can serve; hex ids sort between `prefix` and `prefix + "g"`.
    return and_(col >= prefix, col < prefix + "g", col.startswith(prefix))


def made_under(fingerprints: Fingerprints):
    """Artifacts made by that model under that runtime: the only ones a graft or an extension may use."""
    model, runtime = fingerprints
    return and_(ART.c.model_fingerprint == model, ART.c.runtime_fingerprint == runtime)


def visible(table: Table, scope: str | None) -> list:
    """WHERE clauses: the rows of `table` that `scope` sees (its own and shared); None: every row (the
    admin's and the single-user service's view)."""
    if scope is None:
        return []
    check_scope(scope)
    return [table.c.scope == SHARED] if scope == SHARED else [table.c.scope.in_((scope, SHARED))]


def storable(text: str) -> str:
    """PostgreSQL text cannot hold NUL; a sampled model output can. Replaced, so both backends agree."""
    return text.replace("\x00", "\ufffd")


def new_id() -> str:
    return uuid.uuid4().hex
