"""Agreement that uses every overlapping clinician, not one pair: designs where raters vary by item.

MedHELM gave each item to two of 17 clinicians, so a two-way ICC over "the clinicians" drops almost
everything. The statistics here accept any number of ratings per item: the one-way ICC(1) with the
adjusted group size k0, Krippendorff's alpha, and each clinician against the mean of the others.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import krippendorff
import numpy as np
import pandas as pd
from scipy import stats

from medhelm_core.agreement.contract import (
    COMPOSITE,
    MIN_ITEMS,
    checked_scores,
    rater_scores,
    shared_ids,
    validate_long,
)
from medhelm_core.agreement.icc import icc_records
from medhelm_core.agreement.pairs import zscore_within

ALPHA_LEVELS: tuple[str, ...] = ("interval", "ordinal")


def icc1_unbalanced(
    data: pd.DataFrame,
    targets: str = "item_id",
    raters: str = "rater_id",
    ratings: str = "score",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One-way random ICC(1) and ICC(1,k0) when items have different numbers of ratings.

    Uses the unbalanced one-way ANOVA: MSB and MSW from all ratings of the items rated at least twice,
    and the adjusted group size k0 = (N - sum(k_i^2) / N) / (n - 1) in place of k (Shrout & Fleiss
    1979; Donner 1986). Items rated once are left out: they carry no information on agreement. On a
    balanced design this equals pingouin's ``ICC(1,1)`` and ``ICC(1,k)``.

    Parameters
    ----------
    data : pandas.DataFrame
        Long table, one row per (target, rater).
    targets, raters, ratings : str
        Column names of the items, the raters and the scores.
    confidence : float
        Confidence level of the F-based interval (approximate when unbalanced).

    Returns
    -------
    pandas.DataFrame
        Two rows, ``type`` ICC1 and ICC1k, with ``icc``, ``F``, ``df1``, ``df2``, ``pval``, ``ci_low``,
        ``ci_high``, ``k0``, ``n_items``, ``n_ratings``, ``n_raters``, ``items_used`` and ``raters_used``
        (sorted tuples) and ``note``.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import icc1_unbalanced
    >>> d = pd.DataFrame({"item_id": list("aabbbccdd"), "rater_id": list("xyxyzyzxz"),
    ...                   "score": [1, 2, 4, 5, 4, 2, 3, 5, 4]})
    >>> icc1_unbalanced(d).loc[0, "k0"].round(3)
    np.float64(2.222)
    """
    d = checked_scores(data, targets, raters, ratings)
    sizes = d.groupby(targets)[ratings].transform("size")
    d = d[sizes >= 2]
    items = tuple(sorted(d[targets].astype(str).unique()))
    used_raters = tuple(sorted(d[raters].astype(str).unique()))
    n, big_n = len(items), len(d)
    base = {
        "n_items": n,
        "n_ratings": big_n,
        "n_raters": len(used_raters),
        "items_used": items,
        "raters_used": used_raters,
    }

    def table(values: dict[str, float], note: str) -> pd.DataFrame:
        rows = []
        for t in ("ICC1", "ICC1k"):
            rows.append(
                {
                    "type": t,
                    "icc": values.get(t, np.nan),
                    "F": values.get("F", np.nan),
                    "df1": values.get("df1", np.nan),
                    "df2": values.get("df2", np.nan),
                    "pval": values.get("pval", np.nan),
                    "ci_low": values.get(t + "_low", np.nan),
                    "ci_high": values.get(t + "_high", np.nan),
                    "k0": values.get("k0", np.nan),
                    **base,
                    "note": note,
                }
            )
        return pd.DataFrame(rows)

    if n < MIN_ITEMS:
        return table({}, f"fewer than {MIN_ITEMS} items rated at least twice (n={n})")
    groups = d.groupby(targets)[ratings]
    k_i = groups.size().to_numpy(dtype=float)
    means = groups.mean().to_numpy()
    grand = d[ratings].mean()
    ssb = float((k_i * (means - grand) ** 2).sum())
    ssw = float(((d[ratings] - groups.transform("mean")) ** 2).sum())
    df1, df2 = n - 1, big_n - n
    msb, msw = ssb / df1, ssw / df2
    k0 = (big_n - (k_i**2).sum() / big_n) / df1
    if msb <= 0 or msw <= 0:
        note = "no variance between items" if msb <= 0 else "every item has identical ratings"
        return table({"k0": k0}, note)
    f_val = msb / msw
    a = 1 - confidence
    f_l = f_val / stats.f.ppf(1 - a / 2, df1, df2)
    f_u = f_val * stats.f.ppf(1 - a / 2, df2, df1)
    values = {
        "ICC1": (msb - msw) / (msb + (k0 - 1) * msw),
        "ICC1k": (msb - msw) / msb,
        "F": f_val,
        "df1": df1,
        "df2": df2,
        "pval": float(stats.f.sf(f_val, df1, df2)),
        "k0": k0,
        "ICC1_low": (f_l - 1) / (f_l + k0 - 1),
        "ICC1_high": (f_u - 1) / (f_u + k0 - 1),
        "ICC1k_low": 1 - 1 / f_l,
        "ICC1k_high": 1 - 1 / f_u,
    }
    return table(values, "")


def krippendorff_alpha(
    data: pd.DataFrame,
    units: str = "item_id",
    raters: str = "rater_id",
    ratings: str = "score",
    levels: Sequence[str] = ALPHA_LEVELS,
) -> pd.DataFrame:
    """Krippendorff's alpha over all raters, any number of ratings per item (the ``krippendorff`` package).

    Parameters
    ----------
    data : pandas.DataFrame
        Long table, one row per (unit, rater).
    units, raters, ratings : str
        Column names of the items, the raters and the scores.
    levels : sequence of {"interval", "ordinal", "nominal", "ratio"}
        Levels of measurement to report; ordinal ranks the distinct observed values.

    Returns
    -------
    pandas.DataFrame
        One row per level with ``method`` (``alpha_interval`` ...), ``estimate``, ``n_items`` (items with
        two or more ratings, the only ones alpha uses), ``n_ratings``, ``n_raters``, ``items_used``,
        ``raters_used`` and ``note``.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import krippendorff_alpha
    >>> d = pd.DataFrame({"item_id": list("aabbccdd"), "rater_id": list("xyxyxyxy"),
    ...                   "score": [1, 1, 3, 3, 5, 4, 2, 2]})
    >>> krippendorff_alpha(d, levels=["interval"]).loc[0, "estimate"].round(3)
    np.float64(0.937)
    """
    d = checked_scores(data, units, raters, ratings)
    d = d[d.groupby(units)[ratings].transform("size") >= 2]
    items = tuple(sorted(d[units].astype(str).unique()))
    used_raters = tuple(sorted(d[raters].astype(str).unique()))
    base = {
        "n_items": len(items),
        "n_ratings": len(d),
        "n_raters": len(used_raters),
        "items_used": items,
        "raters_used": used_raters,
    }
    rows = []
    for level in levels:
        note, value = "", np.nan
        if len(items) < MIN_ITEMS:
            note = f"fewer than {MIN_ITEMS} items rated at least twice (n={len(items)})"
        elif d[ratings].nunique() < 2:
            note = "every rating has the same value"
        else:
            matrix = d.pivot(index=raters, columns=units, values=ratings).to_numpy(dtype=float)
            value = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level))
        rows.append({"method": f"alpha_{level}", "estimate": value, **base, "note": note})
    return pd.DataFrame(rows)


def _correlations(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if x.size < MIN_ITEMS or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.pearsonr(x, y).statistic), float(stats.spearmanr(x, y).statistic)


def leave_one_clinician_out(
    long: pd.DataFrame,
    criterion: str = COMPOSITE,
    criteria: Sequence[str] | None = None,
    standardize: bool = True,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Each clinician against the mean of the other clinicians on the items they share.

    Parameters
    ----------
    long : pandas.DataFrame
        Ratings in the long contract (see :mod:`medhelm_core.agreement`); only clinicians are used.
    criterion : str
        A criterion, or ``"composite"`` (mean of ``criteria``).
    criteria : sequence of str, optional
        Criteria of the composite (default: all the clinicians used).
    standardize : bool
        z-score the clinician's and the others' mean scores over the shared items before the ICC, as
        MedHELM's protocol does (Pearson and Spearman do not depend on it).
    confidence : float
        Confidence level of the F interval of ICC(3,k).

    Returns
    -------
    pandas.DataFrame
        One row per clinician: ``clinician``, ``icc3k``, ``ci_low``, ``ci_high``, ``pearson_r``,
        ``spearman_rho``, ``n_items`` (shared items), ``n_ratings`` (all ratings on them), ``n_others``,
        ``items_used``, ``others_used``, ``note``.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import leave_one_clinician_out
    >>> rows = [(i, r, s) for i, r, s in [("a", "c1", 1), ("a", "c2", 2), ("b", "c1", 3), ("b", "c2", 4),
    ...         ("c", "c1", 5), ("c", "c3", 5), ("d", "c2", 2), ("d", "c3", 1)]]
    >>> long = pd.DataFrame(rows, columns=["item_id", "rater_id", "score"]).assign(
    ...     rater_kind="clinician", criterion="accuracy", benchmark="medi_qa")
    >>> leave_one_clinician_out(long, "accuracy").set_index("clinician").loc["c1", "n_items"]
    np.int64(3)
    """
    scores = rater_scores(validate_long(long), criterion, criteria)
    return loco_from_scores(scores, standardize, confidence)


def loco_from_scores(scores: pd.DataFrame, standardize: bool = True, confidence: float = 0.95) -> pd.DataFrame:
    """:func:`leave_one_clinician_out` on per-(item, rater) scores already reduced to one criterion.

    Parameters
    ----------
    scores : pandas.DataFrame
        As returned by :func:`medhelm_core.agreement.rater_scores`; non-clinicians are ignored.
    standardize : bool
        z-score both sides over the shared items before the ICC.
    confidence : float
        Confidence level of the F interval of ICC(3,k).

    Returns
    -------
    pandas.DataFrame
        As :func:`leave_one_clinician_out`.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.incomplete import loco_from_scores
    >>> s = pd.DataFrame({"item_id": list("aabb"), "rater_id": ["c1", "c2"] * 2,
    ...                   "rater_kind": "clinician", "score": [1.0, 2, 3, 4], "n_ratings": 1})
    >>> loco_from_scores(s).loc[0, "note"]
    'fewer than 3 shared items (n=2)'
    """
    clin = scores[scores["rater_kind"] == "clinician"]
    wide = clin.pivot(index="item_id", columns="rater_id", values="score")
    ratings = clin.pivot(index="item_id", columns="rater_id", values="n_ratings").fillna(0).to_numpy()
    # Masks, counts and the others' means in numpy, once (pandas' notna and a mean over a copied block per
    # clinician, fifty times on a 20,000 x 50 frame, took most of the ceiling's time).
    values = wide.to_numpy(dtype=float)
    rated = ~np.isnan(values)
    filled = np.where(rated, values, 0.0)
    per_item = rated.sum(axis=1)
    item_ids = shared_ids(wide.index)
    rows = []
    for rater in sorted(wide.columns):
        j = wide.columns.get_loc(rater)
        shared = rated[:, j] & (per_item > 1)
        block = filled[shared]
        # The others' mean: their scores added one column after the other in the frame's order, as pandas'
        # row mean adds them, then divided by their count, so every figure stays the same to the last bit.
        total = np.zeros(block.shape[0])
        for c in range(block.shape[1]):
            if c != j:
                total = total + block[:, c]
        rest = total / (per_item[shared] - 1)
        others_rated = rated[shared].any(axis=0)
        others_rated[j] = False
        others_used = tuple(sorted(wide.columns[others_rated]))
        n_ratings = int(ratings[shared].sum())
        row = {
            "clinician": rater,
            "icc3k": np.nan,
            "ci_low": np.nan,
            "ci_high": np.nan,
            "n_items": int(shared.sum()),
            "n_ratings": n_ratings,
            "n_others": len(others_used),
            "items_used": tuple(sorted(item_ids[shared].tolist())),
            "others_used": others_used,
            "note": "",
        }
        x, y = values[shared, j], rest
        row["pearson_r"], row["spearman_rho"] = _correlations(x, y)
        if x.size < MIN_ITEMS:
            row["note"] = f"fewer than {MIN_ITEMS} shared items (n={x.size})"
        else:
            if standardize:
                x, y = zscore_within(x), zscore_within(y)
            if np.isnan(x).any() or np.isnan(y).any():
                row["note"] = "constant scores on the shared items"
            else:
                icc = next(r for r in icc_records(np.column_stack([x, y]), confidence) if r["type"] == "ICC3k")
                row.update(icc3k=icc["icc"], ci_low=icc["ci_low"], ci_high=icc["ci_high"], note=icc["note"])
        rows.append(row)
    cols = [
        "clinician",
        "icc3k",
        "ci_low",
        "ci_high",
        "pearson_r",
        "spearman_rho",
        "n_items",
        "n_ratings",
        "n_others",
        "items_used",
        "others_used",
        "note",
    ]
    # Tuples go in as ready-made object columns: pandas' inference over fifty 20,000-id tuples took 0.1 s.
    frame = {c: [row[c] for row in rows] for c in cols}
    for c in ("items_used", "others_used"):
        column = np.empty(len(rows), dtype=object)
        for n, value in enumerate(frame[c]):
            column[n] = value
        frame[c] = column
    return pd.DataFrame(frame, columns=cols)
