"""The dashboard's Altair charts, built from the tables of :mod:`medhelm_core.figures.tables`.

The same chart objects go to the page (``st.altair_chart``) and to the report (Vega-Lite JSON inlined in
the HTML, PNG in the PDF), so what a co-author reads is what the researcher saw. Scatter plots draw at most
``MAX_POINTS`` items (a seeded sample, said in the title), which keeps a 20,000-item study responsive.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from medhelm_core.agreement import COMPOSITE, POOLED
from medhelm_core.agreement.protocol import RANGE
from medhelm_core.figures.displays import short_form
from medhelm_core.figures.tables import HEADLINE_COMPARISONS

MAX_POINTS = 4000
#: the selection parameter of the item charts; the page reads the clicked item from it
ITEM_SELECTION = "item"
_WIDTH = 520
_INK = "#222222"
# Pooled in near-black, then hues far apart (Okabe & Ito's colour-blind-safe set), not shades of one colour.
_BENCHMARK_COLOURS = ["#222222", "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C6D31",
                      "#F0E442", "#999999"]


def _sample(frame: pd.DataFrame, limit: int = MAX_POINTS, seed: int = 0) -> tuple[pd.DataFrame, str]:
    if len(frame) <= limit:
        return frame, ""
    return frame.sample(limit, random_state=seed), f" (a sample of {limit:,} of {len(frame):,} items)"


def _jitter(n: int, width: float, seed: int) -> np.ndarray:
    # Seeded, so the report and a screenshot show the same picture every time.
    return np.random.default_rng(seed).uniform(-width, width, n)


def _icc_domain(lows: pd.Series) -> list[float]:
    finite = lows[np.isfinite(lows.to_numpy(dtype=float))]
    low = float(finite.min()) if len(finite) else 0.0
    return [max(-1.0, min(0.0, np.floor(low * 4) / 4)), 1.0]


def icc_chart(
    headline: pd.DataFrame, criterion: str = COMPOSITE, comparisons: Sequence[str] | None = None
) -> alt.LayerChart:
    """The headline figures per comparison with their 95% intervals, one clearly distinct colour per benchmark.

    Each row names its form (ICC(C,k) of z-scored sides for the pairs, ICC(1) over every clinician, the
    ceiling's median with its range drawn dashed); the value label carries r beside ICC(C,k). The axis stops
    at -1: a bound or an estimate beyond it is drawn as a left-pointing triangle at the edge, labelled with
    its value, never silently pinned there. The dotted rule at 0 is labelled; Koo & Li's bands are not drawn,
    since they were not written for ICC(C,k) of two z-scored sides.
    """
    rows = headline[(headline["criterion"] == criterion) & headline["icc"].notna()].copy()
    order = [c for c in (comparisons or HEADLINE_COMPARISONS) if c in set(rows["comparison"])]
    order += sorted(set(rows["comparison"]) - set(order))
    rows = rows[rows["comparison"].isin(order)]
    benchmarks = [POOLED, *sorted(b for b in rows["benchmark"].unique() if b != POOLED)]
    domain = _icc_domain(pd.concat([rows["ci_low"], rows["icc"]])) if len(rows) else [0.0, 1.0]
    edge = domain[0]
    method = rows["method"] if "method" in rows else pd.Series("ICC3k", index=rows.index)
    forms = [short_form(m, c) for m, c in zip(method, rows["comparison"], strict=True)]
    labels = {c: f"{c} · {f}" for c, f in zip(rows["comparison"], forms, strict=True)}
    rows["row"] = rows["comparison"].map(labels)
    row_order = [labels[c] for c in order]
    rows["is_range"] = rows["ci_method"].eq(RANGE) if "ci_method" in rows else False
    rows["ci_low_shown"] = rows["ci_low"].clip(lower=edge)
    rows["icc_shown"] = rows["icc"].clip(lower=edge)
    rows["interval"] = [
        "n/a" if pd.isna(lo) else f"{'range ' if rng else ''}{lo:.2f} to {hi:.2f}"
        for lo, hi, rng in zip(rows["ci_low"], rows["ci_high"], rows["is_range"], strict=True)
    ]
    has_r = method.eq("ICC3k") & rows["pearson_r"].notna() & ~rows["is_range"]
    rows["label"] = [
        f"{v:.2f}{' (off scale)' if v < edge else ''}" + (f" (r {r:.2f})" if show else "")
        for v, r, show in zip(rows["icc"], rows["pearson_r"], has_r, strict=True)
    ]
    rows["n"] = [f"{int(u)} of {int(a)}" if a else str(int(u))
                 for u, a in zip(rows["n_items"], rows.get("n_available", rows["n_items"]), strict=True)]
    colours = alt.Scale(domain=benchmarks, range=_BENCHMARK_COLOURS[: len(benchmarks)])
    y = alt.Y("row:N", sort=row_order, title=None,
              axis=alt.Axis(labelLimit=420, labelFontSize=12, labelColor=_INK, domainColor=_INK))
    color = alt.Color("benchmark:N", sort=benchmarks, title="benchmark", scale=colours,
                      legend=alt.Legend(labelColor=_INK, titleColor=_INK, labelFontSize=12, labelLimit=300))
    offset = alt.YOffset("benchmark:N", sort=benchmarks)
    tooltip = [
        "comparison:N",
        alt.Tooltip("form:N", title="form"),
        "benchmark:N",
        alt.Tooltip("icc:Q", format=".3f", title="estimate"),
        alt.Tooltip("interval:N", title="95% CI (ceiling: range)"),
        alt.Tooltip("n:N", title="items (of)"),
        alt.Tooltip("pearson_r:Q", format=".3f", title="r"),
        alt.Tooltip("spearman_rho:Q", format=".3f", title="rho"),
    ]
    scale = alt.Scale(domain=domain, clamp=True)
    base = alt.Chart(rows).encode(y=y, yOffset=offset, color=color, tooltip=tooltip)
    bars = base.mark_rule(strokeWidth=3).encode(
        x=alt.X("ci_low_shown:Q", scale=scale), x2="ci_high:Q",
        strokeDash=alt.condition("datum.is_range", alt.value([5, 3]), alt.value([1, 0])),
    )
    x = alt.X("icc_shown:Q", title="agreement with clinicians (form named per row)", scale=scale,
              axis=alt.Axis(labelColor=_INK, titleColor=_INK, labelFontSize=12, titleFontSize=12))
    inside = f"datum.icc >= {edge}"
    points = base.mark_point(filled=True, size=90, opacity=1).encode(
        x=x, shape=alt.condition(inside, alt.value("circle"), alt.value("triangle-left"))
    )
    cut = base.transform_filter(f"datum.ci_low < {edge}").mark_point(
        shape="triangle-left", filled=True, size=110, opacity=1
    ).encode(x=alt.datum(edge, scale=scale))
    cut_text = base.transform_filter(f"datum.ci_low < {edge}").mark_text(
        align="left", dx=7, dy=9, fontSize=10, color=_INK
    ).encode(x=alt.datum(edge, scale=scale), text=alt.Text("ci_low:Q", format=".1f"))
    text = base.mark_text(align="left", dx=9, dy=-9, fontSize=11, fontWeight="bold").encode(x=x, text="label:N")
    zero = pd.DataFrame({"x": [0.0], "what": ["0: no agreement beyond chance"]})
    zero_rule = alt.Chart(zero).mark_rule(strokeDash=[2, 3], color="#555").encode(x=alt.X("x:Q", scale=scale),
                                                                                tooltip=["what:N"])
    zero_text = alt.Chart(zero).mark_text(align="left", baseline="top", dx=3, y=2, fontSize=11, color=_INK).encode(
        x=alt.X("x:Q", scale=scale), text="what:N")
    # Each comparison gets a band with one row per benchmark, tall enough for its value label.
    height = max(140, len(order) * (24 * len(benchmarks) + 26))
    title = alt.Title(
        f"Agreement with clinicians ({criterion}): each figure with its 95% CI",
        subtitle=["ICC(C,k): consistency of the mean of two z-scored sides (MedHELM), r beside it; ICC(1): one-way "
                  "absolute agreement over every clinician;",
                  "ceiling: each clinician against the others, median with the range dashed; a triangle at the left "
                  "edge: beyond -1, its value printed."],
        color=_INK, subtitleColor=_INK, fontSize=14, subtitleFontSize=11, anchor="start",
    )
    layers = [zero_rule, zero_text, bars, points, cut, cut_text, text]
    return alt.layer(*layers).properties(width=_WIDTH, height=height, title=title)


def scatter_chart(means: pd.DataFrame, scale: tuple[int, int] = (1, 5), seed: int = 0) -> alt.Chart:
    """Jury score against the mean clinician score per item, jittered, with the identity line; click an item."""
    rated = means.dropna(subset=["jury", "clinician_mean"])
    shown, note = _sample(rated, seed=seed)
    shown = shown.assign(
        clinician_jittered=shown["clinician_mean"] + _jitter(len(shown), 0.08, seed),
        jury_jittered=shown["jury"] + _jitter(len(shown), 0.08, seed + 1),
    )
    lo, hi = scale[0] - 0.25, scale[1] + 0.25
    axis = alt.Scale(domain=[lo, hi], nice=False)
    pick = alt.selection_point(name=ITEM_SELECTION, fields=["item_id"], on="click")
    points = (
        alt.Chart(shown)
        .mark_circle(size=45)
        .encode(
            x=alt.X("clinician_jittered:Q", title="mean clinician score", scale=axis),
            y=alt.Y("jury_jittered:Q", title="jury score", scale=axis),
            color=alt.Color("benchmark:N"),
            opacity=alt.condition(pick, alt.value(0.85), alt.value(0.35)),
            tooltip=[
                "item_id:N",
                "benchmark:N",
                "model:N",
                alt.Tooltip("clinician_mean:Q", format=".2f"),
                alt.Tooltip("jury:Q", format=".2f"),
                "n_clinicians:Q",
            ],
        )
        .add_params(pick)
    )
    identity = (
        alt.Chart(pd.DataFrame({"x": [lo, hi], "y": [lo, hi]}))
        .mark_line(color="#888", strokeDash=[5, 3])
        .encode(x="x:Q", y="y:Q")
    )
    title = f"Jury vs clinicians per item{note}; dashed: identity"
    return (identity + points).properties(width=_WIDTH, height=_WIDTH * 0.8, title=title)


def bland_altman_chart(means: pd.DataFrame, limits: dict[str, float], seed: int = 0) -> alt.Chart:
    """Bland-Altman: jury minus clinicians against their average, with the bias and 95% limits of agreement."""
    rated = means.dropna(subset=["difference"])
    shown, note = _sample(rated, seed=seed)
    pick = alt.selection_point(name=ITEM_SELECTION, fields=["item_id"], on="click")
    points = (
        alt.Chart(shown)
        .mark_circle(size=40)
        .encode(
            x=alt.X("average:Q", title="average of jury and mean clinician", scale=alt.Scale(zero=False)),
            y=alt.Y("difference:Q", title="jury minus mean clinician"),
            color=alt.Color("benchmark:N"),
            opacity=alt.condition(pick, alt.value(0.85), alt.value(0.35)),
            tooltip=["item_id:N", "benchmark:N", "model:N", alt.Tooltip("difference:Q", format=".2f")],
        )
        .add_params(pick)
    )
    lines = pd.DataFrame(
        {
            "value": [limits["bias"], limits["loa_low"], limits["loa_high"]],
            "label": [
                f"bias {limits['bias']:+.2f}",
                f"-1.96 SD {limits['loa_low']:+.2f}",
                f"+1.96 SD {limits['loa_high']:+.2f}",
            ],
            "kind": ["bias", "limit", "limit"],
        }
    ).dropna()
    rules = (
        alt.Chart(lines)
        .mark_rule(strokeDash=[5, 3])
        .encode(
            y="value:Q", color=alt.value("#555"), size=alt.condition("datum.kind == 'bias'", alt.value(2), alt.value(1))
        )
    )
    text = (
        alt.Chart(lines)
        .mark_text(align="right", baseline="bottom", dy=-2, x="width")
        .encode(y="value:Q", text="label:N")
    )
    title = f"Bland-Altman, jury minus clinicians (n={limits['n_items']}){note}"
    return (points + rules + text).properties(width=_WIDTH, height=_WIDTH * 0.6, title=title)


def judge_chart(judges: pd.DataFrame, benchmark: str = POOLED, criterion: str = COMPOSITE) -> alt.Chart:
    """Each judge's ICC(3,k) with the clinicians (and the jury mean's) with 95% intervals: which judge to trust."""
    rows = judges[(judges["benchmark"] == benchmark) & (judges["criterion"] == criterion)].dropna(subset=["icc"])
    rows = rows.assign(is_jury=rows["judge"] == "jury (mean)")
    domain = _icc_domain(rows["ci_low"]) if len(rows) else [0.0, 1.0]
    rows = rows.assign(ci_low_shown=rows["ci_low"].clip(lower=domain[0]))
    order = rows.sort_values("icc", ascending=False)["judge"].tolist()
    y = alt.Y("judge:N", sort=order, title=None)
    base = alt.Chart(rows).encode(
        y=y,
        color=alt.condition("datum.is_jury", alt.value("#d62728"), alt.value("#1f77b4")),
        tooltip=[
            "judge:N",
            alt.Tooltip("icc:Q", format=".3f"),
            alt.Tooltip("ci_low:Q", format=".2f"),
            alt.Tooltip("ci_high:Q", format=".2f"),
            "n_items:Q",
        ],
    )
    x = alt.X("icc:Q", title="ICC(3,k) with the mean clinician", scale=alt.Scale(domain=domain, clamp=True))
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("ci_low_shown:Q", scale=alt.Scale(domain=domain)), x2="ci_high:Q"
    )
    points = base.mark_point(filled=True, size=70).encode(x=x)
    title = f"Per-judge agreement with clinicians ({benchmark}, {criterion})"
    return (bars + points).properties(width=_WIDTH, height=max(80, 32 * len(rows)), title=title)


def leniency_chart(leniency: pd.DataFrame) -> alt.HConcatChart:
    """Per clinician: mean z (leniency) and spread, beside their ICC(3,k) with the other clinicians."""
    rows = leniency.copy()
    rows["interval"] = [
        "n/a" if pd.isna(lo) else f"{lo:.2f} to {hi:.2f}"
        for lo, hi in zip(rows["ci_low"], rows["ci_high"], strict=True)
    ]
    # One explicit order for both panels, most lenient first, so a clinician's row lines up across them.
    order = rows.sort_values(["mean_z", "clinician"], ascending=[False, True], na_position="last")["clinician"].tolist()
    y = alt.Y("clinician:N", title=None, sort=order, scale=alt.Scale(domain=order))
    tooltip = [
        "clinician:N",
        "n_items:Q",
        "n_shared:Q",
        alt.Tooltip("mean_score:Q", format=".2f"),
        alt.Tooltip("mean_z:Q", format="+.2f"),
        alt.Tooltip("spread:Q", format=".2f"),
        alt.Tooltip("icc3k:Q", format=".3f"),
        alt.Tooltip("interval:N", title="95% CI"),
    ]
    height = max(100, 22 * len(rows))
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="#888").encode(x="x:Q")
    lenient = (
        alt.Chart(rows.dropna(subset=["mean_z"]))
        .mark_point(filled=True)
        .encode(
            x=alt.X("mean_z:Q", title="mean z vs the other clinicians (+ lenient)"),
            y=y,
            size=alt.Size("spread:Q", title="spread (SD ratio)", scale=alt.Scale(range=[20, 300])),
            tooltip=tooltip,
        )
    )
    domain = _icc_domain(rows["ci_low"]) if rows["icc3k"].notna().any() else [0.0, 1.0]
    finite = rows.dropna(subset=["icc3k"]).assign(ci_low_shown=lambda f: f["ci_low"].clip(lower=domain[0]))
    base = alt.Chart(finite).encode(y=y, tooltip=tooltip)
    icc = base.mark_point(filled=True, size=60).encode(
        x=alt.X("icc3k:Q", title="ICC(3,k) with the others", scale=alt.Scale(domain=domain, clamp=True))
    )
    whiskers = base.mark_rule().encode(x=alt.X("ci_low_shown:Q", scale=alt.Scale(domain=domain)), x2="ci_high:Q")
    left = (zero + lenient).properties(width=300, height=height, title="Leniency and spread")
    right = (whiskers + icc).properties(width=260, height=height, title="Agreement with the other clinicians")
    return alt.hconcat(left, right).resolve_scale(y="shared")


def distribution_chart(distribution: pd.DataFrame, criteria: Sequence[str] | None = None) -> alt.FacetChart:
    """Share of each score per criterion, one bar per rater kind (clinicians, jury, judges)."""
    order = list(criteria) if criteria else sorted(distribution["criterion"].unique())
    kinds = [k for k in ("clinician", "jury", "judge") if k in set(distribution["rater_kind"])]
    return (
        alt.Chart(distribution)
        .mark_bar()
        .encode(
            x=alt.X("score:O", title="score"),
            y=alt.Y("share:Q", title="share of scores", axis=alt.Axis(format="%")),
            color=alt.Color("rater_kind:N", sort=kinds, title="rater"),
            xOffset=alt.XOffset("rater_kind:N", sort=kinds),
            tooltip=["rater_kind:N", "criterion:N", "score:O", "count:Q", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=220, height=160)
        .facet(column=alt.Column("criterion:N", sort=order, title=None))
        .properties(title="Distribution of scores per criterion and rater (jury means rounded to half points)")
    )
