"""Metric scores as frames: every stored score, and the metrics set beside clinicians as raters.

A study can hold the same metric computed with several settings (stemmer on and off, another BERT model).
For agreement each metric must have one score per item, so one rule picks the variant: the settings
computed most recently (:func:`newest_variants`). The agreement engine, the exports and the dashboard all
read the metrics through it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlmodel import Session, col, select

from medhelm_core.db.models import Item, MetricScore, Study
from medhelm_core.frames.items import item_identity_frame
from medhelm_core.frames.rows import LONG_COLUMNS, select_frame

#: the metric scores that stand beside clinicians as raters (F-measures; P and R stay in the exports)
AGREEMENT_METRICS = ("rougeL_f", "rougeLsum_f", "bertscore_f1")
SCORE_COLUMNS = ["item_id", "benchmark", "instance_id", "model", "metric", "family", "value", "settings_hash",
                 "settings", "computed_at"]


def newest_variants(scores: pd.DataFrame) -> pd.Series:
    """The settings variant each metric is read with: the one computed most recently.

    ``scores`` has a row per score with ``metric``, ``settings_hash`` and ``computed_at``; the result maps
    each metric to its chosen ``settings_hash``.

    Examples
    --------
    >>> scores = pd.DataFrame({"metric": ["rougeL_f", "rougeL_f"], "settings_hash": ["stem", "plain"],
    ...                        "computed_at": pd.to_datetime(["2026-01-02", "2026-01-01"])})
    >>> newest_variants(scores).to_dict()
    {'rougeL_f': 'stem'}
    """
    return scores.sort_values("computed_at").groupby("metric")["settings_hash"].last()


def _newest_scores(
    session: Session, study: Study, metrics: tuple[str, ...], items: pd.DataFrame | None
) -> tuple[pd.DataFrame, pd.Series]:
    # Ids and values only; each score is placed (benchmark, model) from the item identities, which is
    # cheaper than reading the same two strings again for each of 40,000 scores.
    scores = select_frame(
        session,
        select(MetricScore.item_id, MetricScore.metric, MetricScore.value, MetricScore.settings_hash,
               MetricScore.computed_at)
        .join(Item, Item.id == MetricScore.item_id)
        .where(Item.study_id == study.id, col(MetricScore.metric).in_(list(metrics))),
        ["item_id", "metric", "value", "settings_hash", "computed_at"],
    )
    if scores.empty:
        return pd.DataFrame(columns=LONG_COLUMNS), pd.Series(dtype=object)
    latest = newest_variants(scores)
    picked = scores[scores["settings_hash"] == scores["metric"].map(latest)]
    identity = (items if items is not None else item_identity_frame(session, study)).set_index("item_id")
    long = picked.rename(columns={"metric": "rater_id", "value": "score"}).assign(
        rater_kind="metric",
        criterion="composite",
        benchmark=picked["item_id"].map(identity["benchmark"]),
        model=picked["item_id"].map(identity["model"]),
    )
    return long[LONG_COLUMNS].reset_index(drop=True), latest


def metrics_long_frame(session: Session, study: Study, metrics: tuple[str, ...] = AGREEMENT_METRICS) -> pd.DataFrame:
    """Metric scores as raters (``rater_kind='metric'``, ``rater_id`` the metric name, one score per item and
    metric: the :func:`newest_variants`), ``item_id`` an int."""
    return _newest_scores(session, study, metrics, None)[0]


def metric_raters(
    session: Session,
    study: Study,
    metrics: tuple[str, ...] = AGREEMENT_METRICS,
    items: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """:func:`metrics_long_frame` and, per metric, the settings variant it uses (``settings_hash`` and
    ``settings``), which the dashboard and the report's manifest name.

    ``items`` is the study's :func:`~medhelm_core.frames.items.item_identity_frame` (integer ids) when the
    caller has it already.
    """
    long, latest = _newest_scores(session, study, metrics, items)
    chosen: dict[str, dict[str, Any]] = {}
    for metric, digest in latest.items():
        settings = session.exec(
            select(MetricScore.settings)
            .where(MetricScore.metric == metric, MetricScore.settings_hash == digest)
            .limit(1)  # without it, every row's settings are fetched and decoded to keep the first
        ).first()
        chosen[str(metric)] = {"settings_hash": digest, "settings": dict(settings or {})}
    return long, chosen


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
