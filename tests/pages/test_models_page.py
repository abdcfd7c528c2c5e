"""The Models page: each model by the clinicians, the jury and clinician-anchored, the rankings and the ratings
still needed; on MedHELM's 74 rated items it says how little they can tell; only researchers and admins."""

from __future__ import annotations

import pytest
from conftest import REPO
from streamlit.testing.v1 import AppTest
from support.model_support import insert_jury, rate_first

from medhelm_core.accounts import auth
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.demo import MEDHELM_STUDY, seed_demo
from pages.common import NOT_YOUR_PAGE, TOKEN_KEY

PAGE = str(REPO / "pages" / "models.py")
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory) -> str:
    """The demo, a third of it rated through the clinicians' queues, and a jury lenient on one model."""
    url = f"sqlite:///{tmp_path_factory.mktemp('models-page') / 'models.db'}"
    engine = make_engine(url)
    seed_demo(engine)
    rate_first(engine, 6)
    insert_jury(engine)
    engine.dispose()
    return url


def open_page(url: str, monkeypatch, username: str = "researcher") -> AppTest:
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    engine = make_engine(url)
    with transaction(engine) as s:
        token = auth.sign_in(s, username, f"{username}-demo").token
    engine.dispose()
    at = AppTest.from_file(PAGE, default_timeout=90)
    at.session_state[TOKEN_KEY] = token
    return at.run()


def text_of(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [i.value for i in at.info] + [w.value for w in at.warning]
    parts += [d.value.to_string() for d in at.dataframe]
    return "\n".join(parts)


def test_the_models_are_shown_by_clinicians_jury_and_clinician_anchored_with_rankings(demo_url, monkeypatch):
    at = open_page(demo_url, monkeypatch)
    assert not at.exception, at.exception
    headings = [h.value for h in at.subheader]
    assert headings[:4] == ["What these data can tell", "Each model", "Rankings", "Differences between models"]
    anchored = at.dataframe[0].value
    assert len(anchored) == 3 and {"clinicians", "jury", "clinician-anchored"} <= set(anchored.columns)
    assert len(list(at.get("vega_lite_chart"))) >= 3  # models side by side, bump chart, swap matrix
    text = text_of(at)
    assert "Kendall's tau-b between the jury's and the clinicians' order" in text
    assert "nan" not in text.lower().replace("n/a", "")


def test_on_medhelms_74_items_the_page_says_how_little_they_can_tell(demo_url, monkeypatch):
    at = open_page(demo_url, monkeypatch)
    at.selectbox(key="models_study").select(MEDHELM_STUDY).run()
    assert not at.exception, at.exception
    text = text_of(at)
    assert "74 items rated by clinicians" in text
    assert "cannot say whether the jury orders the models as the clinicians do" in text
    assert "Every item is rated by clinicians" in text and "Recorded jury scores" in text
    assert len(at.dataframe[0].value) == 7


def test_a_clinician_cannot_open_the_models_page(demo_url, monkeypatch):
    at = open_page(demo_url, monkeypatch, "clinician1")
    assert [e.value for e in at.error] == [NOT_YOUR_PAGE] and not at.dataframe
