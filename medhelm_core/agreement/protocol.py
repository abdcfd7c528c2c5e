"""The summary tables: MedHELM's agreement protocol exactly, and the fuller one this product adds.

``protocol="medhelm"`` reproduces the paper's released script (``4_calculate_icc.py``): the composite is
the mean of the raw criteria per rater and item; the clinicians' composites are averaged per item; that
mean clinician and the jury are each z-scored as one rater over their items; ICC(3,k) with its F
interval; the clinician baseline is ICC(3,k) of the two clinicians sharing the most items, each z-scored
over all their own ratings. On MedHELM's ratings this gives the paper's 0.474 (0.10 to 0.69).

``protocol="full"`` keeps those comparisons and adds all six ICC forms, bootstrap intervals over items,
and the designs that use every clinician (one-way ICC(1) with k0, Krippendorff's alpha, optionally each
clinician against the others).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from medhelm_core.agreement.bootstrap import check_bootstrap
from medhelm_core.agreement.contract import on_scale, validate_long
from medhelm_core.agreement.icc import ICC_TYPES
from medhelm_core.agreement.incomplete import icc1_unbalanced, krippendorff_alpha, loco_from_scores
from medhelm_core.agreement.interpret import koo_li_interval_reading, koo_li_reading
from medhelm_core.agreement.pairs import zscore_within
from medhelm_core.agreement.scopes import ScopeScores, chosen_benchmarks, clinician_criteria, criterion_scopes
from medhelm_core.errors import AgreementInputError

PROTOCOLS: tuple[str, ...] = ("medhelm", "full")
CLINICIAN_PAIR = "clinician-clinician"
TABLE_COLUMNS: tuple[str, ...] = (
    "comparison",
    "benchmark",
    "criterion",
    "method",
    "estimate",
    "ci_low",
    "ci_high",
    "ci_method",
    "n_items",
    "n_ratings",
    "n_raters",
    "pearson_r",
    "spearman_rho",
    "kappa_qw",
    "reading",
    "reading_ci",
    "note",
    "raters_used",
    "items_used",
)


def comparison_name(rater_id: str, rater_kind: str, n_jury: int = 1) -> str:
    """The label of a rater's comparison with the clinicians in the summary table.

    Parameters
    ----------
    rater_id : str
        The jury, judge or metric.
    rater_kind : str
        ``jury``, ``judge`` or ``metric``.
    n_jury : int
        How many jury raters the table holds; with one, it is simply ``jury-clinician``.

    Returns
    -------
    str
        ``jury-clinician``, ``jury:<id>-clinician``, ``judge:<id>-clinician`` or ``<metric>-clinician``.

    Examples
    --------
    >>> from medhelm_core.agreement.protocol import comparison_name
    >>> comparison_name("gpt-4o", "judge"), comparison_name("rougeL", "metric")
    ('judge:gpt-4o-clinician', 'rougeL-clinician')
    """
    if rater_kind == "jury":
        return "jury-clinician" if n_jury <= 1 else f"jury:{rater_id}-clinician"
    if rater_kind == "judge":
        return f"judge:{rater_id}-clinician"
    return f"{rater_id}-clinician"


def _scope_rows(
    scope: ScopeScores,
    protocol: str,
    bootstrap: str | None,
    n_resamples: int,
    seed: int,
    confidence: float,
    loco: bool,
    kappa_labels: Sequence[int],
) -> list[dict[str, object]]:
    """Every comparison for one benchmark scope and one criterion."""
    full = protocol == "full"
    forms = ICC_TYPES if full else ("ICC3k",)
    boot = bootstrap if full else None
    pair_kwargs = {
        "icc_types": forms,
        "bootstrap": boot,
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "kappa_labels": kappa_labels,
    }
    names = scope.rater_names
    rows: list[dict[str, object]] = []

    def add(records: list[dict[str, object]], comparison: str, extra: dict[str, object]) -> None:
        for rec in records:
            rows.append({"comparison": comparison, **rec, **extra})

    # Clinician baseline: the single pair sharing the most items, as in MedHELM.
    pair = scope.most_shared_pair()
    if pair is None:
        rows.append(
            {
                "comparison": CLINICIAN_PAIR,
                "method": "ICC3k",
                "estimate": np.nan,
                "ci_method": "F",
                "n_items": 0,
                "n_ratings": 0,
                "n_raters": 0,
                "note": "no two clinicians share an item",
                "raters_used": (),
                "items_used": (),
            }
        )
    else:
        first_code, second_code, shared, ties = pair
        first, second = str(names[first_code]), str(names[second_code])
        a, b = scope.side(first_code), scope.side(second_code)
        kappa = on_scale(a.scores, kappa_labels) and on_scale(b.scores, kappa_labels)
        found = scope.pair(a, b, kappa=kappa, **pair_kwargs)
        tie_note = f"; {ties} other pair(s) share as many items" if ties else ""
        note = f"pair {first} and {second}, {shared} shared items{tie_note}"
        n_ratings = int(a.n_ratings[found.in_a].sum() + b.n_ratings[found.in_b].sum())
        for rec in found.records:
            rec["note"] = "; ".join(p for p in (note, rec["note"]) if p)
            rows.append(
                {
                    "comparison": CLINICIAN_PAIR,
                    **rec,
                    "n_ratings": n_ratings,
                    "n_raters": 2,
                    "raters_used": (first, second),
                }
            )
    if full:
        clin = scope.clinicians
        one_way = icc1_unbalanced(clin).rename(columns={"type": "method", "icc": "estimate"})
        one_way["method"] = one_way["method"] + "_unbalanced"
        one_way["ci_method"] = "F"
        add(one_way[[c for c in TABLE_COLUMNS if c in one_way.columns]].to_dict("records"), CLINICIAN_PAIR, {})
        alpha = krippendorff_alpha(clin).assign(ci_low=np.nan, ci_high=np.nan, ci_method="none")
        add(alpha.to_dict("records"), CLINICIAN_PAIR, {})
        if loco:
            for rec in loco_from_scores(clin, confidence=confidence).to_dict("records"):
                rows.append(
                    {
                        "comparison": f"clinician:{rec['clinician']}-other clinicians",
                        "method": "ICC3k",
                        "estimate": rec["icc3k"],
                        "ci_low": rec["ci_low"],
                        "ci_high": rec["ci_high"],
                        "ci_method": "F",
                        "n_items": rec["n_items"],
                        "n_ratings": rec["n_ratings"],
                        "n_raters": rec["n_others"] + 1,
                        "pearson_r": rec["pearson_r"],
                        "spearman_rho": rec["spearman_rho"],
                        "note": rec["note"],
                        "raters_used": (rec["clinician"], *rec["others_used"]),
                        "items_used": rec["items_used"],
                    }
                )

    clin_mean = scope.mean_clinician
    clin_mean_z = zscore_within(clin_mean.scores)
    clin_mean_on_scale = on_scale(clin_mean.scores, kappa_labels)
    others = scope.others()
    n_jury = sum(kind == "jury" for _, kind in others)
    for code, kind in others:
        rater = str(names[code])
        mine = scope.side(code)
        # Kappa needs both sides on the rating scale; a metric on 0-1 is not.
        kappa = kind != "metric" and on_scale(mine.scores, kappa_labels) and clin_mean_on_scale
        found = scope.pair(clin_mean, mine, kappa=kappa, a_z=clin_mean_z, **pair_kwargs)
        used_clin = scope.clinicians_on(found.shared)
        n_ratings = int(clin_mean.n_ratings[found.in_a].sum() + mine.n_ratings[found.in_b].sum())
        add(
            found.records,
            comparison_name(rater, kind, n_jury),
            {"n_ratings": n_ratings, "n_raters": len(used_clin) + 1, "raters_used": (*used_clin, rater)},
        )
    return rows


def agreement_table(
    long: pd.DataFrame,
    protocol: str = "medhelm",
    benchmarks: Sequence[str] | None = None,
    criteria: Sequence[str] | None = None,
    *,
    bootstrap: str = "bca",
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    loco: bool = False,
    kappa_labels: Sequence[int] = (1, 2, 3, 4, 5),
) -> pd.DataFrame:
    """Agreement of every jury, judge and metric with the clinicians, and of clinicians with each other.

    One block per benchmark and one ``pooled`` over all the benchmarks chosen; within each, the
    composite and every criterion. A metric's single score per item is set against the clinicians'
    composite and against each criterion.

    Parameters
    ----------
    long : pandas.DataFrame
        Ratings in the long contract (see :mod:`medhelm_core.agreement`).
    protocol : {"medhelm", "full"}
        ``medhelm``: ICC(3,k) on z-scored pairs with F intervals, exactly as the paper. ``full``: also
        ICC1..ICC3k, bootstrap intervals, one-way ICC(1) over all clinicians, Krippendorff's alpha.
    benchmarks : sequence of str, optional
        Benchmarks to include and pool (default all). MedHELM's 0.474 pools aci_bench and medi_qa.
    criteria : sequence of str, optional
        Criteria of the composite and of the per-criterion rows (default all the clinicians used).
    bootstrap : {"bca", "percentile"}
        Bootstrap interval of the full protocol.
    n_resamples, seed : int
        Bootstrap size and seed.
    confidence : float
        Confidence level of every interval.
    loco : bool
        Full protocol only: add each clinician against the mean of the others.
    kappa_labels : sequence of int
        Rating scale for the quadratic-weighted kappa (on raw scores rounded to integers).

    Returns
    -------
    pandas.DataFrame
        Columns ``comparison``, ``benchmark``, ``criterion``, ``method`` (ICC3k, ..., ICC1_unbalanced,
        alpha_interval, alpha_ordinal), ``estimate``, ``ci_low``, ``ci_high``, ``ci_method`` (F,
        bootstrap-bca, none), ``n_items``, ``n_ratings``, ``n_raters``, ``pearson_r``, ``spearman_rho``,
        ``kappa_qw``, ``reading`` and ``reading_ci`` (Koo & Li, ICC rows), ``note`` (which pair, why a
        value is NaN), ``raters_used`` and ``items_used`` (sorted tuples).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from medhelm_core.agreement import agreement_table
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(1, 6, 12)
    >>> rows = [(f"i{i}", r, k, c, float(np.clip(truth[i] + rng.integers(-1, 2), 1, 5)))
    ...         for i in range(12) for r, k in [("c1", "clinician"), ("c2", "clinician"), ("jury", "jury")]
    ...         for c in ["accuracy", "clarity"]]
    >>> long = pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "criterion", "score"])
    >>> table = agreement_table(long.assign(benchmark="medi_qa"))
    >>> table.query("benchmark == 'pooled' and criterion == 'composite'")["comparison"].tolist()
    ['clinician-clinician', 'jury-clinician']
    """
    if protocol not in PROTOCOLS:
        raise AgreementInputError(f"protocol {protocol!r} unknown; use one of {', '.join(PROTOCOLS)}")
    data, known = chosen_benchmarks(validate_long(long), benchmarks)
    clin = data[data["rater_kind"] == "clinician"]
    if clin.empty:
        raise AgreementInputError("there are no clinician ratings to compare with")
    rubric = clinician_criteria(clin, criteria)
    if protocol == "full":
        check_bootstrap(bootstrap)
    data = data.drop(columns="model", errors="ignore")  # not used here; one string column fewer to slice
    rows: list[dict[str, object]] = []
    for bench, criterion, scores in criterion_scopes(data, known, rubric):
        scope = ScopeScores(scores)
        for row in _scope_rows(scope, protocol, bootstrap, n_resamples, seed, confidence, loco, kappa_labels):
            rows.append({"benchmark": bench, "criterion": criterion, **row})
    table = pd.DataFrame(rows).reindex(columns=list(TABLE_COLUMNS))
    is_icc = table["method"].str.startswith("ICC")
    table["reading"] = [koo_li_reading(float(v)) if ok else "" for v, ok in zip(table["estimate"], is_icc, strict=True)]
    table["reading_ci"] = [
        koo_li_interval_reading(float(lo), float(hi)) if ok else ""
        for lo, hi, ok in zip(table["ci_low"], table["ci_high"], is_icc, strict=True)
    ]
    table["note"] = table["note"].fillna("")
    for col in ("n_items", "n_ratings", "n_raters"):
        table[col] = table[col].fillna(0).astype(int)
    return table
