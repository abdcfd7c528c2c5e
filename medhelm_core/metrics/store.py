"""Metric scores in the database: which items are done, writing a batch, and reading them back.

A score row is keyed by (item, metric, settings_hash), so one item can hold ROUGE-L with the stemmer on
and off, or BERTScore of two models, side by side. An item counts as done for a spec when all its metric
names (F, P and R) are stored with that spec's settings hash: they are always written together.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import func
from sqlmodel import Session, col, select

from medhelm_core.db.models import Item, MetricScore, Study

__all__ = ["metric_scores_frame", "metric_settings_frame", "scored_item_ids", "write_scores"]

SCORE_COLUMNS = ["item_id", "benchmark", "instance_id", "model", "metric", "family", "value", "settings_hash",
                 "settings", "computed_at"]


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


def metric_scores_frame(session: Session, study: Study) -> pd.DataFrame:
    """Every metric score of the study's items, one row per (item, metric, settings), with the item's
    benchmark, instance and model and the settings the score was computed with.

    Examples
    --------
    >>> frame = metric_scores_frame(session, study)  # doctest: +SKIP
    >>> frame.pivot_table(index="item_id", columns="metric", values="value")  # doctest: +SKIP
    """
    rows = session.exec(
        select(MetricScore, Item.benchmark, Item.instance_id, Item.model)
        .join(Item, Item.id == MetricScore.item_id)
        .where(Item.study_id == study.id)
        .order_by(MetricScore.item_id, MetricScore.metric)
    ).all()
    return pd.DataFrame(
        [
            {
                "item_id": score.item_id,
                "benchmark": benchmark,
                "instance_id": instance_id,
                "model": model,
                "metric": score.metric,
                "family": score.settings.get("family", score.metric),
                "value": score.value,
                "settings_hash": score.settings_hash,
                "settings": score.settings,
                "computed_at": score.computed_at,
            }
            for score, benchmark, instance_id, model in rows
        ],
        columns=SCORE_COLUMNS,
    )


def metric_settings_frame(scores: pd.DataFrame) -> pd.DataFrame:
    """The settings variants in a :func:`metric_scores_frame`: one row per (family, settings_hash) with
    how many items it covers and when it was last computed, the most recent first."""
    columns = ["family", "settings_hash", "settings", "items", "last_computed"]
    if scores.empty:
        return pd.DataFrame(columns=columns)
    grouped = scores.groupby(["family", "settings_hash"], as_index=False).agg(
        settings=("settings", "first"), items=("item_id", "nunique"), last_computed=("computed_at", "max")
    )
    return grouped.sort_values(["family", "last_computed"], ascending=[True, False], ignore_index=True)[columns]
