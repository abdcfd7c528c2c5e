"""The database going away in the middle of a rating: the caller gets a clear DatabaseError, nothing is
half-written (no submission without its scores, no audit row), and resubmitting the same request works
exactly once. Simulated by a failing statement (SQLite and PostgreSQL) and by killing the PostgreSQL backend
from another connection."""

from __future__ import annotations

import re

import pytest
from conftest import REPO
from sqlalchemy import create_engine, event, func, text
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts import auth
from medhelm_core.accounts.auth import Principal
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import shared_engine, transaction
from medhelm_core.db.models import AuditEvent, Item, Rating, RatingSubmission, User
from medhelm_core.errors import DatabaseError
from medhelm_core.rating import rater_actions as ra
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.studies import get_or_create_study, get_study_by_id
from pages.common import TOKEN_KEY

SCORES = {"accuracy": 4, "completeness": 3, "clarity": 5}
CURRENT_SCORE_INSERT = re.compile(r"^\s*INSERT INTO rating\s*\(", re.IGNORECASE)  # not ratingsubmission


@pytest.fixture
def one_assignment(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "f")
        item = Item(study_id=study.id, benchmark="b", instance_id="1", model="m", input_text="q", output_text="a")
        s.add(item)
        doc = add_user(s, "doc", "clinician", None)
        s.flush()
        assign_balanced(s, study, overlap=1)
    return engine, study.id, item.id, Principal(doc.id, "doc", "doc", "clinician")


def counts(engine) -> tuple[int, int, int]:
    with Session(engine) as s:
        return (s.exec(select(func.count(RatingSubmission.id))).one(), s.exec(select(func.count(Rating.id))).one(),
                s.exec(select(func.count(AuditEvent.id)).where(AuditEvent.action == "rating.submitted")).one())


def fail_once_on_score_insert(engine, action):
    """Run ``action(conn)`` the first time a current score is inserted, after the submission row was."""
    fired = []

    @event.listens_for(engine, "before_cursor_execute")
    def hook(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001, PLR0913
        if not fired and CURRENT_SCORE_INSERT.match(statement):
            fired.append(statement)
            action(conn, statement, parameters)

    return fired, lambda: event.remove(engine, "before_cursor_execute", hook)


def submit(engine, study_id, item_id, who, request_id="press-1"):
    with transaction(engine) as s:
        return ra.submit(s, who, get_study_by_id(s, study_id), item_id, SCORES, request_id=request_id)


def test_a_write_cut_off_midway_leaves_nothing_and_can_be_resubmitted(one_assignment):
    engine, study_id, item_id, who = one_assignment

    def drop(conn, statement, parameters):
        raise OperationalError(statement, parameters, Exception("server closed the connection unexpectedly"))

    fired, remove = fail_once_on_score_insert(engine, drop)
    try:
        with pytest.raises(DatabaseError, match="database error: server closed the connection"):
            submit(engine, study_id, item_id, who)
    finally:
        remove()
    assert fired and counts(engine) == (0, 0, 0)  # the submission row written before the failure is gone
    assert submit(engine, study_id, item_id, who) is True
    assert submit(engine, study_id, item_id, who) is False  # the same press again: saved once
    assert counts(engine) == (1, 3, 1)


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_the_postgres_backend_killed_mid_transaction(one_assignment, database_url):
    engine, study_id, item_id, who = one_assignment
    admin = create_engine(database_url.split("?")[0], isolation_level="AUTOCOMMIT")

    def kill(conn, statement, parameters):
        pid = conn.connection.dbapi_connection.info.backend_pid
        with admin.connect() as other:
            assert other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()

    fired, remove = fail_once_on_score_insert(engine, kill)
    try:
        with pytest.raises(DatabaseError) as info:
            submit(engine, study_id, item_id, who)
    finally:
        remove()
        admin.dispose()
    assert fired and str(info.value).startswith("database error:") and "\n" not in str(info.value).strip()
    assert counts(engine) == (0, 0, 0)
    assert submit(engine, study_id, item_id, who) is True  # the pool replaces the dead connection
    assert counts(engine) == (1, 3, 1)


def test_the_rate_page_says_could_not_save_and_a_resubmit_saves_once(sqlite_demo_engine, monkeypatch):
    url = str(sqlite_demo_engine.url)
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    page_engine = shared_engine(url)  # the engine the page uses
    at = AppTest.from_file(str(REPO / "pages" / "rate.py"), default_timeout=30)
    with transaction(sqlite_demo_engine) as s:
        at.session_state[TOKEN_KEY] = auth.sign_in(s, "clinician1", "clinician1-demo").token
    at.run()
    for radio, score in zip(at.radio, (4, 3, 5), strict=True):
        radio.set_value(score)

    def drop(conn, statement, parameters):
        raise OperationalError(statement, parameters, Exception("disk I/O error"))

    fired, remove = fail_once_on_score_insert(page_engine, drop)
    try:
        at = next(b for b in at.button if b.label == "Submit rating").click().run()
    finally:
        remove()
    assert fired and not at.exception
    assert any("Could not save your rating" in e.value and "resubmit" in e.value for e in at.error)
    assert [r.value for r in at.radio] == [4, 3, 5]  # what was filled in stays
    with Session(sqlite_demo_engine) as s:
        uid = s.exec(select(User.id).where(User.username == "clinician1")).one()
        assert not s.exec(select(RatingSubmission).where(RatingSubmission.rater_id == uid)).all()
    at = next(b for b in at.button if b.label == "Submit rating").click().run()
    assert not at.exception and not at.error
    with Session(sqlite_demo_engine) as s:
        saved = s.exec(select(RatingSubmission).where(RatingSubmission.rater_id == uid)).all()
    assert len(saved) == 1 and saved[0].scores == SCORES
