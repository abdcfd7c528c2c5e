"""Shared fixtures: every database test runs on a fresh SQLite file and on the PostgreSQL server.

PostgreSQL comes from MEDHELM_TEST_POSTGRES_URL (``.ci/run`` sets it). Each test gets its own schema, so
tests never see each other's rows. Outside CI the PostgreSQL variants are skipped when the URL is unset;
in CI (CI=true) a missing URL is an error, so the suite cannot pass without PostgreSQL by accident.
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
from sqlalchemy.engine import Engine

from medhelm_core.db import make_engine
from medhelm_core.schema import upgrade_database

# Property tests draw the same examples on every run, so CI is reproducible and never fails by chance;
# again. MEDHELM_HYPOTHESIS_PROFILE=explore searches afresh (it finds the ICC(2) interval instability that
# tests/test_agreement_icc.py marks as a known failure).
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


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on a fresh database already at the latest schema."""
    eng = make_engine(database_url)
    upgrade_database(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    """An SQLite-only engine at the latest schema, for tests that are about the app, not the database."""
    eng = make_engine(f"sqlite:///{tmp_path / 'app.db'}")
    upgrade_database(eng)
    yield eng
    eng.dispose()


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
