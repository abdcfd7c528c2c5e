"""A study's data version: a cheap fingerprint that changes whenever a frame of the loader could."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from medhelm_core.db.models import (
    GoldRange,
    Item,
    JudgeVerdict,
    JuryRun,
    MetricScore,
    Rating,
    RatingSubmission,
    Study,
    VerdictStatus,
)


def data_version(session: Session, study: Study) -> tuple[Any, ...]:
    """A cheap fingerprint of a study's data: it changes whenever the dashboard's figures could.

    Counts and maxima of ids and times of the items, current ratings, rating submissions, jury runs,
    verdicts, metric scores and gold ranges, in a handful of aggregate queries. A revision changes
    ``Rating.updated_at``; a flagged revision that drops a score lowers the count; a retried verdict or a
    re-run metric adds rows. Pages key their caches on it, so a cached figure is never stale.

    Examples
    --------
    >>> before = data_version(session, study)  # doctest: +SKIP
    >>> record_rating(session, item=item, rater=dr_lee, rubric=rubric, scores=scores)  # doctest: +SKIP
    >>> data_version(session, study) != before  # doctest: +SKIP
    True
    """
    in_study = select(Item.id).where(Item.study_id == study.id)
    queries = [
        select(func.count(Item.id), func.max(Item.id)).where(Item.study_id == study.id),
        select(func.count(Rating.id), func.max(Rating.id), func.max(Rating.updated_at), func.sum(Rating.score)).where(
            col(Rating.item_id).in_(in_study)
        ),
        select(func.count(RatingSubmission.id), func.max(RatingSubmission.id)).where(
            col(RatingSubmission.item_id).in_(in_study)
        ),
        select(func.count(JuryRun.id), func.max(JuryRun.id)).where(JuryRun.study_id == study.id),
        select(func.count(JudgeVerdict.id), func.max(JudgeVerdict.id), func.max(JudgeVerdict.created_at))
        .join(JuryRun, JuryRun.id == JudgeVerdict.jury_run_id)
        .where(JuryRun.study_id == study.id),
        select(func.count(JudgeVerdict.id))
        .join(JuryRun, JuryRun.id == JudgeVerdict.jury_run_id)
        .where(JuryRun.study_id == study.id, JudgeVerdict.status == VerdictStatus.ok),
        select(func.count(MetricScore.id), func.max(MetricScore.id), func.max(MetricScore.computed_at)).where(
            col(MetricScore.item_id).in_(in_study)
        ),
        # Gold ranges decide which items the figures leave out.
        select(func.count(GoldRange.id), func.max(GoldRange.id), func.sum(GoldRange.low + GoldRange.high)).where(
            col(GoldRange.item_id).in_(in_study)
        ),
    ]
    version: list[Any] = [study.id, float(study.speed_threshold_seconds)]
    for query in queries:
        row = session.exec(query).one()
        values = row if isinstance(row, tuple) or hasattr(row, "_fields") else (row,)
        version.extend(v.isoformat() if hasattr(v, "isoformat") else v for v in values)
    return tuple(version)
