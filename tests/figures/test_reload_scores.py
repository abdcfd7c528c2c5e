"""After a change, the dashboard reads again only the benchmarks whose counters moved (after a rating, only their
clinicians' ratings), and the scores it ends up with are the ones a whole load gives, row for row: after a rating,
a judge's verdict, a gold item, and a metric's new settings variant (which reaches every benchmark, so it falls back
to a whole load)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pandas as pd
import pytest
from sqlmodel import Session, select
from support.dashboard_support import copy_of

from medhelm_core.agreement import validate_long
from medhelm_core.agreement.contract import is_trusted
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import GoldRange, Item, JudgeVerdict, MetricScore, Rating, User, utcnow
from medhelm_core.demo import DEMO_STUDY
from medhelm_core.figures import data as data_module
from medhelm_core.figures.cache import changed_benchmarks, clinicians_only
from medhelm_core.figures.data import DashboardData, load_dashboard_data, reload_dashboard_data
from medhelm_core.frames import data_version
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_study


def _first_rated_item(s: Session, username: str = "clinician1") -> tuple[User, Item]:
    user = s.exec(select(User).where(User.username == username)).one()
    rating = s.exec(select(Rating).where(Rating.rater_id == user.id).order_by(Rating.item_id)).first()
    return user, s.get(Item, rating.item_id)


def revise_rating(s: Session) -> str:
    user, item = _first_rated_item(s)
    rubric = rubric_spec(s, get_study(s, DEMO_STUDY).rubric_id)
    record_rating(s, item=item, rater=user, rubric=rubric, scores=dict.fromkeys(rubric.criterion_names, 1))
    return item.benchmark


def fail_a_verdict(s: Session) -> str:
    study = get_study(s, DEMO_STUDY)
    verdict = s.exec(select(JudgeVerdict).join(Item, Item.id == JudgeVerdict.item_id)
                     .where(Item.study_id == study.id, JudgeVerdict.status == "ok").order_by(JudgeVerdict.id)).first()
    verdict.status, verdict.scores = "failed", {}
    s.add(verdict)
    return s.get(Item, verdict.item_id).benchmark


def mark_gold(s: Session) -> str:
    _, item = _first_rated_item(s, "clinician2")
    s.add(GoldRange(item_id=item.id, criterion="accuracy", low=1, high=5))
    return item.benchmark


def new_metric_variant(s: Session) -> str:
    _, item = _first_rated_item(s)
    newest = s.exec(select(MetricScore).where(MetricScore.item_id == item.id)
                    .order_by(MetricScore.computed_at.desc())).first()
    s.add(MetricScore(item_id=item.id, metric=newest.metric, value=0.5, settings={"stemmer": False},
                      settings_hash="a-new-variant", computed_at=utcnow() + timedelta(days=1)))
    return item.benchmark


def assert_same(reloaded: DashboardData, whole: DashboardData) -> None:
    pd.testing.assert_frame_equal(reloaded.long, whole.long, check_exact=True)
    pd.testing.assert_frame_equal(reloaded.speed, whole.speed, check_exact=True)
    pd.testing.assert_frame_equal(reloaded.items, whole.items, check_exact=True)
    assert reloaded.jury_run == whole.jury_run
    assert (reloaded.metric_settings, reloaded.gold_items) == (whole.metric_settings, whole.gold_items)


@pytest.mark.parametrize(("change", "reads"), [
    (revise_rating, "clinicians"), (fail_a_verdict, "benchmark"), (mark_gold, "benchmark"),
    (new_metric_variant, "everything"),
])
def test_a_reload_reads_the_changed_benchmark_and_equals_a_whole_load(
    tmp_path, monkeypatch, change: Callable[[Session], str], reads: str
):
    engine = make_engine(copy_of("rated", tmp_path))
    with Session(engine) as s:
        study = get_study(s, DEMO_STUDY)
        before, previous = data_version(s, study), load_dashboard_data(s, study)
    assert len(previous.parts) > 2 and previous.jury_run is not None and previous.metric_settings
    with transaction(engine) as s:
        benchmark = change(s)
    read: list[object] = []
    verdicts_read: list[object] = []
    original, original_verdicts = data_module.clinician_ratings_frame, data_module.judge_scores_frame
    monkeypatch.setattr(data_module, "clinician_ratings_frame",
                        lambda *a, **k: read.append(k.get("benchmarks")) or original(*a, **k))
    monkeypatch.setattr(data_module, "judge_scores_frame",
                        lambda *a, **k: verdicts_read.append(k.get("benchmarks")) or original_verdicts(*a, **k))
    with Session(engine) as s:
        study = get_study(s, DEMO_STUDY)
        after = data_version(s, study)
        changed = changed_benchmarks(before, after)
        assert changed & set(previous.parts) == {benchmark}
        only = clinicians_only(before, after, changed) & set(previous.parts)
        assert only == ({benchmark} if reads == "clinicians" else set())
        reloaded = reload_dashboard_data(s, study, previous, changed, clinicians_only=only)
        monkeypatch.undo()
        whole = load_dashboard_data(s, study)
    # that benchmark only; a change that reaches further is found there, then everything is read
    assert read == ([[benchmark], None] if reads == "everything" else [[benchmark]])
    # after a rating, the benchmark's verdicts are kept, not read again
    assert verdicts_read == {"clinicians": [], "benchmark": [[benchmark]], "everything": [[benchmark], None]}[reads]
    assert not reloaded.long.equals(previous.long)
    assert_same(reloaded, whole)
    # both checked against the contract once, so the figures do not check them again
    assert is_trusted(reloaded.long) and is_trusted(whole.long) and validate_long(reloaded.long) is reloaded.long
    engine.dispose()


def test_a_change_to_the_whole_study_asks_for_a_whole_load():
    version = (1, 60.0, (("*", 3, "t"), ("aci_bench", 5, "t")))
    assert changed_benchmarks(version, (1, 60.0, (("*", 4, "t"), ("aci_bench", 5, "t")))) is None
    assert changed_benchmarks(version, (1, 30.0, (("*", 3, "t"), ("aci_bench", 5, "t")))) is None  # settings
    assert changed_benchmarks(version, (1, 60.0, (("*", 3, "t"), ("aci_bench", 5, "t"), ("~", 1, "u")))) is None
    assert changed_benchmarks(version, "not a data version") is None
    assert changed_benchmarks(version, version) == set()
