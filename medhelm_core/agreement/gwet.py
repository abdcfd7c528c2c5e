"""Gwet's AC1 and weighted AC2: chance-corrected agreement that stays sensible when scores pile up.

Clinicians' rubric scores cluster near the top of the 1-5 scale. Kappa's chance agreement is then
nearly as high as the observed agreement, so kappa collapses although raters agree (the "kappa
paradox"). Gwet's coefficients estimate chance agreement from how spread the ratings are over the
categories, which keeps them close to the observed agreement in that case.

The formulas, for n items, q categories with values x_1 < ... < x_q, weights w_kl and r_ik the number
of raters who put item i in category k (r_i = sum_k r_ik; any number of raters per item, so missing
ratings need no imputation) are those of Gwet (2008, eq. 14-15) and Gwet (2014, ch. 2-3):

* weighted count ``r*_ik = sum_l w_kl r_il``;
* observed agreement over the n2 items rated at least twice,
  ``p_a = (1 / n2) sum_i sum_k r_ik (r*_ik - 1) / (r_i (r_i - 1))``;
* category shares over the items rated at least once, ``pi_k = (1 / n) sum_i r_ik / r_i``;
* chance agreement ``p_e = T_w / (q (q - 1)) sum_k pi_k (1 - pi_k)`` with ``T_w = sum_kl w_kl``;
* ``AC = (p_a - p_e) / (1 - p_e)``.

Identity weights give AC1; quadratic weights ``w_kl = 1 - (x_k - x_l)^2 / (x_q - x_1)^2`` give AC2
(linear ones use ``|x_k - x_l|``). The categories are the whole rating scale, used or not: q enters
p_e, so an unused level of the scale still counts (as Gwet advises when levels were available).

References
----------
Gwet, K. L. (2008). Computing inter-rater reliability and its variance in the presence of high
agreement. British Journal of Mathematical and Statistical Psychology, 61, 29-48.
Gwet, K. L. (2014). Handbook of Inter-Rater Reliability, 4th ed. Advanced Analytics, LLC.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from medhelm_core.agreement.bootstrap import bootstrap_interval, check_bootstrap, leave_one_out, resample_counts
from medhelm_core.agreement.contract import MIN_ITEMS, checked_scores, scale_codes
from medhelm_core.errors import AgreementInputError

Float = NDArray[np.float64]
GWET_WEIGHTS: tuple[str, ...] = ("quadratic", "linear", "identity")
GWET_COLUMNS: tuple[str, ...] = (
    "coefficient",
    "weights",
    "estimate",
    "pa",
    "pe",
    "ci_low",
    "ci_high",
    "ci_method",
    "n_resamples",
    "n_valid",
    "n_items",
    "n_items_multi",
    "n_raters",
    "note",
)
#: what the coefficient needs to be defined, for the notes of its interval
UNDEFINED = "items rated twice"


def gwet_weights(labels: Sequence[float], weights: str = "quadratic") -> Float:
    """Gwet's agreement weight matrix for an ordered rating scale.

    Parameters
    ----------
    labels : sequence of number
        The rating scale, e.g. ``(1, 2, 3, 4, 5)``.
    weights : {"quadratic", "linear", "identity"}
        ``1 - (x_k - x_l)^2 / (x_max - x_min)^2``, ``1 - |x_k - x_l| / (x_max - x_min)``, or 1 on the
        diagonal and 0 elsewhere (AC1).

    Returns
    -------
    ndarray of shape (q, q)
        Agreement weights, 1 on the diagonal.

    Examples
    --------
    >>> from medhelm_core.agreement.gwet import gwet_weights
    >>> gwet_weights((1, 2, 3))[0].tolist()
    [1.0, 0.75, 0.0]
    """
    if weights not in GWET_WEIGHTS:
        raise AgreementInputError(f"Gwet weights {weights!r} unknown; use one of {', '.join(GWET_WEIGHTS)}")
    x = np.unique(np.asarray(list(labels), dtype=float))
    if x.size < 2:
        raise AgreementInputError(f"the rating scale needs at least 2 levels, got {list(labels)}")
    d = np.abs(x[:, None] - x[None, :]) / (x[-1] - x[0])
    return {"quadratic": 1 - d**2, "linear": 1 - d, "identity": np.eye(x.size)}[weights]


def category_counts(
    data: pd.DataFrame | ArrayLike,
    targets: str = "item_id",
    raters: str = "rater_id",
    ratings: str = "score",
    labels: Sequence[float] = (1, 2, 3, 4, 5),
) -> tuple[Float, int]:
    """Items x categories counts r_ik from a long table or an items x raters matrix (NaN = missing).

    Scores are rounded to the nearest integer first (halves away from zero, like :func:`weighted_kappa`) and
    must lie on ``labels``. Items nobody rated are dropped.

    Parameters
    ----------
    data : pandas.DataFrame or array_like
        Long table with one row per (target, rater), or a matrix with one row per item and one column
        per rater, NaN where a rater did not rate the item.
    targets, raters, ratings : str
        Column names when ``data`` is a long table.
    labels : sequence of number
        The rating scale.

    Returns
    -------
    counts : ndarray of shape (n_items, q)
        Number of raters who put each item in each category, items sorted by id for a long table.
    n_raters : int
        Number of distinct raters.

    Examples
    --------
    >>> from medhelm_core.agreement.gwet import category_counts
    >>> category_counts([[1, 1], [2, float("nan")]], labels=(1, 2))[0].tolist()
    [[2.0, 0.0], [0.0, 1.0]]
    """
    if isinstance(data, pd.DataFrame):
        checked = checked_scores(data, targets, raters, ratings)
        scores = checked[ratings].to_numpy(dtype=float)
        items, item_idx = np.unique(checked[targets].astype(str).to_numpy(), return_inverse=True)
        n_items, n_raters = items.size, int(checked[raters].nunique())
    else:
        arr = np.asarray(data, dtype=float)
        if arr.ndim != 2:
            raise AgreementInputError(f"Gwet's AC needs an items x raters matrix, got shape {arr.shape}")
        rows, _ = np.nonzero(~np.isnan(arr))
        scores = arr[~np.isnan(arr)]
        item_idx, n_items, n_raters = rows, arr.shape[0], arr.shape[1]
    codes, m = scale_codes(scores, labels)
    counts = np.zeros((n_items, m))
    np.add.at(counts, (item_idx, codes), 1.0)
    return counts[counts.sum(axis=1) > 0], n_raters


def _item_terms(counts: Float, w: Float) -> tuple[Float, Float, Float]:
    # Per-item pieces whose weighted means give p_a and pi_k, so a resample is a matrix product.
    r = counts.sum(axis=1)
    multi = (r >= 2).astype(float)
    weighted = counts @ w.T
    with np.errstate(divide="ignore", invalid="ignore"):
        agree = np.where(multi > 0, (counts * (weighted - 1)).sum(axis=1) / (r * (r - 1)), 0.0)
    shares = counts / r[:, None]
    return agree, multi, shares


def chance_corrected(pa: Float, pi: Float, w: Float) -> tuple[Float, Float]:
    """Gwet's coefficient and p_e from p_a and the category shares pi_k, for each row of a batch.

    The one place of the formula ``AC = (p_a - p_e) / (1 - p_e)``, ``p_e = T_w / (q (q - 1)) sum_k
    pi_k (1 - pi_k)``; callers differ only in how they get p_a and pi_k (any raters per item here, a
    two-rater table of score pairs in :mod:`medhelm_core.agreement.robust`).

    Parameters
    ----------
    pa : ndarray of shape (B,)
        Observed agreement.
    pi : ndarray of shape (B, q)
        Category shares.
    w : ndarray of shape (q, q)
        Agreement weights (:func:`gwet_weights`).

    Returns
    -------
    ac, pe : ndarray of shape (B,)
        The coefficient (NaN where p_e is 1) and the chance agreement.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.gwet import chance_corrected, gwet_weights
    >>> ac, pe = chance_corrected(np.array([0.9]), np.array([[0.5, 0.5]]), gwet_weights((1, 2), "identity"))
    >>> round(float(ac[0]), 2), float(pe[0])
    (0.8, 0.5)
    """
    q = w.shape[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        pe = w.sum() / (q * (q - 1)) * (pi * (1 - pi)).sum(axis=1)
        ac = np.where(pe < 1, (pa - pe) / (1 - pe), np.nan)
    return ac, pe


def _ac_batch(agree: Float, multi: Float, shares: Float, w: Float, item_weights: Float) -> tuple[Float, Float, Float]:
    with np.errstate(divide="ignore", invalid="ignore"):
        pa = (item_weights @ (agree * multi)) / (item_weights @ multi)
        pi = (item_weights @ shares) / item_weights.sum(axis=1, keepdims=True)
    ac, pe = chance_corrected(pa, pi, w)
    return ac, pa, pe


def gwet_ac(
    data: pd.DataFrame | ArrayLike,
    targets: str = "item_id",
    raters: str = "rater_id",
    ratings: str = "score",
    labels: Sequence[float] = (1, 2, 3, 4, 5),
    weights: str = "quadratic",
) -> float:
    """Gwet's AC2 (quadratic weights by default) or AC1 (``weights="identity"``) for 2+ raters.

    Raters may skip items: p_a uses the items rated at least twice, pi_k every item rated at all
    (see the module docstring for the formulas, Gwet 2008 and 2014).

    Parameters
    ----------
    data : pandas.DataFrame or array_like
        Long table (one row per target and rater) or an items x raters matrix with NaN for missing.
    targets, raters, ratings : str
        Column names when ``data`` is a long table.
    labels : sequence of number
        The full rating scale; it fixes q and the weights even when some levels go unused.
    weights : {"quadratic", "linear", "identity"}
        Agreement weights; ``"identity"`` gives AC1.

    Returns
    -------
    float
        The coefficient, or NaN when no item has two ratings.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.gwet import gwet_ac
    >>> x = np.array([[5, 5], [5, 4], [4, 4], [5, 5], [3, 4]])
    >>> round(gwet_ac(x), 4), round(gwet_ac(x, weights="identity"), 4)
    (0.9452, 0.5322)
    """
    return float(gwet_ac_table(data, targets, raters, ratings, labels, weights, n_resamples=0).loc[0, "estimate"])


def gwet_ac_table(
    data: pd.DataFrame | ArrayLike,
    targets: str = "item_id",
    raters: str = "rater_id",
    ratings: str = "score",
    labels: Sequence[float] = (1, 2, 3, 4, 5),
    weights: str = "quadratic",
    n_resamples: int = 2000,
    method: str = "bca",
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> pd.DataFrame:
    """Gwet's AC2 or AC1 with p_a, p_e and a bootstrap interval that resamples items.

    All resamples are computed at once: a resample is a vector of item counts, and p_a and pi_k of
    every resample are matrix products of the (B, n) count matrix with per-item terms. Indices are
    drawn as in :func:`medhelm_core.agreement.bootstrap_distribution`; BCa uses the leave-one-item-out
    jackknife for the acceleration.

    Parameters
    ----------
    data, targets, raters, ratings, labels, weights
        As for :func:`gwet_ac`.
    n_resamples : int
        Number of bootstrap resamples; 0 skips the interval.
    method : {"bca", "percentile"}
        Interval method.
    confidence : float
        Confidence level.
    seed : int or numpy.random.Generator
        Seed of the resampling.

    Returns
    -------
    pandas.DataFrame
        One row with the columns ``GWET_COLUMNS``: ``coefficient`` (``AC1`` or ``AC2``), ``weights``,
        ``estimate``, ``pa``, ``pe``, ``ci_low``, ``ci_high``, ``ci_method``, ``n_resamples``,
        ``n_valid``, ``n_items`` (rated at least once), ``n_items_multi`` (rated at least twice),
        ``n_raters`` and ``note``.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.gwet import gwet_ac_table
    >>> rng = np.random.default_rng(3)
    >>> truth = rng.choice([3, 4, 5], size=60, p=[0.1, 0.3, 0.6])
    >>> x = np.clip(truth[:, None] + rng.choice([-1, 0, 0, 0, 1], size=(60, 3)), 1, 5)
    >>> row = gwet_ac_table(x, seed=1).iloc[0]
    >>> bool(row.ci_low < row.estimate < row.ci_high), row.coefficient
    (True, 'AC2')
    """
    check_bootstrap(method, confidence, n_resamples)
    w = gwet_weights(labels, weights)
    counts, n_raters = category_counts(data, targets, raters, ratings, labels)
    agree, multi, shares = _item_terms(counts, w)
    n = counts.shape[0]
    ac, pa, pe = (float(v[0]) for v in _ac_batch(agree, multi, shares, w, np.ones((1, n))))
    row: dict[str, object] = {
        "coefficient": "AC1" if weights == "identity" else "AC2",
        "weights": weights,
        "estimate": ac,
        "pa": pa,
        "pe": pe,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "ci_method": f"bootstrap-{method}" if n_resamples else "none",
        "n_resamples": int(n_resamples),
        "n_valid": 0,
        "n_items": n,
        "n_items_multi": int(multi.sum()),
        "n_raters": n_raters,
        "note": "",
    }
    if multi.sum() == 0:
        row["note"] = "no item has two ratings"
    elif n_resamples and n < MIN_ITEMS:
        row["note"] = f"fewer than {MIN_ITEMS} items (n={n}): no interval"
    elif n_resamples:
        def batch(item_weights: Float) -> Float:
            return _ac_batch(agree, multi, shares, w, item_weights)[0]

        boot = np.concatenate([batch(counts) for counts in resample_counts(n, n_resamples, seed)])
        jack = np.concatenate([batch(mask) for mask in leave_one_out(n)]) if method == "bca" else None
        ci = bootstrap_interval(ac, boot, jack, method, confidence, undefined=UNDEFINED)
        row.update(ci_low=ci.low, ci_high=ci.high, n_valid=ci.n_valid, note=ci.note)
    return pd.DataFrame([row], columns=list(GWET_COLUMNS))
