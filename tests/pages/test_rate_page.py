"""The Rate page: a clinician's queue, one item at a time, saved at once, resumable, blind to the model."""

from __future__ import annotations

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts import auth
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Assignment, Item, RatingSubmission, User
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "rate.py")


@pytest.fixture
def demo_db(sqlite_demo_engine, monkeypatch):
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    return sqlite_demo_engine


def open_page(engine, username="clinician1", password="clinician1-demo", state=None) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=30)
    if state is not None:
        for key, value in state.items():
            at.session_state[key] = value
    else:
        with transaction(engine) as s:
            at.session_state[TOKEN_KEY] = auth.sign_in(s, username, password).token
    return at.run()


def rate(at: AppTest, scores=(4, 3, 5), comment="") -> AppTest:
    for radio, score in zip(at.radio, scores, strict=False):
        radio.set_value(score)
    if comment:
        at.text_area[0].input(comment)
    return next(b for b in at.button if b.label in ("Submit rating", "Save revision")).click().run()


def submissions(engine, username="clinician1"):
    with Session(engine) as s:
        uid = s.exec(select(User.id).where(User.username == username)).one()
        return s.exec(select(RatingSubmission).where(RatingSubmission.rater_id == uid)).all()


def test_the_clinician_sees_progress_and_the_first_item_without_the_model(demo_db):
    at = open_page(demo_db)
    assert not at.exception
    assert "0 of 32 done" in at.selectbox[0].value
    page_text = " ".join(t.value for t in at.text) + " ".join(m.value for m in at.markdown)
    with Session(demo_db) as s:
        models = set(s.exec(select(Item.model)).all())
    assert not any(model in page_text for model in models)
    assert [r.label for r in at.radio] == ["Accuracy", "Completeness", "Clarity"]


def test_submit_saves_and_moves_to_the_next_item(demo_db):
    at = open_page(demo_db)
    first = at.text[1].value
    at = rate(at, (4, 3, 5), comment="fine")
    assert not at.exception
    saved = submissions(demo_db)
    assert len(saved) == 1 and saved[0].scores == {"accuracy": 4, "completeness": 3, "clarity": 5}
    assert saved[0].comment == "fine" and saved[0].elapsed_seconds is not None
    assert "1 of 32 done" in at.selectbox[0].value
    assert at.text[1].value != first or "Item **2**" in " ".join(m.value for m in at.markdown)


def test_an_empty_criterion_is_refused_and_what_was_filled_in_stays(demo_db):
    at = open_page(demo_db)
    at.radio[0].set_value(2)
    at.radio[1].set_value(4)
    at = next(b for b in at.button if b.label == "Submit rating").click().run()
    assert any("Clarity left empty" in e.value for e in at.error)
    assert [r.value for r in at.radio] == [2, 4, None]
    assert submissions(demo_db) == []


def test_a_new_session_resumes_at_the_first_unrated_item_and_can_revise(demo_db):
    at = open_page(demo_db)
    at = rate(at, (4, 3, 5))
    at = rate(at, (2, 2, 2))
    at = open_page(demo_db)  # a new browser session: signs in again, resumes
    assert "Item **3**" in " ".join(m.value for m in at.markdown)
    at = next(b for b in at.button if b.label == "← Previous").click().run()
    at = next(b for b in at.button if b.label == "← Previous").click().run()
    assert [r.value for r in at.radio] == [4, 3, 5]  # their earlier rating, ready to revise
    at = rate(at, (5, 3, 5))
    history = sorted((s.item_id, s.revision) for s in submissions(demo_db))
    assert [rev for _, rev in history].count(2) == 1 and len(history) == 3


def test_a_researcher_without_assignments_is_told_so(demo_db):
    at = open_page(demo_db, "researcher", "researcher-demo")
    assert not at.exception
    assert any("No items are assigned to you" in i.value for i in at.info)


def test_the_page_refuses_anyone_signed_out(demo_db):
    at = open_page(demo_db, state={})
    assert [w.value for w in at.warning] == ["Please sign in."]
    assert not at.text


def test_a_clinician_only_ever_loads_their_own_assignments(demo_db):
    at = open_page(demo_db)
    with Session(demo_db) as s:
        uid = s.exec(select(User.id).where(User.username == "clinician1")).one()
        mine = set(s.exec(select(Assignment.item_id).where(Assignment.user_id == uid)).all())
        inputs = {i.id: i.output_text for i in s.exec(select(Item)).all()}
    shown = at.text[1].value
    assert any(inputs[i] == shown for i in mine)
