"""Metric scores in the database: which items are done, writing a batch, and reading them back.

A score row is keyed by (item, metric, settings_hash), so one item can hold ROUGE-L with the stemmer on
and off, or BERTScore of two models, side by side. An item counts as done for a spec when all its metric
names (F, P and R) are stored with that spec's settings hash: they are always written together. Reading
the scores back as frames is the loader's (:func:`medhelm_core.frames.metric_scores_frame`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from medhelm_core.db.models import Item, MetricScore, Study

__all__ = ["metric_settings_frame", "reference_counts", "scored_item_ids", "write_scores"]



def scored_item_ids(session: Session, study: Study, metric_names: Sequence[str], settings_hash: str) -> set[int]:
    """Items of ``study`` that already hold every one of ``metric_names`` under ``settings_hash``."""
    rows = session.exec(
        select(MetricScore.item_id)
        .join(Item, Item.id == MetricScore.item_id)
        .where(
            Item.study_id == study.id,
            MetricScore.settings_hash == settings_hash,
            col(MetricScore.metric).in_(list(metric_names)),
        )
        .group_by(MetricScore.item_id)
        .having(func.count(func.distinct(MetricScore.metric)) == len(set(metric_names)))
    ).all()
    return set(rows)


def write_scores(
    session: Session,
    scores: Iterable[tuple[int, dict[str, float]]],
    settings: dict[str, Any],
    settings_hash: str,
) -> int:
    """Add the scores ``(item_id, {metric: value})`` in the caller's transaction; return rows written.

    Rows already there (another run got to them first) are left as they are, so a batch never fails on
    the unique key because of work done meanwhile.
    """
    scores = list(scores)
    if not scores:
        return 0
    existing = {
        (item_id, metric)
        for item_id, metric in session.exec(
            select(MetricScore.item_id, MetricScore.metric).where(
                col(MetricScore.item_id).in_([item_id for item_id, _ in scores]),
                MetricScore.settings_hash == settings_hash,
            )
        ).all()
    }
    rows = [
        MetricScore(item_id=item_id, metric=metric, value=float(value), settings=settings,
                    settings_hash=settings_hash)
        for item_id, values in scores
        for metric, value in values.items()
        if (item_id, metric) not in existing
    ]
    session.add_all(rows)
    return len(rows)


def metric_settings_frame(scores: pd.DataFrame) -> pd.DataFrame:
    """The settings variants in a :func:`~medhelm_core.frames.metric_scores_frame`: one row per (family,
    settings_hash) with how many items it covers and when it was last computed, the most recent first."""
    columns = ["family", "settings_hash", "settings", "items", "last_computed"]
    if scores.empty:
        return pd.DataFrame(columns=columns)
    grouped = scores.groupby(["family", "settings_hash"], as_index=False).agg(
        settings=("settings", "first"), items=("item_id", "nunique"), last_computed=("computed_at", "max")
    )
    return grouped.sort_values(["family", "last_computed"], ascending=[True, False], ignore_index=True)[columns]


def reference_counts(session: Session, study: Study) -> tuple[int, int]:
    """How many items ``study`` has, and how many of them have no reference (none, or only spaces): those
    cannot be scored against one.

    Examples
    --------
    >>> reference_counts(session, study)  # doctest: +SKIP
    (74, 74)
    """
    count = select(func.count()).select_from(Item).where(Item.study_id == study.id)
    blank = or_(col(Item.reference_text).is_(None), func.trim(Item.reference_text) == "")
    return int(session.exec(count).one()), int(session.exec(count.where(blank)).one())
