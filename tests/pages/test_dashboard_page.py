"""The Agreement page: the engine's figures first, then charts; a clear message without ratings; the drill-down
shows model text as text; the cache follows the ratings; only researchers and admins get in."""

from __future__ import annotations

import json

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest
from support.dashboard_support import HOSTILE, add_small_study, copy_of, facts_of, rated_database, rated_figures

from medhelm_core.accounts import auth
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Item, User
from medhelm_core.demo import DEMO_STUDY, MEDHELM_STUDY
from medhelm_core.figures import compute_agreement, headline_table, wait_for_updates
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_study
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "agreement.py")
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


def open_page(url: str, username: str = "researcher", password: str = "researcher-demo") -> AppTest:
    engine = make_engine(url)
    with transaction(engine) as s:
        token = auth.sign_in(s, username, password).token
    engine.dispose()
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state[TOKEN_KEY] = token
    return at.run()


def charts(at: AppTest) -> list:
    return list(at.get("vega_lite_chart"))


def cards(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


@pytest.fixture
def rated_url(monkeypatch) -> str:
    url = f"sqlite:///{rated_database('rated')}"
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    return url


def test_the_page_shows_the_engines_headline_first_then_the_charts(rated_url):
    at = open_page(rated_url)
    assert not at.exception
    expected = headline_table(rated_figures()[1])
    pooled = expected.query("benchmark == 'pooled' and criterion == 'composite'").set_index("comparison")
    assert cards(at) == {c: f"{pooled.loc[c, 'icc']:.3f}" for c in pooled.index}
    shown = at.dataframe[0].value
    assert list(shown["comparison"][:len(pooled)]) == list(pooled.index)
    assert shown["icc"].tolist() == pytest.approx(expected["icc"].tolist(), nan_ok=True)
    specs = [json.loads(c.proto.spec) for c in charts(at)]
    titles = json.dumps([s.get("title") for s in specs] + [layer.get("title") for s in specs
                                                           for layer in s.get("hconcat", [])])
    for words in ("each figure with its 95% CI", "Jury vs clinicians", "Bland-Altman", "Per-judge agreement",
                  "Leniency and spread", "Distribution of scores"):
        assert words in titles
    assert [s.value for s in at.subheader][0] == "Headline agreement"
    assert at.get("download_button")


def test_the_protocol_model_and_criterion_filters_change_the_figures(rated_url):
    data, _ = rated_figures()
    model = sorted(data.items["model"].unique())[0]
    expected = headline_table(compute_agreement(data.long, "full", models=[model]), "full")
    pooled = expected.query("benchmark == 'pooled' and criterion == 'accuracy'").set_index("comparison")
    at = open_page(rated_url)
    at.radio(key="agreement_protocol").set_value("full")
    at.multiselect(key="agreement_models").set_value([model])
    at.selectbox(key="agreement_criterion").set_value("accuracy")
    at.run()
    assert not at.exception
    assert cards(at) == {c: f"{pooled.loc[c, 'icc']:.3f}" for c in pooled.index}
    assert set(at.dataframe[0].value["criterion"]) == {"accuracy"}
    assert any("ICC(A,1) and ICC(A,k), with generalized" in c.value for c in at.caption)


def test_a_study_without_ratings_says_not_enough_ratings_yet(monkeypatch):
    url = f"sqlite:///{rated_database('seeded')}"
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    at = open_page(url)
    assert not at.exception and not at.error
    assert [i.value for i in at.info] == [
        "Not enough ratings yet: 0 item(s) have clinician ratings; agreement needs at least 3 items rated by a "
        "clinician and also by a second clinician, the jury or a metric."
    ]
    assert not charts(at)


def test_medhelm_validation_opens_on_the_papers_0474_and_labels_the_jury_as_recorded(monkeypatch, tmp_path):
    url = copy_of("seeded", tmp_path)  # the test keeps another view for the study
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    at = open_page(url)
    at.selectbox(key="agreement_study").set_value(MEDHELM_STUDY).run()
    assert any("Recorded jury scores" in w.value for w in at.warning)
    # The study opens on the paper's choice, with no benchmark to pick first.
    assert not at.exception
    assert at.multiselect(key="agreement_benchmarks").value == ["aci_bench", "medi_qa"]
    assert cards(at)["jury-clinician"] == "0.474"
    assert any("95% CI 0.10 to 0.69 · n = 56" in c.value for c in at.caption)
    assert not [b for b in at.button if b.key == "agreement_keep_view"]  # already the study's view

    # Every benchmark pooled, kept as the study's view: the study opens on it from then on.
    at.multiselect(key="agreement_benchmarks").set_value([]).run()
    assert cards(at)["jury-clinician"] != "0.474"
    next(b for b in at.button if b.key == "agreement_keep_view").click().run()
    assert not at.exception and not [b for b in at.button if b.key == "agreement_keep_view"]
    engine = make_engine(url)
    with Session(engine) as s:
        kept = get_study(s, MEDHELM_STUDY)
        assert (kept.agreement_protocol, kept.agreement_benchmarks) == ("medhelm", [])
    engine.dispose()


def test_the_drill_down_shows_texts_scores_comments_and_explanations_as_text(rated_url):
    engine = make_engine(rated_url)
    with Session(engine) as s:
        facts = facts_of(s, get_study(s, DEMO_STUDY))
        model = s.get(Item, facts["failed_item"]).model
    engine.dispose()
    at = open_page(rated_url)
    at.text_input(key="agreement_item_id").input(str(facts["hostile_item"])).run()
    assert not at.exception
    texts = [t.value for t in at.text]
    assert any(HOSTILE in t for t in texts)  # as characters in st.text, never as markdown or HTML
    assert not any(HOSTILE in m.value for m in at.markdown)
    assert any("model: model<b>x</b>" in t for t in texts)
    at.text_input(key="agreement_item_id").input(str(facts["failed_item"])).run()
    texts = [t.value for t in at.text]
    assert any(f"model: {model}" in t for t in texts)
    assert any(t.startswith("openai/judge-a on accuracy: openai/judge-a says accuracy is") for t in texts)
    clinicians, judges = at.dataframe[-3].value, at.dataframe[-2].value
    assert clinicians["comment"].str.startswith("comment by").all()
    assert set(judges["status"]) == {"ok", "failed"}
    at.text_input(key="agreement_item_id").input("nope").run()
    assert [e.value for e in at.error] == ["'nope' is not an item id (a whole number)."]


def test_a_new_rating_invalidates_the_kept_figures(tmp_path, monkeypatch):
    url = copy_of("seeded", tmp_path)
    add_small_study(url)
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    at = open_page(url)
    assert at.selectbox(key="agreement_study").value == "a-small-study"
    before = cards(at)["clinician-clinician"]
    assert at.run() and cards(at)["clinician-clinician"] == before  # a rerun reads the kept figures
    engine = make_engine(url)
    with transaction(engine) as s:
        study = get_study(s, "a-small-study")
        rubric = rubric_spec(s, study.rubric_id)
        user = s.exec(select(User).where(User.username == "clinician2")).one()
        item = s.exec(select(Item).where(Item.study_id == study.id, Item.instance_id == "0")).one()
        record_rating(s, item=item, rater=user, rubric=rubric, scores={"accuracy": 5, "completeness": 5, "clarity": 5})
    engine.dispose()
    at.run()  # the kept figures at once, marked stale, while the new ones are computed (test_dashboard_refresh)
    assert wait_for_updates(timeout=60)
    at.run()
    assert not at.exception
    assert cards(at)["clinician-clinician"] != before


def test_after_a_rating_the_bootstrap_tables_wait_for_the_run_that_draws_the_current_figures(tmp_path, monkeypatch):
    """The extra tables are asked at the version of the figures shown: the run that shows older figures does not
    start their bootstrap beside the figures' update (it would take the CPU from it); the run that draws the
    current figures does."""
    from medhelm_core import figures

    url = copy_of("seeded", tmp_path)
    add_small_study(url)
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    asked: list[object] = []
    ask = figures.extra_figures

    def recorded(engine, key, version, name, **options):
        asked.append(version)
        return ask(engine, key, version, name, **options)

    monkeypatch.setattr(figures, "extra_figures", recorded)
    at = open_page(url)
    assert wait_for_updates(timeout=60)
    engine = make_engine(url)
    with Session(engine) as s:
        before = figures.data_version(s, get_study(s, "a-small-study"))
    with transaction(engine) as s:
        study = get_study(s, "a-small-study")
        user = s.exec(select(User).where(User.username == "clinician2")).one()
        item = s.exec(select(Item).where(Item.study_id == study.id, Item.instance_id == "1")).one()
        record_rating(s, item=item, rater=user, rubric=rubric_spec(s, study.rubric_id),
                      scores={"accuracy": 5, "completeness": 5, "clarity": 5})
    with Session(engine) as s:
        after = figures.data_version(s, get_study(s, "a-small-study"))
    engine.dispose()
    assert after != before
    asked.clear()
    at.run()  # the figures of `before`, marked stale, while those of `after` are computed
    assert asked and set(asked) == {before}
    assert wait_for_updates(timeout=60)
    asked.clear()
    at.run()  # the current figures, and now their tables
    assert not at.exception
    assert asked and set(asked) == {after}


def test_the_first_visit_draws_the_headline_without_waiting_for_the_bootstrap_tables(tmp_path, monkeypatch):
    url = copy_of("rated", tmp_path)  # a database no earlier test computed figures for
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    at = open_page(url)
    assert not at.exception and cards(at)
    waiting = [c.value for c in at.caption if "in the background" in c.value]
    assert waiting == [
        "Computing this table in the background (its bootstrap takes seconds); it appears here by itself.",
        "Computing this table in the background (its bootstrap takes seconds); it appears here by itself.",
        "Comparing the jury versions in the background; the comparison appears here by itself.",
    ]
    assert wait_for_updates(timeout=120)
    at.run()
    assert not at.exception
    assert not [c.value for c in at.caption if "in the background" in c.value]
    assert "Which judges to trust" in [s.value for s in at.subheader]
    assert any("AC2 95% CI" in d.value.columns for d in at.dataframe)  # the skew-robust table
    assert not any("Comparing the jury versions" in c.value for c in at.caption)


@pytest.mark.parametrize("account", [("clinician1", "clinician1-demo")])
def test_a_clinician_cannot_open_the_page(rated_url, account):
    at = open_page(rated_url, *account)
    assert not at.exception
    assert [e.value for e in at.error] == ["Your account cannot open this page."]
    assert not at.metric and not charts(at)


def test_a_chart_is_built_and_converted_once_per_figures_object_and_forgotten_with_them():
    import gc

    import altair as alt
    import pandas as pd

    from pages import common

    class Figures:  # what the page keeps: an object that never changes
        pass

    built: list[str] = []

    def build() -> alt.Chart:
        built.append("built")
        return alt.Chart(pd.DataFrame({"x": [1, 2], "y": [3, 4]})).mark_point().encode(x="x", y="y").properties(
            height=120, title="a chart")

    figures_a, figures_b = Figures(), Figures()
    common.chart(figures_a, ("icc", "composite"), build, width="stretch", room=110)
    common.chart(figures_a, ("icc", "composite"), build, width="stretch", room=110)
    assert built == ["built"]  # the second run draws the kept spec
    spec = common._SPECS[(id(figures_a), ("icc", "composite"))]
    assert spec["title"] == "a chart" and spec["datasets"]  # Streamlit's conversion: the data travels as Arrow
    common.chart(figures_a, ("icc", "accuracy"), build)
    common.chart(figures_b, ("icc", "composite"), build)
    assert len(built) == 3  # another criterion, newer figures: built again
    owner = id(figures_a)
    del figures_a
    gc.collect()
    assert not [k for k in common._SPECS if k[0] == owner]
    assert (id(figures_b), ("icc", "composite")) in common._SPECS
