"""Engines and sessions. No engine is created at import: callers build one from a URL and pass
sessions explicitly, so tests, the CLI and the pages can each point at their own database.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlmodel import Session, create_engine

from medhelm_core.errors import DatabaseError
from medhelm_core.settings import database_url

log = logging.getLogger(__name__)

#: what anyone (signed in or not) is told when the server cannot be reached: no host, port or user name
UNREACHABLE = ("the database cannot be reached: its server may be down, or the address or credentials in "
               "MEDHELM_DATABASE_URL may be wrong; the details are in the app's log")
# The texts of libpq and psycopg for "cannot connect at all" (refused, unknown host, timeout, no such role or
# database, a wrong password): each names the host, the port or the user, so none is shown as it is.
_CANNOT_CONNECT = re.compile(
    r"connection failed|connection to server|could not connect|failed to resolve host|could not translate host"
    r"|connection refused|timeout expired|password authentication failed|no password supplied"
    r"|role \S+ does not exist|database \S+ does not exist|no pg_hba\.conf entry",
    re.IGNORECASE,
)
# What else could name where the server is or who connects, in an error from an open connection.
_WHERE_AND_WHO = re.compile(
    r"""\b(?:server at|host|port|user|role)\b\s*[=:]?\s*(?:"[^"]*"|'[^']*'|[^\s,;:)]+)""",
    re.IGNORECASE,
)


def database_error(exc: BaseException, context: str = "database error") -> DatabaseError:
    """The :class:`DatabaseError` to show for ``exc``, which never names the server's host, port or user.

    The page before sign-in shows it to anyone, so a server that cannot be reached reads as just that
    (:data:`UNREACHABLE`), and any other driver message loses the host, port and user it quotes. The full
    text goes to the log, for whoever runs the server.

    Examples
    --------
    >>> refused = Exception('connection to server at "10.0.0.5", port 5432 failed: Connection refused')
    >>> str(database_error(OperationalError("SELECT 1", {}, refused)))[:34]
    'the database cannot be reached: it'
    >>> str(database_error(OperationalError("SELECT 1", {}, Exception('lost host "10.0.0.5" port 6543'))))
    'database error: lost host ... port ...'
    """
    log.warning("%s: %s", context, exc)
    if isinstance(exc, ArgumentError):
        return DatabaseError(f"{context}: the database URL (MEDHELM_DATABASE_URL) is not a valid URL")
    text = str(exc.orig) if isinstance(exc, DBAPIError) and exc.orig is not None else str(exc)
    if _CANNOT_CONNECT.search(text):
        return DatabaseError(UNREACHABLE)
    return DatabaseError(f"{context}: {_WHERE_AND_WHO.sub(lambda m: m.group(0).split()[0] + ' ...', text)}")


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
        raise database_error(exc) from exc


def hold_write_lock(session: Session) -> None:
    """Take the database's write lock now, until the transaction ends: what follows reads what it then writes.

    Python's sqlite3 opens an SQLite transaction only at the first INSERT, UPDATE or DELETE, so the reads a
    write is computed from (the next revision number, a request already seen) are each a transaction of their
    own: another writer, or a restore that replaces the whole database, could commit in between, and the
    write would then rest on rows that are no longer there (a restore during ratings left revision gaps).
    On SQLite this begins the transaction with ``BEGIN IMMEDIATE`` (waiting up to the busy timeout for the
    lock), unless one is open already, which then holds the lock since its first write. PostgreSQL needs
    nothing: a transaction's first read already takes the table locks that a restore must wait for.
    """
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        return
    if not connection.connection.driver_connection.in_transaction:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def describe_url(url: str) -> str:
    """The URL with any password hidden, for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)
