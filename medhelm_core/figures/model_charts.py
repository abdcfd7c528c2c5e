"""The Models page's and the report's charts: each model's score by the clinicians, the jury and
clinician-anchored, side by side with their intervals; and how the sources' rankings of the models agree
(a bump chart of ranks, and the pairwise swap matrix).

A missing figure (NaN) is left out of a chart, never drawn as a number; the tables beside the charts say why.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from medhelm_core.agreement.contract import COMPOSITE
from medhelm_core.agreement.scopes import POOLED
from medhelm_core.figures.model_figures import ANCHORED, source_label
from medhelm_core.model_scores import CLINICIANS, JURY

_WIDTH = 520
ESTIMATES = ("clinicians", "jury", ANCHORED)
_COLOURS = alt.Scale(domain=list(ESTIMATES), range=["#1f77b4", "#e76f51", "#2a9d8f"])


def _interval_text(low: pd.Series, high: pd.Series) -> list[str]:
    return [f"{lo:.2f} to {hi:.2f}" if np.isfinite(lo) and np.isfinite(hi) else "n/a"
            for lo, hi in zip(low, high, strict=True)]


def anchored_points(anchored: pd.DataFrame, criterion: str = COMPOSITE, benchmark: str = POOLED) -> pd.DataFrame:
    """The clinician-anchored table as one row per model and estimate (clinicians, jury, clinician-anchored):
    ``model``, ``estimate``, ``score``, ``low``, ``high``, ``interval``, ``n_rated`` (rows without a score left out).

    Examples
    --------
    >>> table = pd.DataFrame({"model": ["m"], "benchmark": "pooled", "criterion": "composite", "n_rated": [3],
    ...                       "clinician_mean": [4.0], "clinician_low": [3.5], "clinician_high": [4.5],
    ...                       "jury_mean": [4.4], "jury_low": [4.3], "jury_high": [4.5], "anchored": [float("nan")],
    ...                       "anchored_low": [float("nan")], "anchored_high": [float("nan")]})
    >>> anchored_points(table)[["model", "estimate", "score", "interval"]]
      model    estimate  score      interval
    0     m  clinicians    4.0  3.50 to 4.50
    1     m        jury    4.4  4.30 to 4.50
    """
    rows = anchored[(anchored["criterion"] == criterion) & (anchored["benchmark"] == benchmark)]
    parts = []
    for name, mean, low, high in (("clinicians", "clinician_mean", "clinician_low", "clinician_high"),
                                  ("jury", "jury_mean", "jury_low", "jury_high"),
                                  (ANCHORED, "anchored", "anchored_low", "anchored_high")):
        parts.append(pd.DataFrame({"model": rows["model"], "estimate": name, "score": rows[mean],
                                   "low": rows[low], "high": rows[high], "n_rated": rows["n_rated"]}))
    points = pd.concat(parts, ignore_index=True)
    points = points[np.isfinite(points["score"].astype(float))].reset_index(drop=True)
    return points.assign(interval=_interval_text(points["low"], points["high"]))


def model_score_chart(anchored: pd.DataFrame, criterion: str = COMPOSITE, benchmark: str = POOLED,
                      scale: tuple[float, float] = (1, 5)) -> alt.LayerChart:
    """Per model: the clinicians' mean, the jury's mean and the clinician-anchored mean, each a dot with its 95%
    interval as a bar, side by side (one row per model)."""
    points = anchored_points(anchored, criterion, benchmark)
    models = sorted(points["model"].unique())
    lowest = float(np.nanmin(points["low"])) if points["low"].notna().any() else scale[0]
    domain = [min(scale[0], np.floor(lowest)), scale[1]]
    points = points.assign(low_shown=points["low"].clip(lower=domain[0]),
                           high_shown=points["high"].clip(upper=domain[1]))
    y = alt.Y("model:N", sort=models, title=None, axis=alt.Axis(labelLimit=320))
    offset = alt.YOffset("estimate:N", sort=list(ESTIMATES))
    colour = alt.Color("estimate:N", scale=_COLOURS, title=None, legend=alt.Legend(orient="top"))
    tooltip = ["model:N", alt.Tooltip("estimate:N", title="estimate"), alt.Tooltip("score:Q", format=".2f"),
               alt.Tooltip("interval:N", title="95% CI"), alt.Tooltip("n_rated:Q", title="items rated")]
    base = alt.Chart(points).encode(y=y, yOffset=offset, color=colour, tooltip=tooltip)
    x = alt.X("score:Q", title=f"mean score ({criterion}, {benchmark})", scale=alt.Scale(domain=domain, clamp=True))
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("low_shown:Q", scale=alt.Scale(domain=domain)),
                                                x2="high_shown:Q")
    dots = base.mark_point(filled=True, size=70).encode(x=x)
    height = max(120, len(models) * 54)
    return alt.layer(bars, dots).properties(width=_WIDTH, height=height,
                                            title="Each model: clinicians, jury and clinician-anchored (95% CI)")


def rank_bump_chart(ranks: pd.DataFrame, criterion: str = COMPOSITE) -> alt.LayerChart:
    """Each source's rank of every model (1 = best), sources side by side, one line per model: lines that
    cross are models that source orders differently from the clinicians (the first column)."""
    rows = ranks[ranks["criterion"] == criterion].copy()
    order = list(dict.fromkeys([CLINICIANS, JURY, *rows["source"]]))
    rows["source_label"] = rows["source"].map(source_label)
    labels = [source_label(s) for s in order if s in set(rows["source"])]
    x = alt.X("source_label:N", sort=labels, title=None, axis=alt.Axis(labelAngle=-20, labelLimit=160))
    n_models = max(1, rows["model"].nunique())
    y = alt.Y("rank:Q", title="rank (1 = best)",
              scale=alt.Scale(reverse=True, nice=False, domain=[0.5, n_models + 0.5]),
              axis=alt.Axis(values=list(range(1, n_models + 1)), format="d"))
    tooltip = ["model:N", alt.Tooltip("source_label:N", title="source"), "rank:Q", alt.Tooltip("mean:Q", format=".2f")]
    base = alt.Chart(rows).encode(x=x, y=y, color=alt.Color("model:N", title="model", legend=alt.Legend(
        orient="right", labelLimit=260)), tooltip=tooltip)
    return alt.layer(base.mark_line(strokeWidth=2, opacity=0.7), base.mark_point(filled=True, size=70)).properties(
        width=max(220, 90 * len(labels)), height=max(160, 40 * n_models),
        title=f"Rankings of the models by each source ({criterion})")


def swap_matrix_chart(swaps: pd.DataFrame, source: str = CLINICIANS, criterion: str = COMPOSITE) -> alt.LayerChart:
    """For each pair of models, how often resampled instances reverse their order by ``source``: near 0 the
    order is settled, near 0.5 a coin toss."""
    rows = swaps[(swaps["source"] == source) & (swaps["criterion"] == criterion)]
    both = pd.concat([rows, rows.rename(columns={"model_a": "model_b", "model_b": "model_a"})], ignore_index=True)
    both = both[np.isfinite(both["p_swap"].astype(float))]
    models = sorted(set(both["model_a"]) | set(both["model_b"]))
    axis = alt.Axis(labelLimit=200)
    base = alt.Chart(both).encode(
        x=alt.X("model_a:N", sort=models, title=None, axis=alt.Axis(labelAngle=-35, labelLimit=200,
                                                                   labelOverlap=False)),
        y=alt.Y("model_b:N", sort=models, title=None, axis=axis),
        tooltip=["model_a:N", "model_b:N", alt.Tooltip("p_swap:Q", format=".2f", title="swap probability")],
    )
    cells = base.mark_rect().encode(color=alt.Color("p_swap:Q", title="swap probability",
                                                    scale=alt.Scale(domain=[0, 0.5], scheme="orangered")))
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("p_swap:Q", format=".2f"),
        color=alt.condition("datum.p_swap > 0.3", alt.value("white"), alt.value("black")))
    return alt.layer(cells, text).properties(
        width=max(300, 90 * len(models)), height=max(120, 40 * len(models)),
        title=f"How often a pair swaps places ({source_label(source)}, {criterion})")
