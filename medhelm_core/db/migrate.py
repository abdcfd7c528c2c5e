"""Bring a database to the latest schema with alembic, and check that it is there.

``medhelm init`` calls :func:`upgrade_database`; the app and every other command call
:func:`require_current_schema` first, so an old database gets a clear "run medhelm init" message rather
than a confusing SQL error.

The check reads alembic's version table with SQLAlchemy and compares it with :data:`HEAD_REVISION`, so the app's
server, which only checks, never imports alembic (12 MB of its resident memory, measured); alembic is imported
where a database is upgraded. ``tests/db/test_migrate.py`` checks that :data:`HEAD_REVISION` is alembic's head of
the bundled scripts: a new migration fails there until it is written here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from medhelm_core.db.engine import database_error
from medhelm_core.errors import DatabaseError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
#: the newest migration this version of the package knows (the last script of ``migrations/versions``)
HEAD_REVISION = "0014"
#: alembic's version table (its default name)
VERSION_TABLE = "alembic_version"


def alembic_config(engine: Engine) -> Config:
    """An alembic Config that migrates ``engine``'s database with our bundled scripts."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    return cfg


def head_revision() -> str:
    """The newest migration this version of the package knows."""
    return HEAD_REVISION


def current_revision(engine: Engine) -> str | None:
    """The schema revision the database is at, or None for an empty database (no version table, or no row)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return None
        rows = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(rows) > 1:  # alembic's branches: this project's history is one line
        raise DatabaseError(f"the database is at several revisions at once ({', '.join(sorted(rows))})")
    return rows[0] if rows else None


def upgrade_database(engine: Engine, revision: str = "head") -> tuple[str | None, str]:
    """Upgrade the database to ``revision`` (default the latest); returns (before, after)."""
    from alembic import command

    before = current_revision(engine)
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    return before, current_revision(engine) or ""


def require_current_schema(engine: Engine) -> None:
    """Raise :class:`DatabaseError` unless the database is at the latest revision."""
    try:
        rev = current_revision(engine)
    except DatabaseError:
        raise
    except Exception as exc:  # connection refused, bad URL, unreadable file
        raise database_error(exc, "cannot open the database") from exc  # never the host, port or user
    if rev != head_revision():
        state = "empty" if rev is None else f"at revision {rev}"
        raise DatabaseError(f"the database is {state}, not at {head_revision()}: run `medhelm init`")
