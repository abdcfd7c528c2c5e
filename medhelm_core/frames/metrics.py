"""Metric scores as frames: every stored score, and the metrics set beside clinicians as raters.

A study can hold the same metric computed with several settings (stemmer on and off, another BERT model).
For agreement each metric must have one score per item, so one rule picks the variant: the settings
computed most recently (:func:`newest_variants`). The agreement engine, the exports and the dashboard all
read the metrics through it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
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
    return pd.Series({m: digest for m, (_, digest) in newest_stamps(scores).items()}, dtype=object)


def newest_stamps(scores: pd.DataFrame) -> dict[str, tuple[Any, str]]:
    """Per metric, ``(computed_at, settings_hash)`` of its newest score (a tie in time goes to the larger hash).

    The newest of several sets of scores is the largest of their stamps, so the dashboard keeps one per
    benchmark and, when one benchmark's scores change, finds the variant :func:`newest_variants` would pick over
    the whole study without reading the others again.
    """
    if scores.empty:
        return {}
    last = scores.sort_values(["computed_at", "settings_hash"], kind="stable").groupby("metric").last()
    return {str(m): (at, str(digest)) for m, at, digest in
            zip(last.index, last["computed_at"], last["settings_hash"], strict=True)}


def metric_score_rows(
    session: Session,
    study: Study,
    metrics: tuple[str, ...] = AGREEMENT_METRICS,
    benchmarks: Collection[str] | None = None,
) -> pd.DataFrame:
    """Every stored score of ``metrics`` (each settings variant), ids and values only: ``item_id``, ``metric``,
    ``value``, ``settings_hash``, ``computed_at``; with ``benchmarks``, of those benchmarks' items only."""
    # Each score is placed (benchmark, model) from the item identities later, which is cheaper than reading the
    # same two strings again for each of 40,000 scores.
    statement = (
        select(MetricScore.item_id, MetricScore.metric, MetricScore.value, MetricScore.settings_hash,
               MetricScore.computed_at)
        .join(Item, Item.id == MetricScore.item_id)
        .where(Item.study_id == study.id, col(MetricScore.metric).in_(list(metrics)))
    )
    if benchmarks is not None:
        statement = statement.where(col(Item.benchmark).in_(list(benchmarks)))
    return select_frame(session, statement, ["item_id", "metric", "value", "settings_hash", "computed_at"])


def chosen_metric_long(scores: pd.DataFrame, chosen: Mapping[str, str], identity: pd.DataFrame) -> pd.DataFrame:
    """The scores (:func:`metric_score_rows`) of each metric's ``chosen`` settings variant as raters, in the long
    contract, placed (benchmark, model) by ``identity`` (an :func:`~medhelm_core.frames.items.item_identity_frame`)."""
    if scores.empty:
        return pd.DataFrame(columns=LONG_COLUMNS)
    picked = scores[scores["settings_hash"] == scores["metric"].map(dict(chosen))]
    placed = identity.set_index("item_id")
    long = picked.rename(columns={"metric": "rater_id", "value": "score"}).assign(
        rater_kind="metric",
        criterion="composite",
        benchmark=picked["item_id"].map(placed["benchmark"]),
        model=picked["item_id"].map(placed["model"]),
    )
    return long[LONG_COLUMNS].reset_index(drop=True)


def metric_settings(session: Session, chosen: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Per metric, its chosen variant's ``settings_hash`` and ``settings`` (what the dashboard and the report's
    manifest name)."""
    out: dict[str, dict[str, Any]] = {}
    for metric, digest in chosen.items():
        settings = session.exec(
            select(MetricScore.settings)
            .where(MetricScore.metric == metric, MetricScore.settings_hash == digest)
            .limit(1)  # without it, every row's settings are fetched and decoded to keep the first
        ).first()
        out[str(metric)] = {"settings_hash": digest, "settings": dict(settings or {})}
    return out


def _newest_scores(
    session: Session, study: Study, metrics: tuple[str, ...], items: pd.DataFrame | None
) -> tuple[pd.DataFrame, pd.Series]:
    scores = metric_score_rows(session, study, metrics)
    if scores.empty:
        return pd.DataFrame(columns=LONG_COLUMNS), pd.Series(dtype=object)
    latest = newest_variants(scores)
    identity = items if items is not None else item_identity_frame(session, study)
    return chosen_metric_long(scores, latest, identity), latest


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
    return long, metric_settings(session, latest.to_dict())


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
