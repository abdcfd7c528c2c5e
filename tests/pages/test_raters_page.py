"""The Raters page: researchers see each clinician's progress, assign and reassign; nobody else can."""

from __future__ import annotations

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts import auth
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Assignment, User
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "raters.py")


@pytest.fixture
def demo_db(sqlite_demo_engine, monkeypatch):
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    return sqlite_demo_engine


def open_as(engine, username, password) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=30)
    with transaction(engine) as s:
        at.session_state[TOKEN_KEY] = auth.sign_in(s, username, password).token
    return at.run()


def test_researcher_sees_progress_of_each_clinician(demo_db):
    at = open_as(demo_db, "researcher", "researcher-demo")
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["username"]) == ["clinician1", "clinician2", "clinician3"]
    assert list(table["assigned"]) == [32, 32, 32] and list(table["done"]) == [0, 0, 0]


def test_assigning_a_new_clinician_keeps_existing_assignments(demo_db):
    with transaction(demo_db) as s:
        add_user(s, "clinician4", "clinician", "clinician4-demo")
    at = open_as(demo_db, "researcher", "researcher-demo")
    at.number_input(key="overlap").set_value(3)
    at = next(b for b in at.button if b.label == "Assign").click().run()
    assert not at.exception
    # The page reruns after the change; the message still says what happened.
    assert [s.value for s in at.success] == [
        "48 assignments added for 4 clinicians; each item now goes to 3 clinicians."]
    with Session(demo_db) as s:
        rows = s.exec(select(Assignment.item_id, Assignment.user_id)).all()
    per_item = {}
    for item, user in rows:
        per_item.setdefault(item, set()).add(user)
    assert all(len(v) == 3 for v in per_item.values()) and len(rows) == 48 * 3


def test_reassign_moves_an_unrated_item(demo_db):
    at = open_as(demo_db, "researcher", "researcher-demo")
    first = at.selectbox[2].options[0]
    instance = first.split(" / ")[1]
    model = first.split(" / ")[2]
    with Session(demo_db) as s:
        from medhelm_core.db.models import Item

        item_id = s.exec(select(Item.id).where(Item.instance_id == instance, Item.model == model)).one()
        holders = set(s.exec(select(User.username).join(Assignment, Assignment.user_id == User.id)
                             .where(Assignment.item_id == item_id)).all())
    free = next(c for c in ("clinician2", "clinician3") if c not in holders)
    at.selectbox[3].set_value(free)
    at = next(b for b in at.button if b.label == "Reassign").click().run()
    assert not at.exception
    assert any(f"moved from clinician1 to {free}" in s.value for s in at.success), [e.value for e in at.error]
    with Session(demo_db) as s:
        loads = {u: 0 for u in ("clinician1", "clinician2", "clinician3")}
        for name in s.exec(select(User.username).join(Assignment, Assignment.user_id == User.id)).all():
            loads[name] += 1
    assert loads["clinician1"] == 31


def test_the_planner_shows_items_needed_against_the_study(demo_db):
    at = open_as(demo_db, "researcher", "researcher-demo")
    needed = at.metric[0]  # the headline's ICC(C,2) by default: the figure the Agreement page leads with
    assert needed.label == "Items needed" and needed.value == "136"  # ICC 0.75, width 0.2, 80%
    assert "ICC(C,2)" in " ".join(c.value for c in at.caption)
    at = at.radio(key="plan_form").set_value("icc1").run()  # MedHELM's own plan
    needed = at.metric[0]
    assert needed.value == "98" and "-50 vs the 48 in this study" in needed.delta


def test_clinicians_cannot_open_it(demo_db):
    at = open_as(demo_db, "clinician1", "clinician1-demo")
    assert [e.value for e in at.error] == ["Your account cannot open this page."]
    assert not at.dataframe


def test_the_researcher_keeps_a_plan_and_sets_the_checks(demo_db):
    at = open_as(demo_db, "researcher", "researcher-demo")
    at = at.radio(key="plan_form").set_value("icc1").run()
    at = at.button(key="save_plan").click().run()
    assert not at.exception
    at.number_input(key="speed_threshold").set_value(40.0)
    at.number_input(key="retest_share").set_value(0.2)
    at.number_input(key="retest_gap").set_value(4)
    at = next(b for b in at.button if b.label == "Save checks").click().run()
    assert not at.exception and not at.error
    with Session(demo_db) as s:
        from medhelm_core.studies import get_study

        study = get_study(s, "demo")
    assert study.plan["items"] == 98 and study.plan["raters"] == 2
    assert (study.speed_threshold_seconds, study.retest_share, study.retest_gap) == (40.0, 0.2, 4)
    assert at.button(key="save_plan").disabled  # the plan shown is the one kept


def test_rater_quality_flags_fast_first_ratings(demo_db):
    from medhelm_core.accounts.auth import Principal
    from medhelm_core.rating import rater_actions as ra
    from medhelm_core.studies import get_study

    with Session(demo_db) as s:
        study = get_study(s, "demo")
        user = s.exec(select(User).where(User.username == "clinician1")).one()
        items = s.exec(select(Assignment.item_id).where(Assignment.user_id == user.id)).all()[:4]
    who = Principal(user.id, user.username, user.username, "clinician")
    for n, item in enumerate(items):
        with transaction(demo_db) as s:
            ra.submit(s, who, study, item, {"accuracy": 4, "completeness": 4, "clarity": 4},
                      elapsed_seconds=3.0 if n < 3 else 95.0)
    at = open_as(demo_db, "researcher", "researcher-demo")
    assert not at.exception
    speed = next(d.value for d in at.dataframe if "n_fast" in d.value.columns).set_index("rater_id")
    assert speed.loc["clinician1", "n_fast"] == 3 and speed.loc["clinician1", "share_fast"] == 0.75
    assert any("under 20 s" in m.value for m in at.markdown)


def test_instructions_saved_here_are_what_clinicians_read_on_the_rate_page(demo_db):
    at = open_as(demo_db, "researcher", "researcher-demo")
    at.text_area(key="study_instructions").input("Rate as the **treating physician** would.")
    at = next(b for b in at.button if b.label == "Save instructions").click().run()
    assert [s.value for s in at.success] == ["Instructions saved: clinicians see them on the Rate page."]
    rate = AppTest.from_file(str(REPO / "pages" / "rate.py"), default_timeout=30)
    with transaction(demo_db) as s:
        rate.session_state[TOKEN_KEY] = auth.sign_in(s, "clinician1", "clinician1-demo").token
    rate.run()
    assert "Rate as the **treating physician** would." in [m.value for m in rate.markdown]
