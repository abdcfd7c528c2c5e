"""The summary tables: MedHELM's agreement protocol exactly, and the fuller one this product adds.

``protocol="medhelm"`` reproduces the paper's released script (``4_calculate_icc.py``): the composite is
the mean of the raw criteria per rater and item; the clinicians' composites are averaged per item; that
mean clinician and the jury are each z-scored as one rater over their items; ICC(3,k) with its F
interval; the clinician baseline is ICC(3,k) of the two clinicians sharing the most items, each z-scored
over all their own ratings. On MedHELM's ratings this gives the paper's 0.474 (0.10 to 0.69).

Beside the one pair, both protocols give the clinicians' agreement from every clinician: the one-way
ICC(1) over all overlapping clinicians (absolute agreement on the raw scale, F interval with k0) and the
clinician ceiling (each clinician against the mean of the others, median and range).

``protocol="full"`` adds, for every pair, absolute agreement on the raw scale, ICC(A,1) and ICC(A,k), with
the generalized confidence interval (:mod:`medhelm_core.agreement.intervals`: raters drawn at random for
two clinicians, fixed for the jury beside the mean clinician), ICC(C,1) beside ICC(C,k), Krippendorff's
alpha, and optionally each clinician against the others. Bootstrap intervals over items are added only on
request (``bootstrap="bca"``), for the consistency forms: they under-cover below about 100 items.

Every row names its form in words (``form``); Koo & Li's readings are given only for the forms they were
written for (reliability on the raw scale: ICC(A,·) and the one-way ICC(1)), not for ICC(C,k) of two
z-scored "raters", which is 2r / (1 + r) of their correlation.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, MutableMapping, Sequence

import numpy as np
import pandas as pd

from medhelm_core.agreement.bootstrap import check_bootstrap
from medhelm_core.agreement.contract import COMPOSITE, MIN_ITEMS, on_scale, rater_scores, validate_long
from medhelm_core.agreement.incomplete import icc1_from_codes, krippendorff_alpha, loco_from_codes
from medhelm_core.agreement.interpret import KOO_LI_METHODS, form_words, koo_li_interval_reading, koo_li_reading
from medhelm_core.agreement.judges import CLINICIAN_CEILING, clinician_ceiling
from medhelm_core.agreement.pairs import PAIR_FORMS, zscore_within
from medhelm_core.agreement.scopes import (
    POOLED,
    ScopeScores,
    benchmark_scopes,
    chosen_benchmarks,
    clinician_criteria,
    reused_rows,
)
from medhelm_core.errors import AgreementInputError

PROTOCOLS: tuple[str, ...] = ("medhelm", "full")
CLINICIAN_PAIR = "clinician-clinician"
#: the clinicians' agreement from every overlapping clinician (one-way ICC(1), alpha)
CLINICIANS_ALL = "all clinicians"
#: the ``ci_method`` of the ceiling's interval column: the range over clinicians, not a confidence interval
RANGE = "range over clinicians"
TABLE_COLUMNS: tuple[str, ...] = (
    "comparison",
    "benchmark",
    "criterion",
    "method",
    "form",
    "estimate",
    "ci_low",
    "ci_high",
    "ci_method",
    "n_items",
    "n_available",
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


def _ceiling_rows(scope: ScopeScores, n_available: int, confidence: float, loco: bool) -> list[dict[str, object]]:
    """The clinicians' own agreement from every clinician, beside the one pair: the one-way ICC(1) over all
    overlapping clinicians (F interval) and each clinician against the mean of the others (median and range)."""
    clin = scope.clinician_codes()
    rows: list[dict[str, object]] = []
    one_way = icc1_from_codes(clin, confidence=confidence).rename(columns={"type": "method", "icc": "estimate"})
    one_way["method"] = one_way["method"] + "_unbalanced"
    one_way["ci_method"] = "F"
    for rec in one_way.to_dict("records"):
        rec = {c: rec[c] for c in TABLE_COLUMNS if c in rec}
        rows.append({"comparison": CLINICIANS_ALL, **rec, "n_available": n_available})
    per = loco_from_codes(clin, confidence=confidence)
    ceiling = clinician_ceiling(per)
    defined = per[per["icc3k"].notna()]
    used = tuple(sorted({i for items in defined["items_used"] for i in items}))
    rows.append(
        {
            "comparison": CLINICIAN_CEILING,
            "method": "ICC3k",
            "estimate": ceiling.estimate,
            "ci_low": ceiling.low,
            "ci_high": ceiling.high,
            "ci_method": RANGE,
            "n_items": len(used),
            "n_available": n_available,
            "n_ratings": int(defined["n_ratings"].sum()) if len(defined) else 0,
            "n_raters": ceiling.clinicians,
            "pearson_r": float(defined["pearson_r"].median()) if len(defined) else np.nan,
            "spearman_rho": float(defined["spearman_rho"].median()) if len(defined) else np.nan,
            "note": (
                f"median of {ceiling.clinicians} of {len(per)} clinicians, each against the others; the interval "
                "is their range, not a confidence interval"
                if ceiling.clinicians
                else f"no clinician shares enough items with the others (fewer than {MIN_ITEMS} each)"
            ),
            "raters_used": tuple(defined["clinician"]),
            "items_used": used,
        }
    )
    if loco:
        for rec in per.to_dict("records"):
            rows.append(
                {
                    "comparison": f"clinician:{rec['clinician']}-other clinicians",
                    "method": "ICC3k",
                    "estimate": rec["icc3k"],
                    "ci_low": rec["ci_low"],
                    "ci_high": rec["ci_high"],
                    "ci_method": "F",
                    "n_items": rec["n_items"],
                    "n_available": n_available,
                    "n_ratings": rec["n_ratings"],
                    "n_raters": rec["n_others"] + 1,
                    "pearson_r": rec["pearson_r"],
                    "spearman_rho": rec["spearman_rho"],
                    "note": rec["note"],
                    "raters_used": (rec["clinician"], *rec["others_used"]),
                    "items_used": rec["items_used"],
                }
            )
    return rows


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
    forms = PAIR_FORMS if full else ("ICC3k",)
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
    clin_items = scope.item[scope.clin_rows]
    # Items a clinician-clinician figure could use: those at least two clinicians rated.
    rated_twice = int((np.bincount(clin_items) >= 2).sum()) if clin_items.size else 0

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
                "n_available": rated_twice,
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
        same = on_scale(a.scores, kappa_labels) and on_scale(b.scores, kappa_labels)
        # Two clinicians stand for clinicians in general: their absolute agreement has raters drawn at random.
        found = scope.pair(a, b, kappa=same, absolute=same, raters="random", **pair_kwargs)
        tie_note = f"; {ties} other pair(s) share as many items" if ties else ""
        note = f"pair {first} and {second}, {shared} shared items{tie_note}"
        n_ratings = int(a.n_ratings[found.in_a].sum() + b.n_ratings[found.in_b].sum())
        for rec in found.records:
            rec["note"] = "; ".join(p for p in (note, rec["note"]) if p)
            rows.append(
                {
                    "comparison": CLINICIAN_PAIR,
                    **rec,
                    "n_available": rated_twice,
                    "n_ratings": n_ratings,
                    "n_raters": 2,
                    "raters_used": (first, second),
                }
            )
    rows += _ceiling_rows(scope, rated_twice, confidence, loco and full)
    if full:
        alpha = krippendorff_alpha(scope.clinicians).assign(ci_low=np.nan, ci_high=np.nan, ci_method="none")
        add(alpha.to_dict("records"), CLINICIANS_ALL, {"n_available": rated_twice})

    clin_mean = scope.mean_clinician
    clin_mean_z = zscore_within(clin_mean.scores)
    clin_mean_on_scale = on_scale(clin_mean.scores, kappa_labels)
    others = scope.others()
    n_jury = sum(kind == "jury" for _, kind in others)
    for code, kind in others:
        rater = str(names[code])
        mine = scope.side(code)
        # Kappa and absolute agreement need both sides on the rating scale; a metric on 0-1 is not.
        same = kind != "metric" and on_scale(mine.scores, kappa_labels) and clin_mean_on_scale
        # The jury (or judge) is the rater of interest beside the mean clinician: fixed raters.
        found = scope.pair(clin_mean, mine, kappa=same, absolute=same, raters="fixed", a_z=clin_mean_z, **pair_kwargs)
        used_clin = scope.clinicians_on(found.shared)
        n_ratings = int(clin_mean.n_ratings[found.in_a].sum() + mine.n_ratings[found.in_b].sum())
        add(
            found.records,
            comparison_name(rater, kind, n_jury),
            {"n_available": len(clin_mean.items), "n_ratings": n_ratings, "n_raters": len(used_clin) + 1,
             "raters_used": (*used_clin, rater)},
        )
    return rows


def agreement_table(
    long: pd.DataFrame,
    protocol: str = "medhelm",
    benchmarks: Sequence[str] | None = None,
    criteria: Sequence[str] | None = None,
    *,
    bootstrap: str | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    loco: bool = False,
    kappa_labels: Sequence[int] = (1, 2, 3, 4, 5),
    scope_versions: Mapping[str, Hashable] | None = None,
    scope_cache: MutableMapping[Hashable, list[dict[str, object]]] | None = None,
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
        ``medhelm``: ICC(C,k) on z-scored pairs with F intervals, exactly as the paper, and the clinicians'
        agreement from every clinician beside the pair. ``full``: also ICC(C,1), and ICC(A,1) and ICC(A,k)
        on the raw scale with generalized intervals, and Krippendorff's alpha.
    benchmarks : sequence of str, optional
        Benchmarks to include and pool (default all). MedHELM's 0.474 pools aci_bench and medi_qa.
    criteria : sequence of str, optional
        Criteria of the composite and of the per-criterion rows (default all the clinicians used).
    bootstrap : {"bca", "percentile"} or None
        Full protocol only: add bootstrap intervals over items for the consistency forms (default none:
        they under-cover below about 100 items; the F interval is exact).
    n_resamples, seed : int
        Bootstrap size and seed.
    confidence : float
        Confidence level of every interval.
    loco : bool
        Full protocol only: add each clinician against the mean of the others.
    kappa_labels : sequence of int
        Rating scale for the quadratic-weighted kappa (criterion scores as they are; means rounded half away
        from zero).
    scope_versions, scope_cache : optional
        Recompute only the scopes whose data changed: ``scope_versions`` maps a benchmark (and ``pooled``) to
        a value that changes whenever that scope's rows of ``long`` could (the caller's data version of it);
        a scope's rows are kept in ``scope_cache`` under that value, the scope's criterion and every argument
        here, and taken from it when they match. A scope missing from ``scope_versions`` is computed. The
        table is the same, to the last bit, as one computed whole.

    Returns
    -------
    pandas.DataFrame
        Columns ``comparison`` (``clinician-clinician``, ``all clinicians``, ``clinician ceiling``,
        ``jury-clinician`` ...), ``benchmark``, ``criterion``, ``method`` (ICC3k, ICC3, ICC2, ICC2k,
        ICC1_unbalanced, ICC1k_unbalanced, alpha_interval, alpha_ordinal), ``form`` (the method in words),
        ``estimate``, ``ci_low``, ``ci_high``, ``ci_method`` (F, GCI (raters fixed), GCI (raters random),
        bootstrap-..., range over clinicians, none), ``n_items`` (used) and ``n_available`` (items the
        comparison could have used), ``n_ratings``, ``n_raters``, ``pearson_r``, ``spearman_rho``,
        ``kappa_qw``, ``reading`` and ``reading_ci`` (Koo & Li, only for raw-scale reliability forms),
        ``note`` (which pair, why a value is NaN), ``raters_used`` and ``items_used`` (sorted tuples).

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
    ['clinician-clinician', 'all clinicians', 'all clinicians', 'clinician ceiling', 'jury-clinician']
    """
    if protocol not in PROTOCOLS:
        raise AgreementInputError(f"protocol {protocol!r} unknown; use one of {', '.join(PROTOCOLS)}")
    data, known = chosen_benchmarks(validate_long(long), benchmarks)
    clin = data[data["rater_kind"] == "clinician"]
    if clin.empty:
        raise AgreementInputError("there are no clinician ratings to compare with")
    rubric = clinician_criteria(clin, criteria)
    if protocol == "full" and bootstrap is not None:
        check_bootstrap(bootstrap)
    data = data.drop(columns="model", errors="ignore")  # not used here; one string column fewer to slice
    rows: list[dict[str, object]] = []
    settings = (protocol, bootstrap, n_resamples, seed, confidence, loco, tuple(kappa_labels), tuple(rubric))
    for bench, part in benchmark_scopes(data, known):
        for criterion in [COMPOSITE, *rubric]:
            def compute(part: pd.DataFrame = part, criterion: str = criterion) -> list[dict[str, object]]:
                scope = ScopeScores(rater_scores(part, criterion, rubric))
                return _scope_rows(scope, protocol, bootstrap, n_resamples, seed, confidence, loco, kappa_labels)

            # The pooled scope's rows depend on which benchmarks it pools, as well as on their data.
            key = (bench, tuple(known) if bench == POOLED else (), criterion, settings)
            found = reused_rows(scope_cache, scope_versions, bench, key, compute)
            for row in found:
                rows.append({"benchmark": bench, "criterion": criterion, **row})
    table = pd.DataFrame(rows).reindex(columns=list(TABLE_COLUMNS))
    table["form"] = [form_words(m, c) for m, c in zip(table["method"], table["comparison"], strict=True)]
    # Koo & Li's bands are for reliability on the raw scale, not for ICC(C,k) of two z-scored "raters".
    applies = table["method"].isin(KOO_LI_METHODS) & table["ci_method"].ne(RANGE)
    table["reading"] = [
        koo_li_reading(float(v)) if ok else "" for v, ok in zip(table["estimate"], applies, strict=True)
    ]
    table["reading_ci"] = [
        koo_li_interval_reading(float(lo), float(hi)) if ok else ""
        for lo, hi, ok in zip(table["ci_low"], table["ci_high"], applies, strict=True)
    ]
    table["note"] = table["note"].fillna("")
    for col in ("n_items", "n_available", "n_ratings", "n_raters"):
        table[col] = table[col].fillna(0).astype(int)
    return table
