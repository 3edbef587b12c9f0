"""Alembic environment for the catalog: runs on the caller's connection (start-up upgrade) or on a URL.

Galahad applies migrations itself (`galahad.flywheel.catalog.db.upgrade`), passing its open connection in
`config.attributes["connection"]`, so no alembic.ini is needed. For maintainers, a new revision:
    python -c "from galahad.flywheel.catalog.db import alembic_config as c; from alembic import command; \
               command.revision(c('sqlite:////tmp/x.sqlite3'), 'message', autogenerate=True)"
(after upgrading that database to head), then review the generated file by hand.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from galahad.flywheel.catalog.schema import Base

config = context.config
target_metadata = Base.metadata


def _configure(**kwargs) -> None:
    # Batch mode: SQLite cannot ALTER most things, so Alembic rebuilds the table (harmless elsewhere).
    context.configure(target_metadata=target_metadata, render_as_batch=True, compare_type=True, **kwargs)


def _run_on(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_on(connection)
        return
    from sqlalchemy import create_engine  # run standalone: Galahad itself always passes its connection

    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    try:
        with engine.begin() as conn:
            _run_on(conn)
    finally:
        engine.dispose()


def run_offline() -> None:
    _configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
