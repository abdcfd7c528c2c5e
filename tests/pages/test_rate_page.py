"""The Rate page: a clinician's queue, one item at a time, saved at once, resumable, blind to the model; skips with a
reason, an all-done state, and a study choice that holds while rating."""

from __future__ import annotations

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts import auth
from medhelm_core.accounts.auth import Principal
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Assignment, AuditEvent, Item, Rating, RatingSkip, RatingSubmission, User
from medhelm_core.rating import queue as rq
from medhelm_core.rating import rater_actions as ra
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.studies import get_or_create_study, get_study
from medhelm_core.text import safe_markdown
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


def button(at: AppTest, label: str):  # noqa: ANN201 - an AppTest button
    return next(b for b in at.button if b.label == label)


def keyed(widgets, prefix: str) -> list:
    """The widgets whose key starts with ``prefix`` (the page keys them by an opaque token per item)."""
    return [w for w in widgets if (w.key or "").startswith(prefix)]


def scores(at: AppTest) -> list:
    return keyed(at.radio, "score_")  # the only radios: one per criterion


def rate(at: AppTest, values=(4, 3, 5), comment="") -> AppTest:
    for radio, score in zip(scores(at), values, strict=True):
        radio.set_value(score)
    if comment:
        keyed(at.text_input, "comment_")[0].input(comment)
    return next(b for b in at.button if b.label in ("Submit rating", "Save revision")).click().run()


def progress(at: AppTest) -> str:
    return at.get("progress")[0].proto.text


def shown(at: AppTest) -> str:
    return " ".join(m.value for m in at.markdown) + " ".join(t.value for t in at.text)


def submissions(engine, username="clinician1"):
    with Session(engine) as s:
        uid = s.exec(select(User.id).where(User.username == username)).one()
        return s.exec(select(RatingSubmission).where(RatingSubmission.rater_id == uid)).all()


def queue_of(engine, username="clinician1", study="demo"):
    with Session(engine) as s:
        user = s.exec(select(User).where(User.username == username)).one()
        who = Principal(user.id, user.username, user.display_name, user.role)
        return who, rq.queue(s, who, get_study(s, study))


def test_the_clinician_sees_progress_and_the_first_item_without_the_model(demo_db):
    at = open_page(demo_db)
    assert not at.exception
    assert progress(at) == "0 of 32 done"
    with Session(demo_db) as s:
        models = set(s.exec(select(Item.model)).all())
    assert not any(model in shown(at) for model in models)
    assert [r.label for r in scores(at)] == ["Accuracy", "Completeness", "Clarity"]
    assert any("Item **1** of 32" in m.value for m in at.markdown)


def test_model_output_is_safe_markdown_by_default_and_plain_text_on_request(demo_db):
    _, entries = queue_of(demo_db)
    with Session(demo_db) as s:
        output = s.get(Item, entries[0].item_id).output_text
    at = open_page(demo_db)
    assert safe_markdown(output) in [m.value for m in at.markdown]
    assert output not in [t.value for t in at.text]
    at.toggle(key="rate_plain_text").set_value(True).run()
    assert output in [t.value for t in at.text]  # st.text: the characters as stored


def test_submit_saves_and_moves_to_the_next_item(demo_db):
    at = open_page(demo_db)
    at = rate(at, (4, 3, 5), comment="fine")
    assert not at.exception
    saved = submissions(demo_db)
    assert len(saved) == 1 and saved[0].scores == {"accuracy": 4, "completeness": 3, "clarity": 5}
    assert saved[0].comment == "fine" and saved[0].elapsed_seconds is not None
    assert progress(at) == "1 of 32 done"
    assert any("Item **2** of 32" in m.value for m in at.markdown)
    assert [r.value for r in scores(at)] == [None, None, None]  # a fresh form for the next item


def test_an_empty_criterion_is_refused_and_what_was_filled_in_stays(demo_db):
    at = open_page(demo_db)
    scores(at)[0].set_value(2)
    scores(at)[1].set_value(4)
    at = button(at, "Submit rating").click().run()
    assert any("Clarity left empty" in e.value for e in at.error)
    assert [r.value for r in scores(at)] == [2, 4, None]
    assert submissions(demo_db) == []


def test_a_new_session_resumes_at_the_first_unrated_item_and_can_revise(demo_db):
    at = open_page(demo_db)
    at = rate(at, (4, 3, 5))
    at = rate(at, (2, 2, 2))
    at = open_page(demo_db)  # a new browser session: signs in again, resumes
    assert any("Item **3**" in m.value for m in at.markdown)
    at = button(at, "← Previous").click().run()
    at = button(at, "← Previous").click().run()
    assert [r.value for r in scores(at)] == [4, 3, 5]  # their earlier rating, ready to revise
    at = rate(at, (5, 3, 5))
    history = sorted((s.item_id, s.revision) for s in submissions(demo_db))
    assert [rev for _, rev in history].count(2) == 1 and len(history) == 3


def test_a_skip_keeps_its_reason_is_not_a_rating_and_moves_on(demo_db):
    who, entries = queue_of(demo_db)
    at = open_page(demo_db)
    keyed(at.selectbox, "skip_reason_")[0].set_value("outside_expertise")
    keyed(at.text_input, "skip_note_")[0].input("a paediatric question")
    at = button(at, "Skip, not rated").click().run()
    assert not at.exception
    assert progress(at) == "0 of 32 done · 1 skipped"
    assert any("Item **2** of 32" in m.value for m in at.markdown)
    with Session(demo_db) as s:
        skip = s.exec(select(RatingSkip)).one()
        assert (skip.item_id, skip.rater_id, skip.reason, skip.note) == (
            entries[0].item_id, who.user_id, "outside_expertise", "a paediatric question")
        assert s.exec(select(Rating).where(Rating.item_id == skip.item_id)).all() == []  # not a rating
        event = s.exec(select(AuditEvent).where(AuditEvent.action == "rating.skipped")).one()
        assert "paediatric" not in str(event.details)  # free text stays out of the audit trail
    assert submissions(demo_db) == []

    # Back to it: it says it was skipped; rating it replaces the skip.
    at = button(at, "← Previous").click().run()
    assert any("You skipped this item: Outside my expertise (a paediatric question)" in i.value for i in at.info)
    at = rate(at, (3, 3, 3))
    assert progress(at) == "1 of 32 done"
    with Session(demo_db) as s:
        assert s.exec(select(RatingSkip)).all() == []


def test_a_skip_needs_a_reason_and_other_needs_a_note(demo_db):
    at = open_page(demo_db)
    at = button(at, "Skip, not rated").click().run()
    assert [e.value for e in at.error] == ["Choose why you skip this item."]
    keyed(at.selectbox, "skip_reason_")[0].set_value("other")
    at = button(at, "Skip, not rated").click().run()
    assert [e.value for e in at.error] == ["please say in the note why you skip this item"]
    with Session(demo_db) as s:
        assert s.exec(select(RatingSkip)).all() == []


def test_the_last_item_ends_in_an_all_done_state(demo_db):
    who, entries = queue_of(demo_db)
    with transaction(demo_db) as s:  # every item but the last rated or skipped already
        study = get_study(s, "demo")
        for entry in entries[:-2]:
            ra.submit(s, who, study, entry.item_id, {"accuracy": 4, "completeness": 4, "clarity": 4})
        ra.skip(s, who, study, entries[-2].item_id, "conflict_of_interest")
    at = open_page(demo_db)
    assert any("Item **32** of 32" in m.value for m in at.markdown)
    at = rate(at, (5, 5, 5))
    assert not at.exception
    assert [s.value for s in at.success] == [
        "**All done.** You have rated 31 of the 32 items assigned to you in this study and skipped 1. Thank you!"]
    assert not scores(at) and progress(at) == "31 of 32 done · 1 skipped"
    assert any("Nothing else is waiting for you" in c.value for c in at.caption)
    at = button(at, "Look over or revise my ratings").click().run()
    assert any("Item **1** of 32" in m.value for m in at.markdown) and [r.value for r in scores(at)] == [4, 4, 4]


def test_a_clinician_in_two_studies_stays_in_the_second_after_a_submit(demo_db):
    with transaction(demo_db) as s:
        second, _ = get_or_create_study(s, "second", title="A second study")
        for n in range(3):
            s.add(Item(study_id=second.id, benchmark="b", instance_id=f"i{n}", model="m", input_text=f"question {n}",
                       output_text=f"answer {n}"))
        s.flush()
        assign_balanced(s, second, 1, ["clinician1"])
        second_id = second.id
    at = open_page(demo_db)
    assert at.selectbox(key="rate_study").options == ["Demo: clinical answers from three models", "A second study"]
    at.selectbox(key="rate_study").set_value(second_id).run()  # the options are study ids, shown by title
    assert progress(at) == "0 of 3 done"
    at = rate(at, (4, 4, 4))
    at = rate(at, (3, 3, 3))
    assert not at.exception
    assert at.selectbox(key="rate_study").value == second_id
    assert progress(at) == "2 of 3 done"
    assert any("Item **3** of 3" in m.value for m in at.markdown)


def test_a_researcher_without_assignments_is_told_so(demo_db):
    at = open_page(demo_db, "researcher", "researcher-demo")
    assert not at.exception
    assert any("No items are assigned to you" in i.value for i in at.info)


def test_the_page_refuses_anyone_signed_out(demo_db):
    at = open_page(demo_db, state={})
    assert [w.value for w in at.warning] == ["Please sign in."]
    assert not at.text and not at.radio


def test_a_clinician_only_ever_loads_their_own_assignments(demo_db):
    at = open_page(demo_db)
    with Session(demo_db) as s:
        uid = s.exec(select(User.id).where(User.username == "clinician1")).one()
        mine = set(s.exec(select(Assignment.item_id).where(Assignment.user_id == uid)).all())
        outputs = {i.id: safe_markdown(i.output_text) for i in s.exec(select(Item)).all()}
    drawn = {m.value for m in at.markdown}
    assert [i for i, text in outputs.items() if text in drawn] and all(
        i in mine for i, text in outputs.items() if text in drawn)
