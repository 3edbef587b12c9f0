"""Engines for the catalog: SQLite (embedded default) or any SQLAlchemy URL, migrated to head at start-up.

SQLite gets WAL (readers never block the writer), a busy timeout (writers queue instead of failing with
"database is locked"), foreign keys, and `BEGIN IMMEDIATE` for write transactions: a deferred transaction
that reads first and writes later can hit SQLITE_BUSY without waiting, whatever the busy timeout says.
PostgreSQL goes through psycopg 3, with two pools: transactions (writes, multi-statement work) on the
catalog's engine, and single-statement reads on an autocommit reader (`reader_engine`): under READ
COMMITTED each statement has its own snapshot anyway, and autocommit spares a read the BEGIN and ROLLBACK
round trips. A pooled PostgreSQL connection idle for `PING_IDLE_S` is pinged on checkout (a server that
restarted is noticed before the statement, not by it); a busy pool is not pinged on every checkout.
Every connection failure becomes one GalahadError line.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError, NoSuchModuleError, SQLAlchemyError

import galahad.migrations
from galahad.flywheel.errors import GalahadError

MIGRATIONS_DIR = Path(galahad.migrations.__file__).resolve().parent
BUSY_TIMEOUT_MS = 60_000
WRITE = "galahad_write"  # execution option: this connection's transactions will write
_PG_MIGRATION_LOCK = 0x6A1A_4AD0  # advisory lock key: one migrator at a time on a shared server


def parse_url(url: str) -> URL:
    """A SQLAlchemy URL; bare `postgresql://` means psycopg 3, the driver Galahad ships with."""
    try:
        u = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise GalahadError(f"not a database URL: {url[:120]!r}") from exc
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    return u


def redact(url: str | URL) -> str:
    u = url if isinstance(url, URL) else parse_url(url)
    return u.render_as_string(hide_password=True)


def _first_line(exc: BaseException) -> str:
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip().splitlines()
    return text[0] if text else type(inner).__name__


PING_IDLE_S = 5.0  # a pooled PostgreSQL connection unused this long is pinged when it is checked out


def make_engine(url: str, autocommit: bool = False) -> Engine:
    """An engine with Galahad's connection settings; no connection is made yet. `autocommit`: the
    PostgreSQL reader's (`reader_engine`), never one that writes."""
    u = parse_url(url)
    kwargs: dict = {}
    if u.get_backend_name() == "sqlite":
        db = u.database
        if db and db != ":memory:" and not db.startswith("file:") and not Path(db).parent.is_dir():
            # Refuse rather than create folders: a mistyped URL must not scatter files.
            raise GalahadError(f"cannot open catalog {redact(u)}: folder {Path(db).parent} does not exist")
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_MS / 1000}
    elif u.get_backend_name() == "postgresql":
        kwargs["connect_args"] = {"connect_timeout": 10, "application_name": "galahad"}
        if autocommit:
            kwargs["isolation_level"] = "AUTOCOMMIT"
    try:
        engine = create_engine(u, **kwargs)
    except (NoSuchModuleError, ArgumentError, ImportError) as exc:
        raise GalahadError(f"unsupported catalog URL {redact(u)}: {_first_line(exc)}") from exc
    if engine.dialect.name == "sqlite":
        _sqlite_setup(engine)
    elif engine.dialect.name == "postgresql":
        _ping_when_idle(engine)
    return engine


def reader_engine(engine: Engine, url: str) -> Engine:
    """The engine single-statement reads use: PostgreSQL's autocommit pool beside `engine`; SQLite's own
    engine (its read transaction is in-process and holds one WAL snapshot)."""
    return make_engine(url, autocommit=True) if engine.dialect.name == "postgresql" else engine


def _ping_when_idle(engine: Engine) -> None:
    """SQLAlchemy's pessimistic disconnect check (`pool_pre_ping`), only for a connection idle for
    `PING_IDLE_S`: a dead one is replaced before its statement runs."""

    @event.listens_for(engine, "checkin")
    def _checkin(_dbapi_conn, record) -> None:
        record.info["checked_in"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_conn, record, _proxy) -> None:
        last = record.info.get("checked_in")
        if last is None or time.monotonic() - last < PING_IDLE_S:
            return  # a new connection, or one used a moment ago
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:  # noqa: BLE001 (any failure of the ping means: not this connection)
            raise DisconnectionError() from exc
        if not alive:
            raise DisconnectionError()


def _wal(cur) -> None:
    """Put the database in WAL mode (once per file: the mode is stored in it).

    Switching modes needs the exclusive lock, and SQLite answers SQLITE_BUSY at once, without calling the
    busy handler, when processes race to open a new file: retry for the busy timeout, then fail.
    """
    if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's implicit BEGIN is deferred).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _wal(cur)
        # WAL + NORMAL: a commit survives a process kill; after power loss the newest commits may roll
        # back, which can only orphan a blob (collectable), never leave a row without its blob.
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that intends to write (SQLite: takes the write lock up front, waiting if busy)."""
    with engine.connect() as conn:
        conn = conn.execution_options(**{WRITE: True})
        with conn.begin():
            yield conn


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        cfg.set_main_option("sqlalchemy.url", redact(url).replace("%", "%%"))
    return cfg


@functools.cache
def script_heads() -> frozenset[str]:
    """The migration scripts' head revisions (parsing the scripts costs ~0.1 s: once per process)."""
    return frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


def upgrade(engine: Engine) -> None:
    """Bring the schema to head; safe when many processes start at once against a fresh database."""
    cfg = alembic_config()
    heads = script_heads()
    with engine.connect() as conn:
        current = set(MigrationContext.configure(conn).get_current_heads())
        conn.rollback()
    if current == heads:
        return
    with write_transaction(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
        cfg.attributes["connection"] = conn
        try:
            command.upgrade(cfg, "head")
        except CommandError as exc:
            raise GalahadError(f"catalog schema is not one this Galahad knows (newer version?): {exc}") from exc


def _sqlite_file(u: URL) -> str | None:
    """The file a SQLite URL names, or None for an in-memory database (`sqlite://`, `:memory:`)."""
    db = u.database
    if not db or db == ":memory:" or "mode=memory" in db:
        return None
    return db[5:].split("?", 1)[0] if db.startswith("file:") else db


def require_existing(url: str) -> None:
    """Refuse, before connecting (SQLite creates files on connect), a catalog that cannot exist yet."""
    u = parse_url(url)
    if u.get_backend_name() == "sqlite":
        db = _sqlite_file(u)
        if db is None:
            raise GalahadError(f"no catalog at {redact(u)}: an in-memory database is always empty")
        if not Path(db).is_file():
            raise GalahadError(f"no catalog at {redact(u)} (nothing deposited yet, or a wrong --catalog, "
                               "GALAHAD_CATALOG or --data)")


def has_galahad_tables(engine: Engine) -> bool:
    """Whether the database holds a Galahad schema (its migration version table with a revision)."""
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_heads()
        conn.rollback()
    return bool(current)


def open_engine(url: str, migrate: bool = True, create: bool = True) -> Engine:
    """Connect (failing in one line if the database is unreachable) and migrate to head.

    With `create=False` the catalog must already exist and hold Galahad's tables: only the commands that
    produce catalogs (`run`, `serve`, `catalog import`) create one; a mistyped URL for any other command is
    refused instead of silently becoming an empty catalog (which gc would read as "every blob is an orphan").
    """
    if not create:
        require_existing(url)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        if not create and not has_galahad_tables(engine):
            raise GalahadError(f"no catalog at {redact(url)}: the database has no Galahad tables")
        if migrate:
            upgrade(engine)
    except (DBAPIError, SQLAlchemyError) as exc:
        engine.dispose()
        raise GalahadError(f"cannot open catalog {redact(url)}: {_first_line(exc)}") from exc
    except BaseException:
        engine.dispose()
        raise
    return engine


def now() -> datetime:
    """Naive UTC, microseconds: what both backends store and compare identically."""
    return datetime.now(UTC).replace(tzinfo=None)
