"""The Metrics page's read-out of stored scores: which settings variant to show, one column per metric, and a
summary per benchmark. Pure functions over :func:`~medhelm_core.frames.metric_scores_frame`.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

__all__ = ["ITEM_COLUMNS", "metric_summary", "metric_table", "settings_choices"]

#: the columns that name an item in :func:`metric_table`; every other column is a metric
ITEM_COLUMNS = ("item_id", "benchmark", "instance_id", "model")


def settings_choices(variants: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Per metric family, a label for each settings variant -> its settings hash, the most recent first.

    ``variants`` is :func:`~medhelm_core.metrics.store.metric_settings_frame`; a label reads
    ``"1a2b3c4d: 48 items, 2026-05-01 12:00 use_stemmer=True"`` (hash prefix, items covered, last computed,
    settings), so a researcher can tell the stemmer-on run from the stemmer-off one.
    """
    return {
        family: {
            f"{row.settings_hash[:8]}: {row.items} items, {row.last_computed:%Y-%m-%d %H:%M} "
            + ", ".join(f"{k}={v}" for k, v in row.settings.items() if k != "family"): row.settings_hash
            for row in group.itertuples()
        }
        for family, group in variants.groupby("family", sort=False)
    }


def metric_table(scores: pd.DataFrame, settings_hashes: Iterable[str]) -> pd.DataFrame:
    """One row per item (:data:`ITEM_COLUMNS`) and one column per metric, from the chosen settings variants only.

    Examples
    --------
    >>> scores = pd.DataFrame({"item_id": [1, 1], "benchmark": ["b", "b"], "instance_id": ["0", "0"],
    ...                        "model": ["m", "m"], "metric": ["rougeL_f", "rougeL_f"], "value": [0.5, 0.9],
    ...                        "settings_hash": ["on", "off"]})
    >>> metric_table(scores, ["on"])
       item_id benchmark instance_id model  rougeL_f
    0        1         b           0     m       0.5
    """
    table = (
        scores[scores["settings_hash"].isin(list(settings_hashes))]
        .pivot_table(index=list(ITEM_COLUMNS), columns="metric", values="value")
        .reset_index()
    )
    table.columns.name = None
    return table


def metric_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Count, mean and standard deviation of each metric of a :func:`metric_table`, over all items (benchmark
    ``all``) and per benchmark: one row per (benchmark, metric)."""
    metrics = [c for c in table.columns if c not in ITEM_COLUMNS]
    return pd.concat(
        {
            "all": table[metrics].agg(["count", "mean", "std"]).T,
            **{b: g[metrics].agg(["count", "mean", "std"]).T for b, g in table.groupby("benchmark")},
        },
        names=["benchmark", "metric"],
    ).reset_index()
