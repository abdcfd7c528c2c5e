"""Bring a database to the latest schema with alembic, and check that it is there.

``medhelm init`` calls :func:`upgrade_database`; the app and every other command call
:func:`require_current_schema` first, so an old database gets a clear "run medhelm init" message rather
than a confusing SQL error.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from medhelm_core.db.engine import database_error
from medhelm_core.errors import DatabaseError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(engine: Engine) -> Config:
    """An alembic Config that migrates ``engine``'s database with our bundled scripts."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    return cfg


def head_revision() -> str:
    """The newest migration this version of the package knows."""
    script = ScriptDirectory(str(MIGRATIONS_DIR))
    head = script.get_current_head()
    assert head is not None, "no migrations bundled"
    return head


def current_revision(engine: Engine) -> str | None:
    """The schema revision the database is at, or None for an empty database."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade_database(engine: Engine, revision: str = "head") -> tuple[str | None, str]:
    """Upgrade the database to ``revision`` (default the latest); returns (before, after)."""
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
    except Exception as exc:  # connection refused, bad URL, unreadable file
        raise database_error(exc, "cannot open the database") from exc  # never the host, port or user
    if rev != head_revision():
        state = "empty" if rev is None else f"at revision {rev}"
        raise DatabaseError(f"the database is {state}, not at {head_revision()}: run `medhelm init`")
