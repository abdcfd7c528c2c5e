"""The Metrics page: a researcher computes both metrics with a progress bar and reads the scores."""

from __future__ import annotations

import pytest
from conftest import REPO
from streamlit.testing.v1 import AppTest

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item
from medhelm_core.studies import get_or_create_study

PAIRS = [("Fever and cough.", "The patient has a fever and a cough."), ("Ibuprofen twice daily.", "Ibuprofen bd."),
         ("Follow up in two weeks.", "Review in 2 weeks."), ("ECG now.", None)]


@pytest.fixture
def app_db(sqlite_demo_engine, monkeypatch):
    with transaction(sqlite_demo_engine) as session:
        # A small study keeps BERTScore on the page quick; the CLI test scores the whole demo study.
        small, _ = get_or_create_study(session, "small")
        for k, (output, reference) in enumerate(PAIRS):
            session.add(Item(study_id=small.id, benchmark="medi_qa", instance_id=str(k), model="m", input_text="q",
                             output_text=output, reference_text=reference))
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    return sqlite_demo_engine


def signed_in(username: str) -> AppTest:
    """Sign in through the app's own form, as a person would, then open the Metrics page."""
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    at.text_input[0].input(username)
    at.text_input[1].input(f"{username}-demo")
    at.button[0].click().run()
    return at


def test_a_researcher_computes_metrics_and_reads_the_scores(app_db):
    at = signed_in("researcher")
    at.switch_page("pages/metrics.py").run()
    assert not at.exception
    assert [i.value for i in at.info] == ["No metric scores for this study yet."]
    assert at.selectbox[0].options == ["demo", "medhelm-validation", "small"]
    at.selectbox[0].select("small").run()
    at.button[0].click().run()  # Compute metrics
    assert not at.exception and not at.error
    assert at.success[0].value.startswith("rougeL, stemmer on: 3 scored, 0 already done")
    assert "Items without a reference (skipped): 1." in at.success[0].value
    summary, per_item = at.dataframe[0].value, at.dataframe[1].value
    assert len(per_item) == 3
    assert {"rougeL_f", "rougeLsum_f", "bertscore_f1", "bertscore_p", "bertscore_r"} <= set(per_item.columns)
    assert per_item["bertscore_f1"].between(0, 1).all()
    assert set(summary["benchmark"]) == {"all", "medi_qa"}
    assert any("4 items in the study, 1 without a reference" in c.value for c in at.caption)
    at.button[0].click().run()  # again: nothing left to do
    assert "0 scored, 3 already done" in at.success[0].value


def test_items_without_a_reference_are_counted_on_the_page(app_db):
    at = signed_in("researcher")
    at.switch_page("pages/metrics.py").run()
    at.selectbox[0].select("medhelm-validation").run()
    at.checkbox[2].uncheck().run()  # BERTScore off: ROUGE only
    at.button[0].click().run()
    assert not at.exception
    assert "Items without a reference (skipped): 74." in at.success[0].value
    assert any("74 items in the study, 74 without a reference" in c.value for c in at.caption)


def test_a_clinician_cannot_open_the_metrics_page(app_db):
    at = signed_in("clinician1")
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/metrics.py")
    direct = AppTest.from_file(str(REPO / "pages" / "metrics.py"), default_timeout=30).run()
    assert [w.value for w in direct.warning] == ["Please sign in."]
    assert not direct.button and not direct.dataframe
