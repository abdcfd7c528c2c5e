"""The demo's MedHELM validation study shows its items' texts in the Agreement page's drill-down, as plain text."""

from __future__ import annotations

import csv

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest
from support.dashboard_support import rated_database

from medhelm_core.accounts import auth
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Item
from medhelm_core.demo import MEDHELM_STUDY, MEDHELM_TEXTS
from medhelm_core.studies import get_study
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "agreement.py")
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


def test_the_drill_down_of_a_validation_item_shows_its_request_and_response(monkeypatch):
    url = f"sqlite:///{rated_database('seeded')}"
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    engine = make_engine(url)
    with transaction(engine) as s:
        token = auth.sign_in(s, "researcher", "researcher-demo").token
    with Session(engine) as s:
        item = s.exec(select(Item).where(Item.study_id == get_study(s, MEDHELM_STUDY).id, Item.instance_id == "id100",
                                         Item.model == "google_gemini-1.5-pro-001")).one()
    engine.dispose()
    with MEDHELM_TEXTS.open(encoding="utf-8", newline="") as handle:
        row = next(r for r in csv.DictReader(handle) if (r["instance_id"], r["model_key"]) == ("id100",
                                                                                            "google_gemini-1.5-pro-001"))
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state[TOKEN_KEY] = token
    at.run()
    at.selectbox(key="agreement_study").set_value(MEDHELM_STUDY).run()
    at.text_input(key="agreement_item_id").input(str(item.id)).run()
    assert not at.exception
    texts = [t.value for t in at.text]
    # drawn whole, as characters (st.text, which trims the ends)
    assert row["question"].strip() in texts and row["answer"].strip() in texts
    assert "Reference" not in [c.value for c in at.caption]  # the public release has no references
    clinicians, judges = at.dataframe[-3].value, at.dataframe[-2].value
    assert len(clinicians) >= 1 and judges["judge"].tolist() == ["medhelm-jury-mean"]
