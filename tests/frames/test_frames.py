"""The loader: one jury mean wherever the jury is read, one default jury run with its one fallback, and a run of
another study refused rather than read."""

from __future__ import annotations

import pandas as pd
import pytest
from sqlmodel import Session
from support.dashboard_support import rated_database

from medhelm_core.db.engine import make_engine
from medhelm_core.db.models import JuryRun, Study
from medhelm_core.demo import DEMO_STUDY, MEDHELM_STUDY
from medhelm_core.errors import NotFoundError
from medhelm_core.figures import load_dashboard_data
from medhelm_core.figures.jury_versions_data import load_version_inputs
from medhelm_core.frames import default_jury_run, judge_scores_frame, jury_long_frame, study_jury_run
from medhelm_core.jury.results import criterion_means, item_jury_scores, verdict_scores_frame
from medhelm_core.studies import get_study

KEY = ["item_id", "criterion"]


@pytest.fixture(scope="module")
def rated():
    """The shared rated demo (read only: every test here rolls back what it adds)."""
    engine = make_engine(f"sqlite:///{rated_database('rated')}")
    yield engine
    engine.dispose()


def _means(frame: pd.DataFrame) -> pd.Series:
    keyed = frame.astype({"item_id": str}).set_index(KEY)["score"].sort_index()
    return keyed.rename("score")


def test_the_jury_mean_is_the_same_number_wherever_it_is_read(rated):
    with Session(rated) as s:
        study = get_study(s, DEMO_STUDY)
        run = default_jury_run(s, study)
        engine_view = jury_long_frame(s, study)
        dashboard = load_dashboard_data(s, study).long
        versions = load_version_inputs(s, study, [run.id]).juries
        results = criterion_means(s, run.id)
        per_item = item_jury_scores(s, run.id)
        verdicts = verdict_scores_frame(s, run.id)
    reference = _means(engine_view)
    gold_free = reference.index.get_level_values("item_id").isin(dashboard["item_id"].unique())
    pd.testing.assert_series_equal(_means(dashboard[dashboard["rater_kind"] == "jury"]), reference[gold_free])
    pd.testing.assert_series_equal(_means(versions), reference[gold_free])
    pd.testing.assert_series_equal(_means(results), reference)
    # The per-item score is the mean over every surviving judge and criterion of the same flattened verdicts.
    ok = verdicts[verdicts["status"] == "ok"]
    expected = ok.groupby("item_id")["score"].mean()
    got = per_item.set_index("item_id")["jury_score"].dropna()
    pd.testing.assert_series_equal(got, expected.rename("jury_score"), check_names=False, check_index_type=False)


def test_the_dashboard_and_the_verdict_table_flatten_a_verdict_alike(rated):
    with Session(rated) as s:
        run = default_jury_run(s, get_study(s, DEMO_STUDY))
        ids_only = judge_scores_frame(s, run.id)
        with_texts = verdict_scores_frame(s, run.id)
    columns = ["item_id", "judge", "status", "criterion", "score"]
    order = ["item_id", "judge", "criterion"]
    left = ids_only.sort_values(order, na_position="first").reset_index(drop=True)
    right = with_texts[columns].sort_values(order, na_position="first").reset_index(drop=True)
    pd.testing.assert_frame_equal(left, right)
    assert (with_texts["status"] != "ok").any() and with_texts.loc[with_texts["status"] != "ok", "score"].isna().all()


def test_a_study_whose_runs_have_no_surviving_verdict_has_no_default_unless_the_newest_is_asked_for(rated):
    with Session(rated) as s:
        demo = get_study(s, DEMO_STUDY)
        empty = Study(name="runs-without-verdicts", rubric_id=demo.rubric_id)
        s.add(empty)
        s.flush()
        pending = JuryRun(study_id=empty.id, name="just started", source="litellm", config={}, status="pending")
        s.add(pending)
        s.flush()
        assert default_jury_run(s, empty) is None
        assert default_jury_run(s, empty, or_newest=True).id == pending.id
        assert load_dashboard_data(s, empty).jury_run.id == pending.id
        assert jury_long_frame(s, empty).empty
        s.rollback()


def test_a_jury_run_of_another_study_is_refused_not_read(rated):
    with Session(rated) as s:
        demo, medhelm = get_study(s, DEMO_STUDY), get_study(s, MEDHELM_STUDY)
        theirs = default_jury_run(s, medhelm)
        with pytest.raises(NotFoundError, match=f"has no jury run {theirs.id} \\(its runs: "):
            jury_long_frame(s, demo, theirs.id)
        with pytest.raises(NotFoundError, match=f"has no jury run {theirs.id}"):
            study_jury_run(s, demo, theirs.id)
