"""The dashboard's library: it loads what study_data loads, shows the agreement engine's figures, and its
cache key changes whenever the figures could."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sqlmodel import Session, select
from support.dashboard_support import JUDGES, facts_of, rate_demo, rated_database, rated_figures

from medhelm_core.agreement import agreement_table
from medhelm_core.db.engine import make_engine
from medhelm_core.db.models import Item, JuryRun, MetricScore, User, utcnow
from medhelm_core.demo import DEMO_STUDY, MEDHELM_STUDY
from medhelm_core.errors import NotEnoughRatingsError, NotFoundError
from medhelm_core.figures import (
    ITEM_SELECTION,
    bland_altman,
    bland_altman_chart,
    clinician_leniency,
    compute_agreement,
    criterion_views,
    data_version,
    distribution_chart,
    headline_table,
    icc_chart,
    item_detail,
    item_means,
    judge_chart,
    judge_table,
    leniency_chart,
    load_dashboard_data,
    scatter_chart,
    score_distribution,
)
from medhelm_core.frames import jury_long_frame, metrics_long_frame, scores_long_frame
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_study

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


@pytest.fixture(scope="module")
def rated():
    """The shared rated demo (read only), its facts, its dashboard data and its agreement table."""
    engine = make_engine(f"sqlite:///{rated_database('rated')}")
    data, table = rated_figures()
    with Session(engine) as s:
        facts = {"run_id": data.jury_run.id, **facts_of(s, get_study(s, DEMO_STUDY))}
    yield engine, facts, data, table
    engine.dispose()


@pytest.fixture(scope="module")
def seeded():
    """The shared demo without ratings (read only)."""
    engine = make_engine(f"sqlite:///{rated_database('seeded')}")
    yield engine
    engine.dispose()


def test_the_dashboard_loads_what_study_data_loads_on_both_databases(engine):
    rate_demo(engine, hostile_item=False)
    with Session(engine) as s:
        study = get_study(s, DEMO_STUDY)
        data = load_dashboard_data(s, study)
        reference = scores_long_frame(s, study)
        jury = jury_long_frame(s, study)
    key = ["item_id", "rater_id", "criterion"]
    mine = data.long[data.long["rater_kind"] != "judge"].sort_values(key).reset_index(drop=True)
    theirs = reference.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(mine[theirs.columns], theirs, check_dtype=False)
    # The jury mean rests on the judges that survived: the failed verdict is not counted.
    assert set(jury["n_judges"]) == {2, 3}
    assert set(data.long.loc[data.long["rater_kind"] == "judge", "rater_id"]) == set(JUDGES)
    assert data.jury_run.n_failed == 1 and not data.jury_run.recorded


def test_the_headline_table_shows_the_engines_figures(rated):
    engine, _, _, table = rated
    headline = headline_table(table)
    with Session(engine) as s:
        reference = agreement_table(scores_long_frame(s, get_study(s, DEMO_STUDY)))
    headline_methods = {"ICC3k", "ICC1_unbalanced"}
    ref = reference[reference["method"].isin(headline_methods) & reference["ci_method"].isin(
        ["F", "range over clinicians"])].set_index(["comparison", "benchmark", "criterion"])
    names = {"ROUGE-L-clinician": "rougeL_f-clinician", "BERTScore-clinician": "bertscore_f1-clinician"}
    # Six comparisons (the pair, ICC(1) over every clinician, the ceiling, the jury, two metrics), four
    # benchmarks and pooled, composite and three criteria.
    assert len(headline) == 6 * 5 * 4
    assert (headline["n_available"] >= headline["n_items"]).all() and headline["form"].str.len().gt(0).all()
    for row in headline.itertuples():
        expected = ref.loc[(names.get(row.comparison, row.comparison), row.benchmark, row.criterion)]
        assert row.n_items == expected["n_items"]
        assert np.isclose(row.icc, expected["estimate"], atol=1e-12, equal_nan=True)
        assert np.isclose(row.ci_low, expected["ci_low"], atol=1e-12, equal_nan=True)
    first = headline.iloc[0]
    assert (first["comparison"], first["benchmark"], first["criterion"]) == ("clinician-clinician", "pooled",
                                                                             "composite")


def test_the_medhelm_validation_study_shows_the_papers_0474(seeded):
    with Session(seeded) as s:
        data = load_dashboard_data(s, get_study(s, MEDHELM_STUDY))
    assert data.jury_run.recorded and "recorded" in data.jury_run.label
    headline = headline_table(compute_agreement(data.long, benchmarks=["aci_bench", "medi_qa"]))
    jury = headline.query("comparison == 'jury-clinician' and benchmark == 'pooled' and criterion == 'composite'")
    assert round(float(jury["icc"].iloc[0]), 3) == 0.474 and int(jury["n_items"].iloc[0]) == 56
    assert (round(float(jury["ci_low"].iloc[0]), 2), round(float(jury["ci_high"].iloc[0]), 2)) == (0.10, 0.69)
    rouge = headline.query("comparison == 'ROUGE-L-clinician' and benchmark == 'pooled' and criterion == 'composite'")
    assert rouge["icc"].isna().all() and rouge["note"].iloc[0] == "no ROUGE-L scores yet"


def test_a_study_without_ratings_says_not_enough_ratings_yet(seeded):
    with Session(seeded) as s:
        data = load_dashboard_data(s, get_study(s, DEMO_STUDY))
    with pytest.raises(NotEnoughRatingsError, match="Not enough ratings yet: 0 item"):
        compute_agreement(data.long)


def test_the_data_version_changes_when_a_rating_is_revised(rated):
    engine, facts, _, _ = rated
    with Session(engine) as s:  # never committed: the module's other tests see the data unchanged
        study = get_study(s, DEMO_STUDY)
        before = data_version(s, study)
        assert data_version(s, study) == before
        user = s.exec(select(User).where(User.username == "clinician1")).one()
        item = s.get(Item, facts["hostile_item"])
        rubric = rubric_spec(s, study.rubric_id)
        record_rating(s, item=item, rater=user, rubric=rubric, scores={"accuracy": 1, "completeness": 1, "clarity": 2})
        after = data_version(s, study)
        assert after != before
        s.add(MetricScore(item_id=item.id, metric="rougeL_f", value=0.5, settings={"family": "rougeL"},
                          settings_hash="r2", computed_at=utcnow()))
        s.flush()
        assert data_version(s, study) != after
        # A second settings variant of ROUGE-L replaces the first rather than giving two scores per item.
        data = load_dashboard_data(s, study)
        assert data.metric_settings["rougeL_f"]["settings_hash"] == "r2"
        assert (data.long["rater_id"] == "rougeL_f").sum() == 1
        key = ["item_id", "rater_id"]
        mine = data.long[data.long["rater_kind"] == "metric"].sort_values(key).reset_index(drop=True)
        theirs = metrics_long_frame(s, study).astype({"item_id": str}).sort_values(key).reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, theirs[mine.columns], check_dtype=False)
        # A newer run that has no surviving verdict yet does not hide the last usable jury.
        s.add(JuryRun(study_id=study.id, name="just started", source="litellm", config={}, status="pending"))
        s.flush()
        assert load_dashboard_data(s, study).jury_run.id == facts["run_id"]


def test_item_means_and_bland_altman_are_on_the_rating_scale(rated):
    _, _, data, _ = rated
    means = item_means(data.long, "composite", data.criteria)
    assert means["clinician_mean"].between(1, 5).all() and means["jury"].between(1, 5).all()
    assert np.allclose(means["difference"], means["jury"] - means["clinician_mean"])
    limits = bland_altman(means)
    assert limits["n_items"] == 48
    assert np.isclose(limits["loa_high"] - limits["bias"], 1.96 * means["difference"].std(ddof=1))


def test_the_lenient_clinician_has_a_positive_mean_z(rated):
    _, _, data, _ = rated
    leniency = clinician_leniency(data.long, "composite", data.criteria).set_index("clinician")
    assert leniency.loc["clinician3", "mean_z"] > 0.3
    assert leniency.loc["clinician1", "mean_z"] < 0 and leniency.loc["clinician2", "mean_z"] < 0
    assert leniency["icc3k"].notna().all() and (leniency["spread"] > 0).all()


def test_the_page_views_equal_the_tables_computed_on_their_own(rated):
    _, _, data, _ = rated
    for criterion in ("composite", data.criteria[0]):
        views = criterion_views(data, criterion=criterion)  # the means and the leniency share one reduction
        pd.testing.assert_frame_equal(views.means, item_means(data.long, criterion, data.criteria), check_exact=True)
        pd.testing.assert_frame_equal(views.leniency, clinician_leniency(data.long, criterion, data.criteria),
                                      check_exact=True)


def test_per_judge_rows_and_score_distribution(rated):
    _, _, data, table = rated
    judges = judge_table(table)
    pooled = judges.query("benchmark == 'pooled' and criterion == 'composite'")
    assert set(pooled["judge"]) == {"jury (mean)", *JUDGES}
    dist = score_distribution(data.long, data.criteria)
    assert set(dist["rater_kind"]) == {"clinician", "jury", "judge"}
    shares = dist.groupby(["rater_kind", "criterion"])["share"].sum()
    assert np.allclose(shares, 1.0)


def test_every_chart_builds_and_the_item_charts_are_clickable(rated):
    _, _, data, table = rated
    headline = headline_table(table)
    means = item_means(data.long)
    charts = [icc_chart(headline), scatter_chart(means), bland_altman_chart(means, bland_altman(means)),
              judge_chart(judge_table(table)), leniency_chart(clinician_leniency(data.long)),
              distribution_chart(score_distribution(data.long), data.criteria)]
    specs = [c.to_dict() for c in charts]
    for spec in specs[1:3]:
        params = [p for layer in spec["layer"] for p in layer.get("params", [])] + spec.get("params", [])
        assert any(p["name"] == ITEM_SELECTION for p in params)


def test_the_drill_down_has_every_clinician_and_judge(rated):
    engine, facts, _, _ = rated
    with Session(engine) as s:
        study = get_study(s, DEMO_STUDY)
        detail = item_detail(s, study, facts["failed_item"], facts["run_id"])
        assert len(detail.clinicians) == 2 and detail.clinicians["comment"].str.startswith("comment by").all()
        assert set(detail.judges["judge"]) == set(JUDGES)
        failed = detail.judges.set_index("judge").loc[JUDGES[2]]
        assert failed["status"] == "failed" and "no JSON" in failed["error"]
        ok = detail.judges.set_index("judge").loc[JUDGES[0]]
        assert ok["explanation_accuracy"].startswith(JUDGES[0])
        with pytest.raises(NotFoundError):
            item_detail(s, get_study(s, MEDHELM_STUDY), facts["failed_item"])
