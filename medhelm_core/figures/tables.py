"""The dashboard's tables: pure functions over the long score table and the agreement engine's output.

Every figure of agreement here comes from :func:`medhelm_core.agreement.agreement_table`; this module only
picks, relabels and orders its rows (the headline table, the per-judge table) and adds the descriptive
tables the charts draw (item means, Bland-Altman limits, clinician leniency, score distributions).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, MutableMapping, Sequence

import numpy as np
import pandas as pd

from medhelm_core.agreement import (
    CLINICIAN_CEILING,
    CLINICIAN_PAIR,
    COMPOSITE,
    POOLED,
    agreement_table,
    judge_subset_agreement,
    rater_scores,
    robust_table,
    validate_long,
)
from medhelm_core.agreement.contract import MIN_ITEMS, is_trusted, trusted_rows
from medhelm_core.agreement.incomplete import loco_from_scores
from medhelm_core.agreement.judges import JUDGE_SUBSET_COLUMNS
from medhelm_core.agreement.protocol import CLINICIANS_ALL
from medhelm_core.errors import NotEnoughRatingsError
from medhelm_core.figures.data import HEADLINE_METRICS, METRIC_LABELS, DashboardData

JURY = "jury-clinician"
#: the four comparisons of the MedHELM paper's table, in its order, with the clinicians' agreement from every
#: clinician beside the paper's one pair
HEADLINE_COMPARISONS: tuple[str, ...] = (
    CLINICIAN_PAIR,
    CLINICIANS_ALL,
    CLINICIAN_CEILING,
    JURY,
    *(f"{label}-clinician" for label in HEADLINE_METRICS.values()),
)
HEADLINE_COLUMNS: tuple[str, ...] = (
    "comparison",
    "benchmark",
    "criterion",
    "method",
    "form",
    "icc",
    "ci_low",
    "ci_high",
    "ci_method",
    "n_items",
    "n_available",
    "pearson_r",
    "spearman_rho",
    "kappa_qw",
    "reading",
    "note",
)
_MISSING_NOTES = {
    JURY: "no jury scores yet",
    **{f"{label}-clinician": f"no {label} scores yet" for label in HEADLINE_METRICS.values()},
}


def display_comparison(name: str) -> str:
    """The engine's comparison name with stored metric names replaced by the paper's (``ROUGE-L-clinician``)."""
    for metric, label in METRIC_LABELS.items():
        if name == f"{metric}-clinician":
            return f"{label}-clinician"
    return name


def filter_long(
    long: pd.DataFrame, benchmarks: Sequence[str] | None = None, models: Sequence[str] | None = None
) -> pd.DataFrame:
    """The rows of the chosen benchmarks and models (None or empty: all, ``long`` itself). The rows of a trusted
    frame (:func:`~medhelm_core.agreement.contract.trust_long`) are trusted, with their index reset."""
    if not benchmarks and not models:
        return long
    keep = pd.Series(True, index=long.index)
    if benchmarks:
        keep &= long["benchmark"].isin(list(benchmarks))
    if models:
        keep &= long["model"].isin(list(models))
    if is_trusted(long):
        return trusted_rows(long, np.flatnonzero(keep.to_numpy()))
    return long[keep]


def robust_agreement(
    data: DashboardData, benchmarks: Sequence[str] = (), models: Sequence[str] = (), **bootstrap: object
) -> pd.DataFrame:
    """Gwet's AC2 and the weighted kappa beside the ICC (:func:`~medhelm_core.agreement.robust.robust_table`) for
    the chosen benchmarks (each and pooled) and models, on the study's scale; ``bootstrap``: ``n_resamples``,
    ``seed`` and the like."""
    low, high = data.scale
    return robust_table(filter_long(data.long, None, models), list(benchmarks) or None,
                        labels=tuple(range(low, high + 1)), **bootstrap)


def judge_subset_table(
    long: pd.DataFrame,
    scope_versions: Mapping[str, Hashable] | None = None,
    scope_cache: MutableMapping[Hashable, list[dict[str, object]]] | None = None,
) -> pd.DataFrame:
    """Each judge alone, the whole jury and every jury without one judge against the clinicians, with their
    ceiling (:func:`~medhelm_core.agreement.judge_subset_agreement`, per benchmark and pooled); empty when the
    jury has fewer than two judges. ``scope_versions`` and ``scope_cache``: recompute only the scopes whose
    data changed."""
    if long.loc[long["rater_kind"] == "judge", "rater_id"].nunique() < 2:
        return pd.DataFrame(columns=list(JUDGE_SUBSET_COLUMNS))
    return judge_subset_agreement(long, by_benchmark=True, scope_versions=scope_versions, scope_cache=scope_cache)


def ratings_shortfall(long: pd.DataFrame) -> str | None:
    """Why no agreement can be computed yet, in words a researcher can act on; None when there is enough.

    Agreement needs at least ``MIN_ITEMS`` items that a clinician rated and that a second clinician, the
    jury or a metric also scored.
    """
    clin = long[long["rater_kind"] == "clinician"]
    rated = clin["item_id"].unique()
    if len(rated) < MIN_ITEMS:
        return (
            f"Not enough ratings yet: {len(rated)} item(s) have clinician ratings; agreement needs at least "
            f"{MIN_ITEMS} items rated by a clinician and also by a second clinician, the jury or a metric."
        )
    per_item = clin.drop_duplicates(["item_id", "rater_id"])["item_id"].value_counts()
    shared = per_item.index[per_item >= 2]
    # Sets, not Series.isin: isin with 20,000 id strings takes a second on pandas' Arrow-backed strings.
    # tolist: the ids out of Arrow in one call (a set of the array itself takes them one at a time, 7x slower).
    others = set(long.loc[long["rater_kind"] != "clinician", "item_id"].unique().tolist()) & set(rated.tolist())
    if len(shared) < MIN_ITEMS and len(others) < MIN_ITEMS:
        return (
            f"Not enough ratings yet: {len(rated)} items have clinician ratings, but only {len(shared)} were rated "
            f"by two clinicians and {len(others)} by the jury or a metric; agreement needs at least {MIN_ITEMS}."
        )
    return None


def compute_agreement(
    long: pd.DataFrame,
    protocol: str = "medhelm",
    benchmarks: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    scope_versions: Mapping[str, Hashable] | None = None,
    scope_cache: MutableMapping[Hashable, list[dict[str, object]]] | None = None,
) -> pd.DataFrame:
    """The agreement engine's table for the chosen benchmarks (pooled over them) and models.

    ``scope_versions`` and ``scope_cache``: recompute only the benchmark scopes whose data changed (see
    :func:`~medhelm_core.agreement.agreement_table`).

    Raises :class:`NotEnoughRatingsError` when the chosen data cannot support any figure, and the engine's
    :class:`~medhelm_core.agreement.AgreementInputError` for an unknown benchmark. The ``loco`` design is
    left to :func:`clinician_leniency`, which shows it per clinician.

    Examples
    --------
    >>> table = compute_agreement(data.long, "medhelm", ["aci_bench", "medi_qa"])  # doctest: +SKIP
    >>> headline_table(table).query("benchmark == 'pooled' and criterion == 'composite'")  # doctest: +SKIP
    """
    chosen = filter_long(long, None, models)
    shortfall = ratings_shortfall(filter_long(chosen, benchmarks))
    if shortfall:
        raise NotEnoughRatingsError(shortfall)
    return agreement_table(
        chosen,
        protocol=protocol,
        benchmarks=list(benchmarks) if benchmarks else None,
        n_resamples=n_resamples,
        seed=seed,
        scope_versions=scope_versions,
        scope_cache=scope_cache,
    )


def primary_rows(table: pd.DataFrame, protocol: str = "medhelm") -> pd.DataFrame:
    """The headline's rows in either protocol: MedHELM's ICC(C,k) of each pair with its exact F interval (a
    bootstrap interval is never a headline: it under-covers at the sizes studies have), the one-way ICC(1)
    over every clinician and the clinician ceiling."""
    pairs = (table["method"] == "ICC3k") & (table["ci_method"] == "F")
    everyone = (table["comparison"] == CLINICIANS_ALL) & (table["method"] == "ICC1_unbalanced")
    return table[pairs | everyone | (table["comparison"] == CLINICIAN_CEILING)]


def _order(frame: pd.DataFrame, criteria: Sequence[str]) -> pd.DataFrame:
    benchmarks = [POOLED, *sorted(b for b in frame["benchmark"].unique() if b != POOLED)]
    crit = [COMPOSITE, *[c for c in criteria if c != COMPOSITE]]
    comparisons = [*HEADLINE_COMPARISONS, *sorted(set(frame["comparison"]) - set(HEADLINE_COMPARISONS))]
    keys = {
        "benchmark": {b: i for i, b in enumerate(benchmarks)},
        "criterion": {c: i for i, c in enumerate(crit)},
        "comparison": {c: i for i, c in enumerate(comparisons)},
    }
    return frame.sort_values(
        ["benchmark", "criterion", "comparison"], key=lambda s: s.map(keys[s.name]).fillna(len(keys[s.name]))
    ).reset_index(drop=True)


def headline_table(table: pd.DataFrame, protocol: str = "medhelm") -> pd.DataFrame:
    """The paper's table for this study: clinician-clinician, jury-, ROUGE-L- and BERTScore-clinician ICC(C,k),
    with the clinicians' agreement from every clinician (ICC(1) and the ceiling) beside the one pair.

    One row per comparison, benchmark (``pooled`` first) and criterion (``composite`` first), with its form in
    words, the 95% interval (the ceiling: its range), n used of n available, Pearson r, Spearman's rho,
    weighted kappa and the Koo & Li reading where it applies. A comparison with no data yet (no jury run, no
    metric scores) is listed with an empty estimate and a note saying why.

    Examples
    --------
    >>> headline_table(table)[["comparison", "benchmark", "criterion", "icc", "n_items"]]  # doctest: +SKIP
    """
    rows = primary_rows(table, protocol).copy()
    rows["comparison"] = rows["comparison"].map(display_comparison)
    rows = rows[rows["comparison"].isin(HEADLINE_COMPARISONS)].rename(columns={"estimate": "icc"})
    scopes = table[["benchmark", "criterion"]].drop_duplicates()
    missing = []
    for comparison in HEADLINE_COMPARISONS:
        have = rows.loc[rows["comparison"] == comparison, ["benchmark", "criterion"]]
        gaps = scopes.merge(have, how="left", indicator=True).query("_merge == 'left_only'")
        for bench, crit in gaps[["benchmark", "criterion"]].itertuples(index=False):
            missing.append(
                {
                    "comparison": comparison,
                    "benchmark": bench,
                    "criterion": crit,
                    "n_items": 0,
                    "note": _MISSING_NOTES.get(comparison, ""),
                    "reading": "",
                }
            )
    out = pd.concat([rows, pd.DataFrame(missing)], ignore_index=True) if missing else rows
    out = out.reindex(columns=list(HEADLINE_COLUMNS))
    for col in ("n_items", "n_available"):
        out[col] = out[col].fillna(0).astype(int)
    out[["reading", "note", "ci_method", "form", "method"]] = out[
        ["reading", "note", "ci_method", "form", "method"]
    ].fillna("")
    criteria = [c for c in dict.fromkeys(table["criterion"]) if c != COMPOSITE]
    return _order(out, criteria)


def judge_table(table: pd.DataFrame, protocol: str = "medhelm") -> pd.DataFrame:
    """Each judge's ICC(3,k) with the clinicians beside the jury's, per benchmark and criterion (which to trust)."""
    rows = primary_rows(table, protocol)
    rows = rows[rows["comparison"].str.startswith("judge:") | (rows["comparison"] == JURY)].copy()
    rows["judge"] = np.where(
        rows["comparison"] == JURY,
        "jury (mean)",
        rows["comparison"].str.removeprefix("judge:").str.removesuffix("-clinician"),
    )
    return rows.rename(columns={"estimate": "icc"})[
        [
            "judge",
            "benchmark",
            "criterion",
            "icc",
            "ci_low",
            "ci_high",
            "n_items",
            "pearson_r",
            "spearman_rho",
            "kappa_qw",
            "note",
        ]
    ].reset_index(drop=True)


def item_means(
    long: pd.DataFrame,
    criterion: str = COMPOSITE,
    criteria: Sequence[str] | None = None,
    scores: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per item: the mean clinician score and the jury score on the rating scale, and their difference.

    Columns ``item_id``, ``benchmark``, ``model``, ``clinician_mean``, ``n_clinicians``, ``jury``,
    ``difference`` (jury minus clinicians) and ``average`` (of the two); ``jury`` is NaN where the jury has
    no score. The composite follows the engine: the mean of the criteria, only where all were scored.
    ``scores``: :func:`~medhelm_core.agreement.rater_scores` of ``long`` for ``criterion``, when the caller has it.
    """
    if scores is None:
        scores = rater_scores(long, criterion, criteria)
    clin = scores[scores["rater_kind"] == "clinician"]
    out = clin.groupby(["item_id", "benchmark"], as_index=False).agg(
        clinician_mean=("score", "mean"), n_clinicians=("rater_id", "nunique")
    )
    jury = scores[scores["rater_kind"] == "jury"].groupby("item_id")["score"].mean().rename("jury")
    out = out.merge(jury, left_on="item_id", right_index=True, how="left")
    models = long.drop_duplicates("item_id").set_index("item_id")["model"] if "model" in long else None
    out.insert(2, "model", out["item_id"].map(models) if models is not None else "")
    out["difference"] = out["jury"] - out["clinician_mean"]
    out["average"] = (out["jury"] + out["clinician_mean"]) / 2
    return out.reset_index(drop=True)


def bland_altman(means: pd.DataFrame) -> dict[str, float]:
    """Bias (mean of jury minus clinicians) and 95% limits of agreement (bias +/- 1.96 SD) on the raw scale."""
    diff = means["difference"].dropna().to_numpy(dtype=float)
    n = int(diff.size)
    if n < 2:
        return {
            "n_items": n,
            "bias": float("nan"),
            "sd": float("nan"),
            "loa_low": float("nan"),
            "loa_high": float("nan"),
        }
    bias, sd = float(diff.mean()), float(diff.std(ddof=1))
    return {"n_items": n, "bias": bias, "sd": sd, "loa_low": bias - 1.96 * sd, "loa_high": bias + 1.96 * sd}


def clinician_leniency(
    long: pd.DataFrame,
    criterion: str = COMPOSITE,
    criteria: Sequence[str] | None = None,
    scores: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per clinician: how lenient (mean z) and how spread out their scores are, and their agreement with the others.

    ``mean_z`` is the mean, over the items a clinician shares with others, of their score minus the mean
    of the other clinicians on that item, divided by the SD of all clinicians' scores (positive: more
    lenient than their colleagues). ``spread`` is the SD of their own scores over that pooled SD (1: as
    spread as everyone; near 0: the same score for everything). ``icc3k`` (with its F interval) is
    :func:`~medhelm_core.agreement.leave_one_clinician_out`: each clinician against the mean of the others.
    Raises :class:`~medhelm_core.agreement.AgreementInputError` for a table that breaks the contract.
    ``scores``: :func:`~medhelm_core.agreement.rater_scores` of the validated ``long``, when the caller has it.
    """
    # Validated once, and the same per-clinician scores serve the leniency and the agreement with the others
    # (leave_one_clinician_out would validate and reduce the whole table again).
    if scores is None:
        scores = rater_scores(validate_long(long), criterion, criteria)
    clin = scores[scores["rater_kind"] == "clinician"][["item_id", "rater_id", "score"]]
    columns = [
        "clinician",
        "n_items",
        "mean_score",
        "n_shared",
        "mean_z",
        "spread",
        "icc3k",
        "ci_low",
        "ci_high",
        "loco_items",
        "note",
    ]
    if clin.empty:
        return pd.DataFrame(columns=columns)
    pooled_sd = float(clin["score"].std(ddof=1)) if len(clin) > 1 else float("nan")
    grouped = clin.groupby("item_id")["score"]
    total, count = grouped.transform("sum"), grouped.transform("size")
    others = (total - clin["score"]) / (count - 1).where(count > 1)
    clin = clin.assign(deviation=clin["score"] - others)
    per = clin.groupby("rater_id").agg(
        n_items=("item_id", "nunique"),
        mean_score=("score", "mean"),
        sd=("score", "std"),
        n_shared=("deviation", "count"),
        mean_dev=("deviation", "mean"),
    )
    per["mean_z"] = per["mean_dev"] / pooled_sd if pooled_sd > 0 else np.nan
    per["spread"] = per["sd"] / pooled_sd if pooled_sd > 0 else np.nan
    loco = loco_from_scores(scores).set_index("clinician")
    per = per.join(loco[["icc3k", "ci_low", "ci_high", "n_items", "note"]].rename(columns={"n_items": "loco_items"}))
    per = per.rename_axis("clinician").reset_index()
    per["note"] = per["note"].fillna("")
    per["loco_items"] = per["loco_items"].fillna(0).astype(int)
    return per[columns].sort_values("clinician").reset_index(drop=True)


def score_distribution(long: pd.DataFrame, criteria: Sequence[str] | None = None) -> pd.DataFrame:
    """How often each score is given, per criterion and rater kind (clinician, jury, judge), as a share.

    Jury means fall between levels; they are rounded to the nearest half point. Metrics are left out (their
    scale is not the rubric's).
    """
    rated = long[long["rater_kind"] != "metric"]
    if criteria:
        rated = rated[rated["criterion"].isin(list(criteria))]
    binned = rated.assign(score=(rated["score"] * 2).round() / 2)
    counts = (
        binned.groupby(["rater_kind", "criterion", "score"], as_index=False).size().rename(columns={"size": "count"})
    )
    counts["share"] = counts["count"] / counts.groupby(["rater_kind", "criterion"])["count"].transform("sum")
    return counts


def largest_disagreements(means: pd.DataFrame, items: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The ``n`` items where the jury and the clinicians differ most (absolute difference), with their identity."""
    rated = means.dropna(subset=["jury"])
    top = rated.reindex(rated["difference"].abs().sort_values(ascending=False).index).head(n)
    ident = items[["item_id", "instance_id"]]
    out = top.merge(ident, on="item_id", how="left")
    return out[
        ["item_id", "benchmark", "instance_id", "model", "clinician_mean", "n_clinicians", "jury", "difference"]
    ].reset_index(drop=True)
