"""Charts of the judge-alignment loop: which jury version and which judges agree best with the clinicians.

Both set an ICC(3,k) with its 95% interval per row against the clinicians' own ceiling (the median of each
clinician against the mean of the others, with their range as a band), so a version or a judge is read
against what humans reach. They go to the page and to the report, like :mod:`medhelm_core.figures.charts`.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from medhelm_core.agreement import CLINICIAN_CEILING, POOLED

_WIDTH = 520


def _domain(lows: pd.Series, floor: float = 0.0) -> list[float]:
    finite = lows[np.isfinite(lows.to_numpy(dtype=float))]
    low = min(floor, float(finite.min()) if len(finite) else 0.0)
    return [max(-1.0, float(np.floor(low * 4) / 4)), 1.0]


def _ceiling_layers(ceiling: float, low: float, high: float, domain: list[float]) -> list[alt.Chart]:
    if not np.isfinite(ceiling):
        return []
    frame = pd.DataFrame({"ceiling": [ceiling], "low": [max(low, domain[0])], "high": [high],
                          "what": ["clinicians' ceiling: each against the others (median, range)"]})
    band = alt.Chart(frame).mark_rect(opacity=0.12, color="#2a9d8f").encode(x="low:Q", x2="high:Q",
                                                                           tooltip=["what:N"])
    rule = alt.Chart(frame).mark_rule(color="#2a9d8f", strokeWidth=2).encode(
        x="ceiling:Q", tooltip=["what:N", alt.Tooltip("ceiling:Q", format=".3f")])
    return [band, rule]


def version_chart(table: pd.DataFrame, ceiling: float = np.nan, ceiling_low: float = np.nan,
                  ceiling_high: float = np.nan) -> alt.LayerChart:
    """ICC(3,k) of each jury version (run) with the clinicians, 95% F interval, on the items all versions scored.

    The baseline is drawn hollow; a version whose paired difference from it excludes 0 is coloured by the
    direction of the change.
    """
    rows = table[table["criterion"] == "composite"].copy() if "criterion" in table else table.copy()
    rows = rows[rows["estimate"].notna()]
    rows["status"] = np.where(rows["baseline"].astype(bool), "baseline", rows["change"].replace("", "no clear change"))
    rows["interval"] = [f"{lo:.2f} to {hi:.2f}" for lo, hi in zip(rows["ci_low"], rows["ci_high"], strict=True)]
    rows["difference"] = [
        "" if b else f"{d:+.3f} ({lo:+.3f} to {hi:+.3f})"
        for b, d, lo, hi in zip(rows["baseline"], rows["diff"], rows["diff_ci_low"], rows["diff_ci_high"], strict=True)
    ]
    domain = _domain(pd.concat([rows["ci_low"], pd.Series([ceiling_low])]))
    rows["ci_low_shown"] = rows["ci_low"].clip(lower=domain[0])
    rows["shown"] = rows["short_label"] if "short_label" in rows else rows["label"]
    order = list(rows["shown"])
    colours = alt.Scale(domain=["baseline", "higher", "lower", "no clear change"],
                        range=["#555555", "#2a9d8f", "#e76f51", "#8d99ae"])
    y = alt.Y("shown:N", sort=order, title=None, axis=alt.Axis(labelLimit=320))
    tooltip = [alt.Tooltip("label:N", title="version"), alt.Tooltip("estimate:Q", format=".3f", title="ICC(3,k)"),
               alt.Tooltip("interval:N", title="95% CI"), alt.Tooltip("difference:N", title="vs baseline (95% CI)"),
               alt.Tooltip("n_items:Q", title="items"), alt.Tooltip("pearson_r:Q", format=".3f", title="r")]
    base = alt.Chart(rows).encode(y=y, color=alt.Color("status:N", scale=colours, title=None), tooltip=tooltip)
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("ci_low_shown:Q", scale=alt.Scale(domain=domain)),
                                                x2="ci_high:Q")
    x = alt.X("estimate:Q", title="ICC(3,k) with the mean clinician", scale=alt.Scale(domain=domain, clamp=True))
    points = base.mark_point(filled=True, size=80).encode(x=x)
    labels = base.mark_text(align="left", dx=8, dy=-8, fontSize=10).encode(x=x, text=alt.Text("estimate:Q",
                                                                                             format=".2f"))
    layers = [*_ceiling_layers(ceiling, ceiling_low, ceiling_high, domain), bars, points, labels]
    return alt.layer(*layers).properties(width=_WIDTH, height=max(90, 46 * len(order)),
                                         title="Jury versions: agreement with clinicians (composite)")


def judge_subset_chart(subsets: pd.DataFrame, benchmark: str = POOLED) -> alt.LayerChart:
    """Each judge alone, all judges, and every jury without one judge, against the clinicians' ceiling."""
    part = subsets[subsets["benchmark"] == benchmark]
    ceiling = part[part["subset"] == CLINICIAN_CEILING]
    rows = part[part["subset_kind"].isin(["judge", "all", "without"]) & part["estimate"].notna()].copy()
    rows["interval"] = [f"{lo:.2f} to {hi:.2f}" for lo, hi in zip(rows["ci_low"], rows["ci_high"], strict=True)]
    top = ceiling.iloc[0] if len(ceiling) else None
    domain = _domain(pd.concat([rows["ci_low"], pd.Series([top["range_low"] if top is not None else 0.0])]))
    rows["ci_low_shown"] = rows["ci_low"].clip(lower=domain[0])
    order = list(rows["subset"])
    y = alt.Y("subset:N", sort=order, title=None, axis=alt.Axis(labelLimit=360))
    tooltip = ["subset:N", alt.Tooltip("estimate:Q", format=".3f", title="ICC(3,k)"),
               alt.Tooltip("interval:N", title="95% CI"), alt.Tooltip("n_items:Q", title="items"), "note:N"]
    base = alt.Chart(rows).encode(y=y, color=alt.Color("subset_kind:N", title=None), tooltip=tooltip)
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("ci_low_shown:Q", scale=alt.Scale(domain=domain)),
                                                x2="ci_high:Q")
    points = base.mark_point(filled=True, size=70).encode(
        x=alt.X("estimate:Q", title="ICC(3,k) with the mean clinician", scale=alt.Scale(domain=domain, clamp=True)))
    layers = [bars, points]
    if top is not None:
        layers = [*_ceiling_layers(float(top["estimate"]), float(top["range_low"]), float(top["range_high"]),
                                   domain), *layers]
    return alt.layer(*layers).properties(width=_WIDTH, height=max(90, 30 * len(order)),
                                         title=f"Which judges to trust ({benchmark}, composite)")
