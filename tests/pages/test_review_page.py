"""The Review page: researchers read every flag (unsafe first), skip and comment of a study, filter them and open
an item; clinicians cannot open it."""

from __future__ import annotations

import pytest
from conftest import REPO
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts import auth
from medhelm_core.accounts.auth import Principal
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import User
from medhelm_core.rating import queue as rq
from medhelm_core.rating import rater_actions as ra
from medhelm_core.studies import get_study
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "review.py")
FINE = {"accuracy": 4, "completeness": 4, "clarity": 4}


def principal(session, username: str) -> Principal:
    user = session.exec(select(User).where(User.username == username)).one()
    return Principal(user.id, user.username, user.display_name, user.role)


@pytest.fixture
def reviewed(sqlite_demo_engine, monkeypatch):
    """clinician1 comments on one item and flags another unsafe; clinician2 skips one and flags one unreadable."""
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    with transaction(sqlite_demo_engine) as s:
        study = get_study(s, "demo")
        one, two = principal(s, "clinician1"), principal(s, "clinician2")
        mine = [e.item_id for e in rq.queue(s, one, study)]
        theirs = [e.item_id for e in rq.queue(s, two, study)]
        ra.submit(s, one, study, mine[0], FINE, comment="well put")
        ra.submit(s, one, study, mine[1], {"accuracy": 1}, comment="dose ten times too high", flag="unsafe")
        ra.submit(s, one, study, mine[2], FINE)  # neither flag nor comment: not listed
        ra.skip(s, two, study, theirs[0], "outside_expertise", "not my field")
        ra.submit(s, two, study, theirs[1], {}, flag="unreadable")
    return sqlite_demo_engine, mine, theirs


def open_as(engine, username="researcher", password="researcher-demo") -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=30)
    with transaction(engine) as s:
        at.session_state[TOKEN_KEY] = auth.sign_in(s, username, password).token
    return at.run()


def test_flags_come_first_then_skips_and_comments_and_filters_narrow_them(reviewed):
    engine, mine, theirs = reviewed
    at = open_as(engine)
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["kind"]) == ["Unsafe", "Unreadable", "Skipped: outside my expertise", "Comment"]
    assert list(table["item_id"]) == [mine[1], theirs[1], theirs[0], mine[0]]
    assert list(table["comment"]) == ["dose ten times too high", "", "not my field", "well put"]
    assert {m.label: m.value for m in at.metric} == {"Unsafe": "1", "Unreadable": "1", "Cannot judge": "0",
                                                     "Skipped": "1", "Comment": "1"}
    at.multiselect(key=next(m.key for m in at.multiselect if m.label == "Clinicians")).set_value(["clinician1"]).run()
    assert list(at.dataframe[0].value["kind"]) == ["Unsafe", "Comment"]
    at.text_input(key=next(t.key for t in at.text_input)).input("DOSE").run()
    assert list(at.dataframe[0].value["item_id"]) == [mine[1]]


def test_a_row_opens_its_item_and_the_way_to_the_agreement_page(reviewed):
    engine, mine, _ = reviewed
    at = open_as(engine)
    table = at.dataframe[0]
    # AppTest cannot click a dataframe row: the selection is set as the browser sends it.
    at.session_state[table.key] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert not at.exception
    assert any(m.value == f"**Item {mine[1]}**" for m in at.markdown)
    assert any("dose ten times too high" in str(d.value.to_dict()) for d in at.dataframe[1:])
    button = next(b for b in at.button if b.label == "Open it on the Agreement page")
    button.click().run()
    assert at.session_state["agreement_item_id"] == str(mine[1]) and at.session_state["agreement_study"] == "demo"


def test_nothing_to_review_says_so(sqlite_demo_engine, monkeypatch):
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    at = open_as(sqlite_demo_engine)
    assert [i.value for i in at.info] == [
        "Nothing to review yet: no clinician has flagged, skipped or commented on an item of this study."]


def test_clinicians_cannot_open_it(reviewed):
    engine, _, _ = reviewed
    at = open_as(engine, "clinician1", "clinician1-demo")
    assert [e.value for e in at.error] == ["Your account cannot open this page."]
    assert not at.dataframe
