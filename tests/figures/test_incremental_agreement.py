"""After a change the Agreement figures recompute only the scopes it touched (its benchmark's and the pooled
ones), and the table they give is the one a whole recompute gives, to the last bit."""

from __future__ import annotations

import pandas as pd
from sqlmodel import Session, select
from support.dashboard_support import copy_of

from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Item, Rating, User
from medhelm_core.demo import DEMO_STUDY
from medhelm_core.figures import FigureKey, compute_agreement, fresh_figures, load_dashboard_data
from medhelm_core.figures import cache as figures_module
from medhelm_core.figures.tables import judge_subset_table, robust_agreement
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_study


def _revise_a_rating(engine) -> str:  # noqa: ANN001 - an Engine; returns the item's benchmark
    """clinician1 revises their rating of their first item (every score moves); the item's benchmark."""
    with transaction(engine) as s:
        study = get_study(s, DEMO_STUDY)
        user = s.exec(select(User).where(User.username == "clinician1")).one()
        rating = s.exec(select(Rating).where(Rating.rater_id == user.id).order_by(Rating.item_id)).first()
        item = s.get(Item, rating.item_id)
        rubric = rubric_spec(s, study.rubric_id)
        record_rating(s, item=item, rater=user, rubric=rubric,
                      scores={c: 1 if rating.score > 2 else 5 for c in rubric.criterion_names})
        return item.benchmark


def test_a_rating_recomputes_its_benchmark_and_pooled_only_and_matches_a_whole_recompute(tmp_path):
    engine = make_engine(copy_of("rated", tmp_path))
    with Session(engine) as s:
        study = get_study(s, DEMO_STUDY)
    key = FigureKey.of(engine, study)
    before = fresh_figures(engine, key)
    before.robust(), before.judge_subsets()  # the extra tables' scope rows are kept for the next version
    kept = set(figures_module.SCOPE_CACHE.rows((key, "agreement")))
    criteria = before.table["criterion"].nunique()
    benchmarks = set(before.table["benchmark"])
    assert len(benchmarks) > 2  # several benchmarks and pooled: most scopes are left as they were

    changed = _revise_a_rating(engine)
    after = fresh_figures(engine, key)
    rows = figures_module.SCOPE_CACHE.rows((key, "agreement"))
    computed = [k for k in rows if k not in kept]
    assert sorted({k[0][0] for k in computed}) == sorted({changed, "pooled"})
    assert len(computed) == 2 * criteria
    assert len(rows) == len(kept)  # the older versions' rows are dropped: one table's worth is kept
    assert not after.table.equals(before.table)

    with Session(engine) as s:
        data = load_dashboard_data(s, get_study(s, DEMO_STUDY))
    pd.testing.assert_frame_equal(after.table, compute_agreement(data.long), check_exact=True)
    # The extra tables too: only the touched scopes recomputed, the same figures as computed whole.
    pd.testing.assert_frame_equal(after.robust(), robust_agreement(data), check_exact=True)
    pd.testing.assert_frame_equal(after.judge_subsets(), judge_subset_table(data.long), check_exact=True)
    for table in ("robust", "judge subsets"):  # one version of every scope kept
        kept_rows = figures_module.SCOPE_CACHE.rows((key, table))
        assert {k[0][1] for k in kept_rows} == benchmarks and len({k[0] for k in kept_rows}) == len(kept_rows)
    engine.dispose()
