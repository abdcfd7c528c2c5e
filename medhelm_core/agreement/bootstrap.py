"""Bootstrap confidence intervals for the ICC that resample items, computed all at once.

Each resample is a vector of item counts; the ANOVA sums of squares of every resample are then a few
matrix products of the (B, n) count matrix with per-item moments (see
:func:`medhelm_core.agreement.icc.weighted_sums_of_squares`). The jackknife behind BCa is the same
computation with leave-one-out masks. Resample indices are drawn exactly as ``scipy.stats.bootstrap``
draws them, so the two agree on the same seed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri

from medhelm_core.agreement.contract import MIN_ITEMS, AgreementInputError
from medhelm_core.agreement.icc import ICC_TYPES, icc_from_sums_of_squares, weighted_sums_of_squares, wide_matrix

Float = NDArray[np.float64]
BOOTSTRAP_METHODS: tuple[str, ...] = ("bca", "percentile")
# Cap on the cells of one weight block, so 10,000 items x 2,000 resamples stays within ~100 MB.
_BLOCK_CELLS = 4_000_000


def _blocks(total: int, n: int) -> Iterator[tuple[int, int]]:
    size = max(1, _BLOCK_CELLS // max(n, 1))
    for start in range(0, total, size):
        yield start, min(total, start + size)


def _icc_batch(x: Float, weights: Float, icc_types: Sequence[str]) -> dict[str, Float]:
    res = icc_from_sums_of_squares(weighted_sums_of_squares(x, weights))
    return {t: res[t] for t in icc_types}


def bootstrap_distribution(
    x: ArrayLike, icc_types: Sequence[str] = ICC_TYPES, n_resamples: int = 2000, seed: int | np.random.Generator = 0
) -> dict[str, Float]:
    """ICCs of ``n_resamples`` item resamples of a complete items x raters matrix.

    Parameters
    ----------
    x : array_like of shape (n_items, n_raters)
        Complete scores.
    icc_types : sequence of str
        Which ICCs to return.
    n_resamples : int
        Number of resamples B.
    seed : int or numpy.random.Generator
        Seed of the resampling; the same seed gives the same resamples.

    Returns
    -------
    dict of ndarray of shape (B,)
        One array per ICC type; a resample with no variance between items gives NaN.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement import bootstrap_distribution
    >>> x = np.random.default_rng(1).normal(size=(30, 2)) + np.arange(30)[:, None] / 10
    >>> bootstrap_distribution(x, ["ICC3k"], n_resamples=500)["ICC3k"].shape
    (500,)
    """
    arr = np.asarray(x, dtype=float)
    n = arr.shape[0]
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    out: dict[str, list[Float]] = {t: [] for t in icc_types}
    for start, stop in _blocks(n_resamples, n):
        b = stop - start
        idx = rng.integers(0, n, (b, n))
        # Count how often each item was drawn in each resample; the ANOVA only needs these weights.
        counts = np.bincount((idx + n * np.arange(b)[:, None]).ravel(), minlength=b * n).reshape(b, n)
        for t, v in _icc_batch(arr, counts.astype(float), icc_types).items():
            out[t].append(v)
    return {t: np.concatenate(v) for t, v in out.items()}


def jackknife_distribution(x: ArrayLike, icc_types: Sequence[str] = ICC_TYPES) -> dict[str, Float]:
    """Leave-one-item-out ICCs of a complete items x raters matrix.

    Parameters
    ----------
    x : array_like of shape (n_items, n_raters)
        Complete scores.
    icc_types : sequence of str
        Which ICCs to return.

    Returns
    -------
    dict of ndarray of shape (n_items,)
        Entry i is the ICC without item i.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement import jackknife_distribution
    >>> jackknife_distribution([[1, 2], [3, 5], [4, 4], [2, 2]], ["ICC3k"])["ICC3k"].shape
    (4,)
    """
    arr = np.asarray(x, dtype=float)
    n = arr.shape[0]
    out: dict[str, list[Float]] = {t: [] for t in icc_types}
    for start, stop in _blocks(n, n):
        mask = np.ones((stop - start, n))
        mask[np.arange(stop - start), np.arange(start, stop)] = 0.0
        for t, v in _icc_batch(arr, mask, icc_types).items():
            out[t].append(v)
    return {t: np.concatenate(v) for t, v in out.items()}


def _bca_levels(theta_hat: float, theta_b: Float, theta_jack: Float, alpha: float) -> tuple[float, float]:
    # Efron & Tibshirani (1993) 14.3; ties count half, as in scipy.stats.bootstrap.
    share = ((theta_b < theta_hat).sum() + (theta_b <= theta_hat).sum()) / (2 * theta_b.size)
    z0 = ndtri(share)
    n = theta_jack.size
    u = (n - 1) * (theta_jack.mean() - theta_jack)
    with np.errstate(divide="ignore", invalid="ignore"):
        a_hat = (u**3).sum() / n**3 / ((u**2).sum() / n**2) ** 1.5 / 6
    z_lo, z_hi = ndtri(alpha), -ndtri(alpha)
    lo = ndtr(z0 + (z0 + z_lo) / (1 - a_hat * (z0 + z_lo)))
    hi = ndtr(z0 + (z0 + z_hi) / (1 - a_hat * (z0 + z_hi)))
    return float(lo), float(hi)


def bootstrap_icc(
    data: pd.DataFrame | ArrayLike,
    targets: str = "item_id",
    raters: str = "rater_id",
    ratings: str = "score",
    icc_types: Sequence[str] = ICC_TYPES,
    n_resamples: int = 2000,
    method: str = "bca",
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> pd.DataFrame:
    """Bootstrap confidence intervals for ICCs, resampling items (percentile or BCa).

    Parameters
    ----------
    data : pandas.DataFrame or array_like
        Long table (items lacking any rater are dropped, the rest sorted by id, so a seed gives the same
        resamples whatever the row order) or a complete items x raters matrix.
    targets, raters, ratings : str
        Column names when ``data`` is a long table.
    icc_types : sequence of str
        ICC types to report (default all six).
    n_resamples : int
        Number of resamples (2,000 by default).
    method : {"bca", "percentile"}
        Interval method; BCa adds a jackknife for the acceleration.
    confidence : float
        Confidence level.
    seed : int or numpy.random.Generator
        Seed of the resampling.

    Returns
    -------
    pandas.DataFrame
        One row per ``type`` with ``estimate``, ``ci_low``, ``ci_high``, ``ci_method``
        (``bootstrap-bca`` or ``bootstrap-percentile``), ``n_resamples``, ``n_valid`` (resamples whose
        ICC is defined), ``n_items``, ``n_raters`` and ``note``.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement import bootstrap_icc
    >>> x = np.random.default_rng(1).normal(size=(40, 2)) + np.arange(40)[:, None] / 10
    >>> ci = bootstrap_icc(x, icc_types=["ICC3k"], seed=7)
    >>> bool(ci.loc[0, "ci_low"] < ci.loc[0, "estimate"] < ci.loc[0, "ci_high"])
    True
    """
    if method not in BOOTSTRAP_METHODS:
        raise AgreementInputError(f"bootstrap method {method!r} is unknown; use one of {', '.join(BOOTSTRAP_METHODS)}")
    unknown = [t for t in icc_types if t not in ICC_TYPES]
    if unknown:
        raise AgreementInputError(f"ICC type(s) {', '.join(unknown)} unknown; use {', '.join(ICC_TYPES)}")
    if isinstance(data, pd.DataFrame):
        arr = wide_matrix(data, targets, raters, ratings).to_numpy(dtype=float)
    else:
        arr = np.asarray(data, dtype=float)
        if arr.ndim != 2 or np.isnan(arr).any():
            raise AgreementInputError("bootstrap_icc needs a complete items x raters matrix")
    return pd.DataFrame(bootstrap_records(arr, icc_types, n_resamples, method, confidence, seed))


def bootstrap_records(
    arr: Float,
    icc_types: Sequence[str] = ICC_TYPES,
    n_resamples: int = 2000,
    method: str = "bca",
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> list[dict[str, object]]:
    """:func:`bootstrap_icc` on a complete matrix, as a list of row dicts (arguments not re-checked).

    Parameters
    ----------
    arr : ndarray of shape (n_items, n_raters)
        Complete scores.
    icc_types, n_resamples, method, confidence, seed
        As for :func:`bootstrap_icc`.

    Returns
    -------
    list of dict
        One dict per ICC type, keys as the columns of :func:`bootstrap_icc`.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement import bootstrap_records
    >>> x = np.random.default_rng(1).normal(size=(20, 2)) + np.arange(20)[:, None] / 5
    >>> bootstrap_records(x, ["ICC3k"], n_resamples=200)[0]["ci_method"]
    'bootstrap-bca'
    """
    n, k = arr.shape
    ci_method = f"bootstrap-{method}"
    base = {"ci_method": ci_method, "n_resamples": n_resamples, "n_items": n, "n_raters": k}

    def empty(note: str) -> list[dict[str, object]]:
        return [
            {"type": t, "estimate": np.nan, "ci_low": np.nan, "ci_high": np.nan, **base, "n_valid": 0, "note": note}
            for t in icc_types
        ]

    if n < MIN_ITEMS:
        return empty(f"fewer than {MIN_ITEMS} items (n={n})")
    if k < 2:
        return empty(f"fewer than 2 raters (k={k})")
    point = _icc_batch(arr, np.ones((1, n)), icc_types)
    boot = bootstrap_distribution(arr, icc_types, n_resamples, seed)
    jack = jackknife_distribution(arr, icc_types) if method == "bca" else {}
    alpha = (1 - confidence) / 2
    rows: list[dict[str, object]] = []
    for t in icc_types:
        theta_hat = float(point[t][0])
        theta_b = boot[t][np.isfinite(boot[t])]
        note = ""
        if theta_b.size < n_resamples:
            note = f"{n_resamples - theta_b.size} resamples without variance between items were left out"
        levels: tuple[float, float] = (alpha, 1 - alpha)
        if np.isnan(theta_hat):
            lo = hi = np.nan
            note = "no variance between items"
        elif theta_b.size == 0:
            lo = hi = np.nan
        else:
            if method == "bca":
                jk = jack[t]
                if np.isfinite(jk).all():
                    levels = _bca_levels(theta_hat, theta_b, jk, alpha)
                else:
                    levels = (np.nan, np.nan)
                if not np.isfinite(levels).all():
                    note = (note + "; " if note else "") + "BCa undefined (degenerate resamples)"
            if np.isfinite(levels).all():
                lo, hi = (float(v) for v in np.quantile(theta_b, levels))
            else:
                lo = hi = np.nan
        rows.append(
            {
                "type": t,
                "estimate": theta_hat,
                "ci_low": lo,
                "ci_high": hi,
                **base,
                "n_valid": int(theta_b.size),
                "note": note,
            }
        )
    return rows
