"""The Verdict page: the protocol is fixed before the results are shown, the first viewing is recorded, a later
change is flagged; on the MedHELM validation study it says what two clinicians per item cannot decide."""

from __future__ import annotations

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts import auth
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import AuditEvent
from medhelm_core.demo import MEDHELM_STUDY, seed_demo
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "verdict.py")
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('verdict-page') / 'verdict.db'}"
    engine = make_engine(url)
    seed_demo(engine)
    engine.dispose()
    return url


def open_page(url: str, monkeypatch) -> AppTest:
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    engine = make_engine(url)
    with transaction(engine) as s:
        token = auth.sign_in(s, "researcher", "researcher-demo").token
    engine.dispose()
    at = AppTest.from_file(PAGE, default_timeout=90)
    at.session_state[TOKEN_KEY] = token
    at.run()
    study_box = next(b for b in at.selectbox if b.label == "Study")
    return study_box.set_value(MEDHELM_STUDY).run()


def actions(url: str) -> list[str]:
    engine = make_engine(url)
    with Session(engine) as s:
        found = [e.action for e in s.exec(select(AuditEvent).order_by(AuditEvent.id)).all()]
    engine.dispose()
    return [a for a in found if a.startswith(("study.verdict", "verdict."))]


def test_fix_then_view_then_change_is_flagged(demo_url, monkeypatch):
    at = open_page(demo_url, monkeypatch)
    assert not at.exception, at.exception
    assert any("No protocol fixed yet" in i.value for i in at.info)
    assert not [s for s in at.subheader if s.value == "Judge bias panel"]  # nothing shown before asking
    at.number_input[0].set_value(0.15)
    at = at.button[0].click().run()  # "Fix the protocol"
    assert not at.exception, at.exception
    show = next(b for b in at.button if b.label.startswith("Show the verdict"))
    at = show.click().run()
    assert not at.exception, at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "NOT ENOUGH DATA" in text and "cannot run the Alternative Annotator Test" in text
    assert "lenient" in text
    assert [s.value for s in at.subheader][-1] == "Judge bias panel"
    assert actions(demo_url) == ["study.verdict_protocol", "verdict.viewed"]
    at = open_page(demo_url, monkeypatch)  # viewed: shown at once, and a change now is recorded as such
    assert any("a change now is recorded" in w.value for w in at.warning)
    at.number_input[1].set_value(0.5)
    at = at.button[0].click().run()
    assert any("Protocol changed after results were viewed" in w.value for w in at.warning)
    assert actions(demo_url) == ["study.verdict_protocol", "verdict.viewed", "study.verdict_protocol"]
