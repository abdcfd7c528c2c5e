"""Alembic environment: migrates the database given in the alembic config (set by medhelm_core.db.migrate)."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

from medhelm_core.db import models  # noqa: F401 - registers the tables on SQLModel.metadata
from medhelm_core.db.engine import make_engine

config = context.config
target_metadata = SQLModel.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


def _run(connection) -> None:  # noqa: ANN001 - alembic passes a Connection
    # render_as_batch lets ALTER-style migrations work on SQLite, which cannot alter columns in place.
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
