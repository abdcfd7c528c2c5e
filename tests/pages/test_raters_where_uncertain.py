"""The Raters page's "Rate these next": the next ratings go where the models' scores are least certain."""

from __future__ import annotations

from conftest import REPO
from sqlmodel import Session, col, select
from streamlit.testing.v1 import AppTest
from support.model_support import insert_jury

from medhelm_core.accounts import auth
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Assignment
from pages.common import TOKEN_KEY


def test_rate_these_next_draws_the_asked_number_and_says_where(sqlite_demo_engine, monkeypatch):
    insert_jury(sqlite_demo_engine)
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    with transaction(sqlite_demo_engine) as s:
        token = auth.sign_in(s, "researcher", "researcher-demo").token
    at = AppTest.from_file(str(REPO / "pages" / "raters.py"), default_timeout=60)
    at.session_state[TOKEN_KEY] = token
    at = at.run()
    at.number_input(key="where_uncertain_n").set_value(5)
    at = next(b for b in at.button if b.label == "Rate these next").click().run()
    assert not at.exception, at.exception
    assert any("5 ratings come next, in" in s.value for s in at.success)
    with Session(sqlite_demo_engine) as s:
        drawn = s.exec(select(Assignment).where(col(Assignment.draw_probability).is_not(None))).all()
    assert len(drawn) == 5 and all(a.position < 0 for a in drawn)
