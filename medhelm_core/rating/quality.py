"""A study's rater quality, gathered from the database: speed flags, gold accuracy and test-retest.

The statistics are pure functions elsewhere (:mod:`medhelm_core.rating.quality_flags`,
:mod:`medhelm_core.agreement.intra_rater`); this module reads what they need for one study, with the study's
own settings (its speed threshold), and returns plain frames for the Raters page, the Agreement page and
``medhelm quality``. Researchers only: nothing here may reach a clinician while rating.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from sqlmodel import Session

from medhelm_core.agreement.intra_rater import INTRA_COLUMNS, intra_rater_agreement
from medhelm_core.db.models import Study
from medhelm_core.frames import clinician_ratings_frame, first_submissions_frame
from medhelm_core.rating.gold import gold_ranges_frame
from medhelm_core.rating.quality_flags import (
    GOLD_ACCURACY_COLUMNS,
    HISTORY_COLUMNS,
    SPEED_SUMMARY_COLUMNS,
    gold_accuracy,
    speed_summary,
)
from medhelm_core.rating.retest import retest_pairs
from medhelm_core.rubric import rubric_spec


@dataclass(frozen=True)
class RaterQuality:
    """Every rater-quality table of one study.

    ``speed`` has one row per clinician (first submissions only: a revision is legitimately quick),
    ``gold`` each clinician's gold accuracy (overall and per criterion), ``retest`` each clinician's
    agreement with themselves on repeated items (and all clinicians pooled), and ``threshold_seconds``
    the study's speed threshold.
    """

    study: str
    threshold_seconds: float
    speed: pd.DataFrame
    gold: pd.DataFrame
    retest: pd.DataFrame
    n_gold_items: int
    n_retest_pairs: int


def _current_gold_scores(session: Session, study: Study, item_ids: list[int]) -> pd.DataFrame:
    if not item_ids:
        return pd.DataFrame(columns=["rater_id", "item_id", "criterion", "score"])
    return clinician_ratings_frame(session, study, item_ids)[["rater_id", "item_id", "criterion", "score"]]


def first_rating_speed(session: Session, study: Study) -> pd.DataFrame:
    """Per clinician, how many first ratings (ordinary or repeat) were faster than the study's speed threshold
    (:func:`~medhelm_core.rating.quality_flags.speed_summary` of first submissions, read with one light query: the
    Agreement page asks for it on every recompute)."""
    return speed_of_first_submissions(first_submissions_frame(session, study), study.speed_threshold_seconds)


def speed_of_first_submissions(firsts: pd.DataFrame, threshold_seconds: float) -> pd.DataFrame:
    """:func:`~medhelm_core.rating.quality_flags.speed_summary` of a
    :func:`~medhelm_core.frames.first_submissions_frame` (in any row order: the summary does not depend on it)."""
    history = firsts[list(HISTORY_COLUMNS)]
    if history.empty:
        return pd.DataFrame(columns=list(SPEED_SUMMARY_COLUMNS))
    return speed_summary(history, threshold_seconds)


def study_rater_quality(session: Session, study: Study) -> RaterQuality:
    """Speed flags, gold accuracy and test-retest agreement of every clinician of ``study``.

    Examples
    --------
    >>> quality = study_rater_quality(session, get_study(session, "demo"))  # doctest: +SKIP
    >>> quality.speed[["rater_id", "n_fast", "share_fast"]]  # doctest: +SKIP
    """
    speed = first_rating_speed(session, study)
    ranges = gold_ranges_frame(session, study)
    gold_items = sorted(ranges["item_id"].unique().tolist())
    scores = _current_gold_scores(session, study, gold_items)
    gold = gold_accuracy(scores, ranges, by_criterion=True) if not scores.empty else pd.DataFrame(
        columns=list(GOLD_ACCURACY_COLUMNS)
    )
    pairs = retest_pairs(session, study)
    criteria = rubric_spec(session, study.rubric_id).criterion_names
    retest = intra_rater_agreement(pairs, criteria) if not pairs.empty else pd.DataFrame(columns=list(INTRA_COLUMNS))
    n_pairs = int(pairs[["rater_id", "item_id"]].drop_duplicates().shape[0]) if not pairs.empty else 0
    return RaterQuality(
        study=study.name,
        threshold_seconds=float(study.speed_threshold_seconds),
        speed=speed,
        gold=gold,
        retest=retest,
        n_gold_items=len(gold_items),
        n_retest_pairs=n_pairs,
    )
