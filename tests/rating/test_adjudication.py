"""Adjudication: disputed items (clinicians at least the threshold apart) go to an adjudicator, whose scores
are stored apart from the raw ratings; only adjudicators, researchers and admins may adjudicate."""

from __future__ import annotations

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest
from support.helpers import current_adjudications

from medhelm_core.accounts import auth
from medhelm_core.accounts.auth import Principal
from medhelm_core.accounts.users import add_user
from medhelm_core.db.audit import audit_events
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Adjudication, Item, Rating, RatingSubmission, Study
from medhelm_core.errors import AccessDenied, ValidationError
from medhelm_core.rating.adjudication import (
    adjudication_queue,
    disagreements,
    load_case,
    submit_adjudication,
)
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import default_rubric
from medhelm_core.studies import get_or_create_study, get_study_by_id, update_settings
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "adjudicate.py")
MODEL = "secret-model-v9"

#: item -> clinician -> (accuracy, completeness, clarity)
RATINGS = {
    "at_threshold": {"c1": (5, 4, 4), "c2": (3, 4, 4)},  # accuracy exactly 2 apart: disputed
    "below": {"c1": (4, 4, 4), "c2": (3, 4, 5)},  # 1 apart at most: not disputed
    "single": {"c1": (1, 5, 1)},  # one clinician: never disputed
    "three_raters": {"c1": (4, 4, 5), "c2": (4, 4, 4), "c3": (4, 4, 3)},  # clarity 5 vs 3: disputed
}


def _seed(engine, passwords: bool = False) -> dict:
    """A study with the ratings above; passwords (slow to hash on purpose) only for the page tests."""
    rubric = default_rubric()
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "adj-study")
        users = {name: add_user(s, name, "clinician", None) for name in ("c1", "c2", "c3")}
        for role in ("adjudicator", "researcher"):
            users[role] = add_user(s, role, role, f"{role}-password" if passwords else None)
        items = {}
        for instance, by_rater in RATINGS.items():
            item = Item(study_id=study.id, benchmark="medi_qa", instance_id=instance, model=MODEL,
                        input_text=f"question {instance}", output_text=f"answer {instance}")
            s.add(item)
            s.flush()
            items[instance] = item.id
            for rater, (acc, comp, clar) in by_rater.items():
                record_rating(s, item=item, rater=users[rater], rubric=rubric,
                              scores={"accuracy": acc, "completeness": comp, "clarity": clar},
                              comment=f"{rater} thinks so")
        update_settings(s, study, adjudication_threshold=2)
        who = {name: Principal(u.id, u.username, u.username, u.role) for name, u in users.items()}
    return {"study_id": study.id, "items": items, "who": who}


@pytest.fixture
def seeded(engine):
    return engine, _seed(engine)


def _study(engine, seed) -> Study:
    with Session(engine) as s:
        return s.get(Study, seed["study_id"])


def _in(session, seed) -> Study:
    """The seeded study read in ``session`` (the core functions take the row)."""
    return get_study_by_id(session, seed["study_id"])


def test_exactly_at_threshold_counts_below_does_not_and_single_ratings_never(seeded):
    engine, seed = seeded
    items = seed["items"]
    with Session(engine) as s:
        found = {(d.item_id, d.criterion): d.spread for d in disagreements(s, _study(engine, seed))}
        assert found == {(items["at_threshold"], "accuracy"): 2, (items["three_raters"], "clarity"): 2}
        at_one = {(d.item_id, d.criterion) for d in disagreements(s, _study(engine, seed), threshold=1)}
        assert (items["below"], "accuracy") in at_one and (items["below"], "clarity") in at_one
        assert all(item_id != items["single"] for item_id, _ in at_one)
        assert disagreements(s, _study(engine, seed), threshold=3) == []


def test_no_threshold_means_no_queue_and_a_bad_threshold_is_refused(seeded):
    engine, seed = seeded
    with transaction(engine) as s:
        study = s.get(Study, seed["study_id"])
        for bad in (0, -1, 1.5, True):
            with pytest.raises(ValidationError, match="threshold"):
                update_settings(s, study, adjudication_threshold=bad)
        update_settings(s, study, adjudication_threshold=None)
    with Session(engine) as s:
        assert adjudication_queue(s, seed["who"]["adjudicator"], _in(s, seed)) == []


def test_the_adjudicator_sees_scores_and_comments_under_pseudonyms_but_no_model(seeded):
    engine, seed = seeded
    with Session(engine) as s:
        queue = adjudication_queue(s, seed["who"]["adjudicator"], _in(s, seed))
        assert [c.item_id for c in queue] == sorted([seed["items"]["at_threshold"], seed["items"]["three_raters"]])
        view = load_case(s, seed["who"]["adjudicator"], _in(s, seed), seed["items"]["three_raters"])
    assert [r.label for r in view.ratings] == ["Clinician A", "Clinician B", "Clinician C"]
    assert [r.scores["clarity"] for r in view.ratings] == [5, 4, 3]
    assert [r.comment for r in view.ratings] == ["c1 thinks so", "c2 thinks so", "c3 thinks so"]
    assert MODEL not in repr(view) and "c1" not in [r.label for r in view.ratings]


def test_adjudication_is_stored_apart_and_leaves_the_raw_ratings_unchanged(seeded):
    engine, seed = seeded
    item_id, who = seed["items"]["at_threshold"], seed["who"]["adjudicator"]
    with Session(engine) as s:
        before_ratings = sorted((r.rater_id, r.criterion, r.score) for r in s.exec(select(Rating)).all())
        before_subs = len(s.exec(select(RatingSubmission)).all())
    with transaction(engine) as s:
        written = submit_adjudication(s, who, _in(s, seed), item_id, {"accuracy": 4}, "dose is right")
        assert [(a.criterion, a.score, a.revision) for a in written] == [("accuracy", 4, 1)]
    with transaction(engine) as s:  # a rerun or double click writes nothing more
        assert submit_adjudication(s, who, _in(s, seed), item_id, {"accuracy": 4}, "dose is right") == []
    with transaction(engine) as s:  # a change is a new revision; the first one is kept
        submit_adjudication(s, who, _in(s, seed), item_id, {"accuracy": 3}, "on reflection")
    with Session(engine) as s:
        assert sorted((r.rater_id, r.criterion, r.score) for r in s.exec(select(Rating)).all()) == before_ratings
        assert len(s.exec(select(RatingSubmission)).all()) == before_subs
        history = s.exec(select(Adjudication).order_by(Adjudication.revision)).all()
        assert [(a.score, a.revision, a.adjudicator_id) for a in history] == [(4, 1, who.user_id), (3, 2, who.user_id)]
        assert current_adjudications(s, _in(s, seed)) == {(item_id, "accuracy"): 3}
        queue = adjudication_queue(s, who, _in(s, seed))
        assert [c.adjudicated for c in queue] == [False, True]  # open items first
        events = [e for e in audit_events(s) if e.action == "adjudication.submit"]
        assert len(events) == 2 and "dose" not in str(events)


def test_scores_are_checked_against_the_rubric_and_only_disputed_criteria_are_taken(seeded):
    engine, seed = seeded
    item_id, who = seed["items"]["at_threshold"], seed["who"]["adjudicator"]
    for scores, message in [({"accuracy": 6}, "outside the scale"), ({"tone": 3}, "no criterion"),
                            ({"clarity": 3}, "not disputed"), ({}, "at least one")]:
        with pytest.raises(ValidationError, match=message):
            with transaction(engine) as s:
                submit_adjudication(s, who, _in(s, seed), item_id, scores)
    with pytest.raises(ValidationError, match="not disputed"):
        with transaction(engine) as s:
            submit_adjudication(s, who, _in(s, seed), seed["items"]["single"], {"accuracy": 3})
    with Session(engine) as s:
        assert s.exec(select(Adjudication)).all() == []


def test_a_clinician_is_refused(seeded):
    engine, seed = seeded
    clinician = seed["who"]["c1"]
    with Session(engine) as s:
        with pytest.raises(AccessDenied):
            adjudication_queue(s, clinician, _in(s, seed))
        with pytest.raises(AccessDenied):
            load_case(s, clinician, _in(s, seed), seed["items"]["at_threshold"])
    with pytest.raises(AccessDenied):
        with transaction(engine) as s:
            submit_adjudication(s, clinician, _in(s, seed), seed["items"]["at_threshold"], {"accuracy": 4})
    with Session(engine) as s:
        assert s.exec(select(Adjudication)).all() == []


def test_a_researcher_sees_usernames(seeded):
    engine, seed = seeded
    with Session(engine) as s:
        view = load_case(s, seed["who"]["researcher"], _in(s, seed), seed["items"]["at_threshold"])
    assert [r.label for r in view.ratings] == ["c1", "c2"]


def _open_page(engine, monkeypatch, username: str) -> AppTest:
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(engine.url))
    at = AppTest.from_file(PAGE, default_timeout=30)
    with transaction(engine) as s:
        at.session_state[TOKEN_KEY] = auth.sign_in(s, username, f"{username}-password").token
    return at.run()


def test_the_page_adjudicates_a_disputed_item(sqlite_engine, monkeypatch):
    seed = _seed(sqlite_engine, passwords=True)
    at = _open_page(sqlite_engine, monkeypatch, "adjudicator")
    assert not at.exception
    assert "0 of 2 disputed items adjudicated" in " ".join(str(p.proto.text) for p in at.get("progress"))
    drawn = " ".join(t.value for t in at.text)
    assert "question at_threshold" in drawn and "answer at_threshold" in drawn and "c1 thinks so" in drawn
    page_text = drawn + " ".join(m.value for m in at.markdown) + " ".join(at.selectbox[1].options)
    assert MODEL not in page_text
    assert [r.label for r in at.radio] == ["Accuracy (clinicians 2 points apart)"]
    at.radio[0].set_value(4)
    at.text_area[0].input("the reference supports 4")
    at = next(b for b in at.button if b.label == "Save adjudication").click().run()
    assert not at.exception and not at.error
    with Session(sqlite_engine) as s:
        rows = s.exec(select(Adjudication)).all()
    assert [(r.item_id, r.criterion, r.score, r.comment) for r in rows] == [
        (seed["items"]["at_threshold"], "accuracy", 4, "the reference supports 4")
    ]
    assert "1 of 2 disputed items adjudicated" in " ".join(str(p.proto.text) for p in at.get("progress"))


def test_the_page_refuses_an_incomplete_adjudication(sqlite_engine, monkeypatch):
    _seed(sqlite_engine, passwords=True)
    at = _open_page(sqlite_engine, monkeypatch, "adjudicator")
    at = next(b for b in at.button if b.label == "Save adjudication").click().run()
    assert any("Accuracy left empty" in e.value for e in at.error)
    with Session(sqlite_engine) as s:
        assert s.exec(select(Adjudication)).all() == []


def test_a_researcher_sets_the_threshold_on_the_page(sqlite_engine, monkeypatch):
    seed = _seed(sqlite_engine, passwords=True)
    at = _open_page(sqlite_engine, monkeypatch, "researcher")
    assert not at.exception
    at.number_input[0].set_value(3)
    at = next(b for b in at.button if b.label == "Save threshold").click().run()
    assert not at.exception
    with Session(sqlite_engine) as s:
        assert s.get(Study, seed["study_id"]).adjudication_threshold == 3
    assert any("3 or more points apart" in m.value for m in at.success)
    at.checkbox[0].uncheck()
    at = next(b for b in at.button if b.label == "Save threshold").click().run()
    with Session(sqlite_engine) as s:
        assert s.get(Study, seed["study_id"]).adjudication_threshold is None
    assert any("Adjudication is off" in i.value for i in at.info)


def test_the_navigation_offers_the_page_to_adjudicators_but_not_to_clinicians(sqlite_engine, monkeypatch):
    _seed(sqlite_engine, passwords=True)
    with transaction(sqlite_engine) as s:
        add_user(s, "doc", "clinician", "doc-password")
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_engine.url))
    for username, offered in (("adjudicator", True), ("doc", False)):
        at = AppTest.from_file(str(REPO / "app.py"), default_timeout=30).run()
        at.text_input[0].input(username)
        at.text_input[1].input(f"{username}-password")
        at.button[0].click().run()
        if offered:
            at.switch_page("pages/adjudicate.py").run()
            assert not at.exception and [t.value for t in at.title] == ["Adjudicate"]
        else:
            with pytest.raises(ValueError, match="Could not find a navigation page"):
                at.switch_page("pages/adjudicate.py")
