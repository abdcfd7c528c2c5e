"""A database that cannot be reached: anyone, before signing in, is told just that, never the server's host,
port or the user the app connects as (issue 22); the details go to the log for whoever runs the server."""

from __future__ import annotations

import logging

import pytest
from conftest import REPO
from streamlit.testing.v1 import AppTest
from support.helpers import free_port

from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.migrate import require_current_schema
from medhelm_core.errors import DatabaseError

USER, HOST = "calibrate_svc", "127.0.0.1"


@pytest.fixture
def nowhere() -> tuple[str, str]:
    port = str(free_port())  # nothing listens there
    return f"postgresql+psycopg://{USER}:pw-{port}@{HOST}:{port}/medhelm", port


def revealed(message: str, port: str) -> list[str]:
    return [part for part in (HOST, port, USER, "pw-") if part in message]


def test_an_anonymous_visitor_is_told_the_database_is_unreachable_and_nothing_about_where(nowhere, monkeypatch):
    url, port = nowhere
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=30).run()
    at.text_input[0].input("someone")
    at.text_input[1].input("a guess at a password")
    at.button[0].click().run()
    shown = [e.value for e in at.error]
    assert len(shown) == 1 and "cannot be reached" in shown[0], shown
    assert revealed(shown[0], port) == []


def test_core_says_unreachable_without_host_port_or_user_and_logs_the_details(nowhere, caplog):
    url, port = nowhere
    engine = make_engine(url)
    with caplog.at_level(logging.WARNING, logger="medhelm_core.db.engine"):
        with pytest.raises(DatabaseError) as schema_check:
            require_current_schema(engine)
        with pytest.raises(DatabaseError) as in_a_transaction:
            with transaction(engine) as session:
                session.connection()
    for err in (schema_check.value, in_a_transaction.value):
        assert str(err).startswith("the database cannot be reached") and revealed(str(err), port) == []
    assert port in caplog.text  # the administrator still learns where it tried
    engine.dispose()
