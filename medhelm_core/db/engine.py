"""Engines and sessions. No engine is created at import: callers build one from a URL and pass
sessions explicitly, so tests, the CLI and the pages can each point at their own database.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, create_engine

from medhelm_core.errors import DatabaseError
from medhelm_core.settings import database_url


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001 - DBAPI callback signature
    # WAL lets the app read while a clinician's rating or a jury verdict is written; foreign keys are
    # off by default in SQLite and we rely on them to keep ratings attached to real items.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def make_engine(url: str | None = None) -> Engine:
    """Create an engine for ``url`` (or the configured default) with our connection settings.

    SQLite files get WAL mode, foreign keys and a busy timeout; their folder is created if missing.
    """
    resolved = database_url(url)
    parsed = make_url(resolved)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(resolved, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(resolved, pool_pre_ping=True)


@lru_cache(maxsize=8)
def shared_engine(url: str) -> Engine:
    """One engine per URL for long-lived processes (the Streamlit app), so pools are reused."""
    return make_engine(url)


@contextmanager
def transaction(engine: Engine) -> Iterator[Session]:
    """A session whose work is committed as one transaction, or rolled back whole on any error."""
    try:
        with Session(engine, expire_on_commit=False) as session:
            with session.begin():
                yield session
    except OperationalError as exc:
        raise DatabaseError(f"database error: {exc.orig}") from exc


def describe_url(url: str) -> str:
    """The URL with any password hidden, for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)
