"""Shared fixtures: every database test runs on a fresh SQLite file and on the PostgreSQL server.

PostgreSQL comes from MEDHELM_TEST_POSTGRES_URL (``.ci/run`` sets it). Each test gets its own schema (an
empty one in the test database for ``database_url``; for ``engine``, schema ``medhelm`` in a database of its
own, copied from a template the migrations built once), so tests never see each other's rows. Outside CI
the PostgreSQL variants are skipped when the URL is unset; in CI (CI=true) a missing URL is an error, so the
suite cannot pass without PostgreSQL by accident.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from medhelm_core.db.engine import make_engine
from medhelm_core.db.migrate import upgrade_database
from medhelm_core.demo import seed_demo

# Property tests draw the same examples on every run, so CI is reproducible and never fails by chance;
# again. MEDHELM_HYPOTHESIS_PROFILE=explore searches afresh (it finds the ICC(2) interval instability that
# tests/agreement/test_agreement_icc.py marks as a known failure).
hypothesis_settings.register_profile("ci", derandomize=True)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("MEDHELM_HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
SHARED_RATINGS = REPO.parent / "shared" / "data" / "medhelm_validation" / "ratings.csv"
BUNDLED_RATINGS = REPO / "annotations" / "medhelm_validation" / "ratings.csv"
POSTGRES_ENV = "MEDHELM_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def medhelm_ratings_csv() -> Path:
    """The MedHELM validation ratings (the bundled copy, identical to the shared one)."""
    return BUNDLED_RATINGS


def _postgres_url() -> str | None:
    url = os.environ.get(POSTGRES_ENV)
    if not url and os.environ.get("CI") == "true":
        pytest.fail(f"{POSTGRES_ENV} is not set in CI; .ci/run must provide PostgreSQL")
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty database: an SQLite file, or a fresh schema on the PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'medhelm.db'}"
        return
    base = _postgres_url()
    if not base:
        pytest.skip(f"{POSTGRES_ENV} not set")
    base = base.replace("postgresql://", "postgresql+psycopg://", 1)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


PG_SCHEMA = "medhelm"


def _pg_url(base: str, database: str) -> str:
    """``base`` on another database, its search_path pinned to :data:`PG_SCHEMA` (as a team deployment may)."""
    url = make_url(base).set(database=database, query={"options": f"-csearch_path={PG_SCHEMA}"})
    return url.render_as_string(hide_password=False)


def _pg_base() -> str | None:
    base = _postgres_url()
    return base.replace("postgresql://", "postgresql+psycopg://", 1) if base else None


def _pg_admin(statement: str) -> None:
    admin = create_engine(_pg_base(), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(statement))
    admin.dispose()


def _checkpointed(eng: Engine) -> None:
    """Move an SQLite database's WAL into its main file, so that copying the file alone copies everything."""
    with eng.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    eng.dispose()


# Templates: a database brought to the latest schema by the migrations once (and one with the demo seeded);
# each test gets a copy: a file copy for SQLite, CREATE DATABASE ... TEMPLATE for PostgreSQL. Ten times
# quicker than migrating (and seeding) per test; tests/db/test_schema.py and tests/importers/test_demo.py test those.


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "medhelm.db"
    eng = make_engine(f"sqlite:///{path}")
    upgrade_database(eng)
    _checkpointed(eng)
    return path


@pytest.fixture(scope="session")
def sqlite_demo_template(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Path:
    path = tmp_path_factory.mktemp("demo-template") / "demo.db"
    shutil.copyfile(sqlite_template, path)
    eng = make_engine(f"sqlite:///{path}")
    seed_demo(eng)
    _checkpointed(eng)
    return path


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str | None]:
    base = _pg_base()
    if not base:
        yield None
        return
    name = f"tmpl_{uuid.uuid4().hex[:12]}"
    _pg_admin(f'CREATE DATABASE "{name}"')
    try:
        fresh = create_engine(make_url(base).set(database=name))
        with fresh.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{PG_SCHEMA}"'))
        fresh.dispose()  # a template must have no connection left when it is copied
        eng = make_engine(_pg_url(base, name))
        upgrade_database(eng)
        eng.dispose()
        yield name
    finally:
        _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_demo_template(postgres_template: str | None) -> Iterator[str | None]:
    if postgres_template is None:
        yield None
        return
    name = f"tmpl_demo_{uuid.uuid4().hex[:12]}"
    _pg_admin(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"')
    try:
        eng = make_engine(_pg_url(_pg_base(), name))
        seed_demo(eng)
        eng.dispose()
        yield name
    finally:
        _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _copy_of(database_url: str, sqlite_source: Path, pg_template: str | None) -> Iterator[Engine]:
    """An engine on a copy of a template: at ``database_url``'s file for SQLite, a new database for PostgreSQL."""
    if database_url.startswith("sqlite:///"):
        shutil.copyfile(sqlite_source, database_url.removeprefix("sqlite:///"))
        eng = make_engine(database_url)
        yield eng
        eng.dispose()
        return
    name = f"t_{uuid.uuid4().hex[:12]}"
    _pg_admin(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    eng = make_engine(_pg_url(_pg_base(), name))
    try:
        yield eng
    finally:
        eng.dispose()
        _pg_admin(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def engine(database_url: str, sqlite_template: Path, postgres_template: str | None) -> Iterator[Engine]:
    """An engine on a fresh database already at the latest schema."""
    yield from _copy_of(database_url, sqlite_template, postgres_template)


@pytest.fixture
def demo_engine(database_url: str, sqlite_demo_template: Path, postgres_demo_template: str | None) -> Iterator[Engine]:
    """An engine on a fresh database with the demo seeded (``medhelm demo --no-start``), on both databases."""
    yield from _copy_of(database_url, sqlite_demo_template, postgres_demo_template)


@pytest.fixture
def sqlite_engine(tmp_path: Path, sqlite_template: Path) -> Iterator[Engine]:
    """An SQLite-only engine at the latest schema, for tests that are about the app, not the database."""
    yield from _copy_of(f"sqlite:///{tmp_path / 'app.db'}", sqlite_template, None)


@pytest.fixture
def sqlite_demo_engine(tmp_path: Path, sqlite_demo_template: Path) -> Iterator[Engine]:
    """An SQLite-only engine with the demo seeded, for tests that are about the app, not the database."""
    yield from _copy_of(f"sqlite:///{tmp_path / 'app.db'}", sqlite_demo_template, None)


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium through Playwright (never `playwright install`); missing is an error in CI."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; .ci/run installs it")
        pytest.skip("chromium not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        yield chromium
        chromium.close()
