"""The schema check the app and the commands run first, without alembic: the bundled scripts' head, and the
revision a database is at, as alembic reads them."""

from __future__ import annotations

import pytest
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from medhelm_core.db.engine import make_engine
from medhelm_core.db.migrate import (
    HEAD_REVISION,
    MIGRATIONS_DIR,
    current_revision,
    require_current_schema,
    upgrade_database,
)
from medhelm_core.errors import DatabaseError


def test_the_head_revision_is_alembics_head_of_the_bundled_scripts():
    assert HEAD_REVISION == ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


def _alembic_reads(engine) -> str | None:  # noqa: ANN001
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def test_the_revision_read_is_alembics_on_an_empty_an_older_and_a_current_database(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'm.db'}")
    assert current_revision(engine) is None is _alembic_reads(engine)
    with pytest.raises(DatabaseError, match="the database is empty, not at .*run `medhelm init`"):
        require_current_schema(engine)
    upgrade_database(engine, "0013")
    assert current_revision(engine) == "0013" == _alembic_reads(engine)
    with pytest.raises(DatabaseError, match="at revision 0013, not at 0014"):
        require_current_schema(engine)
    assert upgrade_database(engine) == ("0013", HEAD_REVISION)
    assert current_revision(engine) == HEAD_REVISION == _alembic_reads(engine)
    require_current_schema(engine)


def test_a_version_table_without_a_row_is_an_empty_database_and_two_rows_are_refused(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'm.db'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
    assert current_revision(engine) is None is _alembic_reads(engine)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO alembic_version VALUES ('0013'), ('0014')"))
    with pytest.raises(DatabaseError, match="several revisions at once"):
        require_current_schema(engine)
