"""Intraclass correlation in its six Shrout & Fleiss / McGraw & Wong forms, with F-based intervals.

The ICCs are computed from two-way ANOVA sums of squares written as weighted moments of the items x
raters matrix, so the same code serves one data set (weights all one), a batch of bootstrap resamples
(weights are how often each item was drawn) and the jackknife (weights leave one item out): that is what
makes :mod:`medhelm_core.agreement.bootstrap` a few matrix products instead of thousands of ANOVAs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from medhelm_core.agreement.contract import MIN_ITEMS, checked_scores
from medhelm_core.agreement.special import f_quantile, f_survival
from medhelm_core.errors import AgreementInputError

ICC_TYPES: tuple[str, ...] = ("ICC1", "ICC2", "ICC3", "ICC1k", "ICC2k", "ICC3k")
# pingouin >= 0.7 uses McGraw & Wong's names; older releases used ours.
PINGOUIN_NAMES: dict[str, str] = {
    "ICC(1,1)": "ICC1",
    "ICC(A,1)": "ICC2",
    "ICC(C,1)": "ICC3",
    "ICC(1,k)": "ICC1k",
    "ICC(A,k)": "ICC2k",
    "ICC(C,k)": "ICC3k",
    **{name: name for name in ICC_TYPES},
}
ICC_DESCRIPTIONS: dict[str, str] = {
    "ICC1": "single rater, one-way random, absolute agreement",
    "ICC2": "single rater, two-way random, absolute agreement",
    "ICC3": "single rater, two-way mixed, consistency",
    "ICC1k": "mean of k raters, one-way random, absolute agreement",
    "ICC2k": "mean of k raters, two-way random, absolute agreement",
    "ICC3k": "mean of k raters, two-way mixed, consistency",
}
Float = NDArray[np.float64]


def check_icc_types(icc_types: Sequence[str]) -> None:
    """Refuse ICC forms other than the six of :data:`ICC_TYPES`, naming them."""
    unknown = [t for t in icc_types if t not in ICC_TYPES]
    if unknown:
        raise AgreementInputError(f"ICC type(s) {', '.join(unknown)} unknown; use {', '.join(ICC_TYPES)}")


def weighted_sums_of_squares(x: Float, weights: Float) -> dict[str, Float]:
    """Two-way ANOVA sums of squares for a batch of item-weighted copies of ``x``.

    Parameters
    ----------
    x : ndarray of shape (n, k)
        Complete items x raters matrix.
    weights : ndarray or scipy.sparse matrix of shape (B, n)
        How many times each item enters each of the B data sets (bootstrap counts, jackknife 0/1 masks,
        a single row of ones, or 0/1 rows picking B disjoint blocks of ``x``, each its own data set).

    Returns
    -------
    dict of ndarray of shape (B,)
        ``ssr`` (items), ``ssc`` (raters), ``sse`` (residual), ``sst`` (total), ``n`` (items per data set: a
        scalar when every row sums to the same, else one per row) and the scalar ``k`` (raters).

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.icc import weighted_sums_of_squares
    >>> x = np.array([[1.0, 2.0], [3.0, 5.0], [4.0, 4.0]])
    >>> ss = weighted_sums_of_squares(x, np.ones((1, 3)))
    >>> round(float(ss["ssr"][0]), 6)
    8.333333
    """
    k = x.shape[1]
    sizes = np.asarray(weights.sum(axis=1), dtype=float).ravel()
    n = np.float64(sizes[0]) if (sizes == sizes[0]).all() else sizes
    # Centring keeps the raw-moment formulas below free of cancellation error.
    xc = x - x.mean()
    row_sum = xc.sum(axis=1)
    total = weights @ row_sum
    correction = total**2 / (n * k)
    sst = weights @ (xc**2).sum(axis=1) - correction
    ssr = weights @ row_sum**2 / k - correction
    ssc = (np.asarray(weights @ xc) ** 2).sum(axis=1) / n - correction
    # Perfect agreement leaves a residual of +-1e-16; a negative sum of squares would push ICC above 1.
    sse = np.maximum(sst - ssr - ssc, 0.0)
    return {"ssr": ssr, "ssc": ssc, "sse": sse, "sst": sst, "n": n, "k": np.float64(k)}


def icc_from_sums_of_squares(ss: dict[str, Float]) -> dict[str, Float]:
    """The six ICCs and the mean squares, elementwise over a batch of ANOVAs.

    Parameters
    ----------
    ss : dict
        As returned by :func:`weighted_sums_of_squares`.

    Returns
    -------
    dict of ndarray
        One array per ICC type (``ICC1`` ... ``ICC3k``) and the mean squares ``msr``, ``msc``, ``mse``,
        ``msw``. An undefined ICC (no variance between items) is NaN, not an infinity.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.icc import icc_from_sums_of_squares, weighted_sums_of_squares
    >>> x = np.array([[1.0, 2.0], [3.0, 5.0], [4.0, 4.0]])
    >>> out = icc_from_sums_of_squares(weighted_sums_of_squares(x, np.ones((1, 3))))
    >>> round(float(out["ICC3k"][0]), 4)
    0.88
    """
    n, k = ss["n"], ss["k"]
    msr = ss["ssr"] / (n - 1)
    msc = ss["ssc"] / (k - 1)
    mse = ss["sse"] / ((n - 1) * (k - 1))
    msw = (ss["ssc"] + ss["sse"]) / (n * (k - 1))
    denominators = {
        "ICC1": msr + (k - 1) * msw,
        "ICC2": msr + (k - 1) * mse + k * (msc - mse) / n,
        "ICC3": msr + (k - 1) * mse,
        "ICC1k": msr,
        "ICC2k": msr + (msc - mse) / n,
        "ICC3k": msr,
    }
    numerators = {"ICC1": msr - msw, "ICC1k": msr - msw}
    # Every mean square is a variance, so a denominator is undefined when it is not clearly positive: the
    # absolute-agreement ones (msc - mse) / n can cancel msr exactly, and dividing by that rounding residue
    # gave +-1e16 where the ICC is undefined.
    scale = np.maximum(np.abs(msr) + np.abs(msc) + np.abs(mse) + np.abs(msw), 1e-300)
    # Rounding can leave a tiny positive mean square where the true one is zero.
    flat = ss["ssr"] <= 1e-12 * np.maximum(ss["sst"], 1e-300)
    out: dict[str, Float] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for name in ICC_TYPES:
            denominator = denominators[name]
            value = numerators.get(name, msr - mse) / denominator
            defined = np.isfinite(value) & ~flat & (denominator > 1e-12 * scale)
            out[name] = np.where(defined, value, np.nan)
    out.update(msr=msr, msc=msc, mse=mse, msw=msw)
    return out


def _f_intervals(
    ms: dict[str, float], iccs: dict[str, float], n: int, k: int, confidence: float
) -> dict[str, tuple[float, float]]:
    """Exact F intervals (Shrout & Fleiss 1979; McGraw & Wong 1996 for ICC2), as pingouin computes them."""
    a = 1 - confidence
    msr, msc, mse, msw = ms["msr"], ms["msc"], ms["mse"], ms["msw"]
    df1, df_w, df_e = n - 1, n * (k - 1), (n - 1) * (k - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = msr / msw
        f1l = f1 / f_quantile(1 - a / 2, df1, df_w)
        f1u = f1 * f_quantile(1 - a / 2, df_w, df1)
        f3 = msr / mse
        f3l = f3 / f_quantile(1 - a / 2, df1, df_e)
        f3u = f3 * f_quantile(1 - a / 2, df_e, df1)
        icc2 = iccs["ICC2"]
        fj = msc / mse
        # Satterthwaite degrees of freedom for the two-way random model.
        vn = df_e * (k * icc2 * fj + n * (1 + (k - 1) * icc2) - k * icc2) ** 2
        vd = df1 * k**2 * icc2**2 * fj**2 + (n * (1 + (k - 1) * icc2) - k * icc2) ** 2
        v = vn / vd
        f2u = f_quantile(1 - a / 2, df1, v)
        f2l = f_quantile(1 - a / 2, v, df1)
        l2 = n * (msr - f2u * mse) / (f2u * (k * msc + (k * n - k - n) * mse) + n * msr)
        u2 = n * (f2l * msr - mse) / (k * msc + (k * n - k - n) * mse + n * f2l * msr)
        # Satterthwaite's df is a ratio of squares that can vanish or overflow when the rater means differ
        # less than chance; its bounds are then rounding noise (they reached -2.7e9), not an interval.
        usable = np.isfinite(v) & (v > 0)
        l2, u2 = np.where(usable, l2, np.nan), np.where(usable, u2, np.nan)
        single = {
            # (F - 1) / (F + k - 1), written so that perfect agreement (F = inf) gives 1, not NaN.
            "ICC1": ((1 - 1 / f1l) / (1 + (k - 1) / f1l), (1 - 1 / f1u) / (1 + (k - 1) / f1u)),
            "ICC2": (l2, u2),
            "ICC3": ((1 - 1 / f3l) / (1 + (k - 1) / f3l), (1 - 1 / f3u) / (1 + (k - 1) / f3u)),
        }
        average = {
            "ICC1k": (1 - 1 / f1l, 1 - 1 / f1u),
            "ICC2k": (l2 * k / (1 + l2 * (k - 1)), u2 * k / (1 + u2 * (k - 1))),
            "ICC3k": (1 - 1 / f3l, 1 - 1 / f3u),
        }
    floor = -1 / (k - 1)
    out: dict[str, tuple[Float, Float]] = {}
    for name, (low, high) in single.items():
        # A single-rater ICC lies in [-1/(k-1), 1]; a bound outside it is no bound.
        bounds = [np.where(np.isfinite(b) & (b >= floor - 1e-9) & (b <= 1 + 1e-9), b, np.nan) for b in (low, high)]
        out[name] = (bounds[0], bounds[1])
        # The mean of k raters is k b / (1 + (k - 1) b) of the single rater's b: undefined where b sits on
        # -1/(k-1) (it gave -1e16), so that bound is NaN, not a huge number.
        inside = [b > floor + 1e-9 for b in bounds]
        avg = average[name + "k"]
        out[name + "k"] = (np.where(inside[0], avg[0], np.nan), np.where(inside[1], avg[1], np.nan))
    return out


def _empty_records(n: int, k: int, note: str) -> list[dict[str, object]]:
    return [
        {
            "type": t,
            "description": ICC_DESCRIPTIONS[t],
            "icc": np.nan,
            "F": np.nan,
            "df1": np.nan,
            "df2": np.nan,
            "pval": np.nan,
            "ci_low": np.nan,
            "ci_high": np.nan,
            "n_items": n,
            "n_raters": k,
            "note": note,
        }
        for t in ICC_TYPES
    ]


def icc_records(arr: Float, confidence: float = 0.95) -> list[dict[str, object]]:
    """:func:`icc_matrix` as a list of row dicts, for callers that assemble their own tables.

    Parameters
    ----------
    arr : ndarray of shape (n_items, n_raters)
        Complete scores (not checked here; :func:`icc_matrix` checks them).
    confidence : float
        Confidence level of the intervals.

    Returns
    -------
    list of dict
        One dict per ICC type, keys as the columns of :func:`icc_matrix`.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.icc import icc_records
    >>> [r["type"] for r in icc_records(np.array([[1.0, 2], [3, 5], [4, 4]]))][:2]
    ['ICC1', 'ICC2']
    """
    n, k = arr.shape
    if n < MIN_ITEMS:
        return _empty_records(n, k, f"fewer than {MIN_ITEMS} items (n={n})")
    if k < 2:
        return _empty_records(n, k, f"fewer than 2 raters (k={k})")
    ss = weighted_sums_of_squares(arr, np.ones((1, n)))
    # numpy scalars, so perfect agreement (a zero mean square) gives F = inf, not ZeroDivisionError.
    res = {key: np.float64(val[0]) for key, val in icc_from_sums_of_squares(ss).items()}
    if np.isnan(res["ICC3k"]):
        return _empty_records(n, k, "no variance between items")
    iccs = {t: res[t] for t in ICC_TYPES}
    cis = _f_intervals(res, iccs, n, k, confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        f_one, f_two = res["msr"] / res["msw"], res["msr"] / res["mse"]
    df_w, df_e = n * (k - 1), (n - 1) * (k - 1)
    p_one, p_two = float(f_survival(f_one, n - 1, df_w)), float(f_survival(f_two, n - 1, df_e))
    rows: list[dict[str, object]] = []
    for t in ICC_TYPES:
        one_way = t.startswith("ICC1")
        f_val, df2, pval = (f_one, df_w, p_one) if one_way else (f_two, df_e, p_two)
        low, high = float(cis[t][0]), float(cis[t][1])
        rows.append(
            {
                "type": t,
                "description": ICC_DESCRIPTIONS[t],
                "icc": float(iccs[t]),
                "F": float(f_val),
                "df1": n - 1,
                "df2": df2,
                "pval": pval,
                "ci_low": low,
                "ci_high": high,
                "n_items": n,
                "n_raters": k,
                "note": undefined_note(float(iccs[t]), low, high),
            }
        )
    return rows


def undefined_note(icc: float, low: float, high: float) -> str:
    """Why an ICC or a bound of its interval is NaN (empty when all three are numbers).

    Examples
    --------
    >>> from medhelm_core.agreement.icc import undefined_note
    >>> undefined_note(0.5, float("nan"), 0.9)
    'lower bound undefined: the F bound falls outside the range of the ICC'
    """
    if np.isnan(icc):
        return "undefined: its denominator (a sum of variance estimates) is not positive"
    missing = [name for name, v in (("lower", low), ("upper", high)) if np.isnan(v)]
    if not missing:
        return ""
    which = " and ".join(missing)
    return f"{which} bound{'s' if len(missing) > 1 else ''} undefined: the F bound falls outside the range of the ICC"


def sums_of_squares_batch(x: ArrayLike) -> dict[str, Float]:
    """Two-way ANOVA sums of squares of a batch of complete items x raters matrices, one per leading index.

    What a simulation needs (thousands of studies at once); :func:`weighted_sums_of_squares` is the same
    ANOVA for item-weighted copies of one matrix.

    Parameters
    ----------
    x : array_like of shape (R, n, k)
        R complete items x raters matrices.

    Returns
    -------
    dict of ndarray of shape (R,)
        As :func:`weighted_sums_of_squares`.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.icc import sums_of_squares_batch
    >>> x = np.array([[[1.0, 2.0], [3.0, 5.0], [4.0, 4.0]]])
    >>> round(float(sums_of_squares_batch(x)["ssr"][0]), 6)
    8.333333
    """
    arr = np.asarray(x, dtype=float)
    _, n, k = arr.shape
    xc = arr - arr.mean(axis=(1, 2), keepdims=True)
    sst = (xc**2).sum(axis=(1, 2))
    ssr = k * (xc.mean(axis=2) ** 2).sum(axis=1)
    ssc = n * (xc.mean(axis=1) ** 2).sum(axis=1)
    sse = np.maximum(sst - ssr - ssc, 0.0)
    return {"ssr": ssr, "ssc": ssc, "sse": sse, "sst": sst, "n": np.float64(n), "k": np.float64(k)}


def f_intervals(ss: dict[str, Float], confidence: float = 0.95) -> dict[str, tuple[Float, Float]]:
    """The F-based intervals of the six ICCs for a batch of ANOVAs (NaN where a bound is undefined).

    Parameters
    ----------
    ss : dict
        As returned by :func:`sums_of_squares_batch` or :func:`weighted_sums_of_squares` (whose data sets may
        differ in size).
    confidence : float
        Confidence level.

    Returns
    -------
    dict of (ndarray, ndarray)
        Lower and upper bounds per ICC type.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.icc import f_intervals, sums_of_squares_batch
    >>> x = np.array([[[1.0, 2.0], [3.0, 5.0], [4.0, 4.0], [2.0, 2.0]]])
    >>> low, high = f_intervals(sums_of_squares_batch(x))["ICC3k"]
    >>> bool(low[0] < 0.867 < high[0])
    True
    """
    res = icc_from_sums_of_squares(ss)
    n = int(ss["n"]) if np.ndim(ss["n"]) == 0 else ss["n"]
    return _f_intervals(res, {t: res[t] for t in ICC_TYPES}, n, int(ss["k"]), confidence)


def icc_matrix(x: ArrayLike, confidence: float = 0.95) -> pd.DataFrame:
    """All six ICCs with F tests and F-based confidence intervals for a complete items x raters matrix.

    Parameters
    ----------
    x : array_like of shape (n_items, n_raters)
        Scores without missing values.
    confidence : float
        Confidence level of the intervals.

    Returns
    -------
    pandas.DataFrame
        One row per ``type`` (ICC1, ICC2, ICC3, ICC1k, ICC2k, ICC3k) with ``description``, ``icc``, ``F``,
        ``df1``, ``df2``, ``pval``, ``ci_low``, ``ci_high`` (unrounded), ``n_items``, ``n_raters`` and
        ``note`` (empty, or why the row is NaN: fewer than 3 items, one rater, no variance).

    Examples
    --------
    >>> from medhelm_core.agreement.icc import icc_matrix
    >>> icc_matrix([[1, 2], [3, 5], [4, 4], [2, 2]]).set_index("type").loc["ICC3k", "icc"].round(3)
    np.float64(0.867)
    """
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 2:
        raise AgreementInputError(f"the ICC needs an items x raters matrix, got an array of shape {arr.shape}")
    if np.isnan(arr).any():
        raise AgreementInputError("the ICC matrix has missing scores; drop incomplete items first (see icc_table)")
    return pd.DataFrame(icc_records(arr, confidence))


def wide_matrix(data: pd.DataFrame, targets: str, raters: str, ratings: str) -> pd.DataFrame:
    """Items x raters table from long data, keeping only items every rater scored.

    Parameters
    ----------
    data : pandas.DataFrame
        Long table.
    targets, raters, ratings : str
        Column names of the items, the raters and the scores.

    Returns
    -------
    pandas.DataFrame
        Complete items x raters table, items and raters sorted.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.icc import wide_matrix
    >>> d = pd.DataFrame({"i": ["a", "a", "b"], "r": ["x", "y", "x"], "s": [1.0, 2.0, 3.0]})
    >>> wide_matrix(d, "i", "r", "s").shape
    (1, 2)
    """
    wide = checked_scores(data, targets, raters, ratings).pivot(index=targets, columns=raters, values=ratings)
    # Listwise deletion, as pingouin does: the two-way ANOVA needs every rater on every item.
    return wide.dropna(axis=0, how="any").sort_index().sort_index(axis=1)


def icc_table(
    data: pd.DataFrame,
    targets: str = "item_id",
    raters: str = "rater_id",
    ratings: str = "score",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """All six ICCs from long data, the drop-in for ``pingouin.intraclass_corr`` with unrounded CIs.

    Items that lack a score from any rater are dropped (as pingouin does); the ``n_items`` column says
    how many remained.

    Parameters
    ----------
    data : pandas.DataFrame
        Long table, one row per (target, rater).
    targets, raters, ratings : str
        Column names of the items, the raters and the scores.
    confidence : float
        Confidence level of the F-based intervals.

    Returns
    -------
    pandas.DataFrame
        As :func:`icc_matrix`.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import icc_table
    >>> d = pd.DataFrame({"item_id": list("aabbccdd"), "rater_id": list("xyxyxyxy"),
    ...                   "score": [1, 2, 3, 5, 4, 4, 2, 2]})
    >>> icc_table(d).set_index("type").loc["ICC3k", "icc"].round(3)
    np.float64(0.867)
    """
    return icc_matrix(wide_matrix(data, targets, raters, ratings).to_numpy(dtype=float), confidence)
