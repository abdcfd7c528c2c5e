"""Bootstrap confidence intervals for the ICC that resample items, computed all at once.

Each resample is a vector of item counts; the ANOVA sums of squares of every resample are then a few
matrix products of the (B, n) count matrix with per-item moments (see
:func:`medhelm_core.agreement.icc.weighted_sums_of_squares`). The jackknife behind BCa is the same
computation with leave-one-out masks. Resample indices are drawn exactly as ``scipy.stats.bootstrap``
draws them, so the two agree on the same seed.

Every bootstrap interval of the engine (the ICC's here, Gwet's AC, the weighted kappa, AC2 and kappa on
the rating scale) is read off its resamples by :func:`bootstrap_interval`, and every item resampling
draws its counts from :func:`resample_counts`, so the same seed draws the same items for every statistic.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri

from medhelm_core.agreement.contract import MIN_ITEMS
from medhelm_core.agreement.icc import (
    ICC_TYPES,
    check_icc_types,
    icc_from_sums_of_squares,
    weighted_sums_of_squares,
    wide_matrix,
)
from medhelm_core.errors import AgreementInputError

Float = NDArray[np.float64]
BOOTSTRAP_METHODS: tuple[str, ...] = ("bca", "percentile")
# Cap on the cells of one weight block, so 10,000 items x 2,000 resamples stays within ~100 MB.
_BLOCK_CELLS = 4_000_000


def _blocks(total: int, n: int) -> Iterator[tuple[int, int]]:
    size = max(1, _BLOCK_CELLS // max(n, 1))
    for start in range(0, total, size):
        yield start, min(total, start + size)


def check_bootstrap(method: str, confidence: float = 0.95, n_resamples: int = 0) -> None:
    """Refuse an unknown interval method, a confidence outside (0, 1) or a negative number of resamples.

    Examples
    --------
    >>> from medhelm_core.agreement.bootstrap import check_bootstrap
    >>> check_bootstrap("bca", 0.95, 2000)
    >>> check_bootstrap("normal")
    Traceback (most recent call last):
    ...
    medhelm_core.errors.AgreementInputError: bootstrap method 'normal' is unknown; use one of bca, percentile
    """
    if method not in BOOTSTRAP_METHODS:
        raise AgreementInputError(f"bootstrap method {method!r} is unknown; use one of {', '.join(BOOTSTRAP_METHODS)}")
    if not 0 < confidence < 1:
        raise AgreementInputError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    if int(n_resamples) < 0:
        raise AgreementInputError(f"n_resamples must be 0 or more, got {n_resamples}")


def resample_counts(n_items: int, n_resamples: int, seed: int | np.random.Generator = 0) -> Iterator[Float]:
    """How often each item is drawn in each resample, a block of resamples at a time.

    A statistic that can be written with item weights (an ANOVA, Gwet's p_a, a confusion table) is then a
    matrix product per block instead of a loop over resamples.

    Parameters
    ----------
    n_items : int
        Number of items n.
    n_resamples : int
        Number of resamples B.
    seed : int or numpy.random.Generator
        Seed of the resampling; indices are drawn as ``scipy.stats.bootstrap`` draws them.

    Yields
    ------
    ndarray of shape (b, n)
        Item counts of the next b resamples (each row sums to n); the blocks add up to B rows.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.bootstrap import resample_counts
    >>> counts = np.concatenate(list(resample_counts(4, 10, seed=1)))
    >>> counts.shape, set(counts.sum(axis=1).tolist())
    ((10, 4), {4.0})
    """
    n = n_items
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    for start, stop in _blocks(n_resamples, n):
        b = stop - start
        idx = rng.integers(0, n, (b, n))
        # Count how often each item was drawn in each resample; the statistics only need these weights.
        counts = np.bincount((idx + n * np.arange(b)[:, None]).ravel(), minlength=b * n).reshape(b, n)
        yield counts.astype(float)


def leave_one_out(n_items: int) -> Iterator[Float]:
    """The jackknife's item weights: row i leaves item i out, a block of rows at a time.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.bootstrap import leave_one_out
    >>> np.concatenate(list(leave_one_out(3))).tolist()
    [[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]
    """
    n = n_items
    for start, stop in _blocks(n, n):
        mask = np.ones((stop - start, n))
        mask[np.arange(stop - start), np.arange(start, stop)] = 0.0
        yield mask


class Interval(NamedTuple):
    """A bootstrap interval, how many resamples defined the statistic, and why a bound is missing."""

    low: float
    high: float
    n_valid: int
    note: str


def bootstrap_interval(
    estimate: float,
    resamples: ArrayLike,
    jackknife: ArrayLike | None = None,
    method: str = "bca",
    confidence: float = 0.95,
    *,
    undefined: str = "variance between items",
    constant_is_point: bool = True,
) -> Interval:
    """The percentile or BCa interval of a statistic from its resamples (and, for BCa, its jackknife).

    Resamples where the statistic is undefined (NaN) are left out and counted in the note. BCa follows
    Efron & Tibshirani (1993, 14.3) with ties counting half, as ``scipy.stats.bootstrap`` does; its
    acceleration needs every jackknife value, so a NaN among them leaves BCa undefined.

    Parameters
    ----------
    estimate : float
        The statistic on the data; NaN gives no interval.
    resamples : array_like of shape (B,)
        The statistic on each resample.
    jackknife : array_like of shape (n,), optional
        The statistic without each item; needed for ``"bca"``.
    method : {"bca", "percentile"}
        Interval method.
    confidence : float
        Confidence level.
    undefined : str
        What the statistic needs to be defined, for the notes: resamples "without" it were left out, and
        an undefined estimate has "no" it (e.g. ``"expected disagreement"``).
    constant_is_point : bool
        When every resample is equal (perfect agreement) BCa is undefined; True gives the point as the
        interval, False leaves it NaN (the ICC's rule, kept until the rules are made one).

    Returns
    -------
    Interval
        ``low``, ``high``, ``n_valid`` (resamples whose statistic is defined) and ``note`` (empty, or
        which resamples were left out and why a bound is NaN).

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.bootstrap import bootstrap_interval
    >>> draws = np.random.default_rng(0).normal(0.5, 0.1, 4000)
    >>> low, high, n_valid, note = bootstrap_interval(0.5, draws, method="percentile")
    >>> round(low, 1), round(high, 1), n_valid, note
    (0.3, 0.7, 4000, '')
    """
    theta_b = np.asarray(resamples, dtype=float)
    valid = theta_b[np.isfinite(theta_b)]
    note = ""
    if valid.size < theta_b.size:
        note = f"{theta_b.size - valid.size} resamples without {undefined} were left out"
    if np.isnan(estimate):
        return Interval(np.nan, np.nan, int(valid.size), f"no {undefined}")
    if valid.size == 0:
        return Interval(np.nan, np.nan, 0, note)
    alpha = (1 - confidence) / 2
    levels: tuple[float, float] = (alpha, 1 - alpha)
    if method == "bca":
        jack = np.asarray(jackknife, dtype=float)
        levels = _bca_levels(estimate, valid, jack, alpha) if np.isfinite(jack).all() else (np.nan, np.nan)
    if np.isfinite(levels).all():
        low, high = (float(v) for v in np.quantile(valid, levels))
        return Interval(low, high, int(valid.size), note)
    if constant_is_point and np.ptp(valid) == 0:
        return Interval(float(valid[0]), float(valid[0]), int(valid.size), note)
    note = (note + "; " if note else "") + "BCa undefined (degenerate resamples)"
    return Interval(np.nan, np.nan, int(valid.size), note)


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
    >>> from medhelm_core.agreement.bootstrap import bootstrap_distribution
    >>> x = np.random.default_rng(1).normal(size=(30, 2)) + np.arange(30)[:, None] / 10
    >>> bootstrap_distribution(x, ["ICC3k"], n_resamples=500)["ICC3k"].shape
    (500,)
    """
    arr = np.asarray(x, dtype=float)
    return _icc_over(arr, resample_counts(arr.shape[0], n_resamples, seed), icc_types)


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
    >>> from medhelm_core.agreement.bootstrap import jackknife_distribution
    >>> jackknife_distribution([[1, 2], [3, 5], [4, 4], [2, 2]], ["ICC3k"])["ICC3k"].shape
    (4,)
    """
    arr = np.asarray(x, dtype=float)
    return _icc_over(arr, leave_one_out(arr.shape[0]), icc_types)


def _icc_over(arr: Float, batches: Iterable[Float], icc_types: Sequence[str]) -> dict[str, Float]:
    # The bootstrap and the jackknife differ only in their item weights (resample counts, leave-one-out
    # masks); both come in (rows, n_items) batches so that memory stays bounded, joined here per ICC type.
    out: dict[str, list[Float]] = {t: [] for t in icc_types}
    for weights in batches:
        for t, v in _icc_batch(arr, weights, icc_types).items():
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
    check_bootstrap(method, confidence, n_resamples)
    check_icc_types(icc_types)
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
    >>> from medhelm_core.agreement.bootstrap import bootstrap_records
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
    rows: list[dict[str, object]] = []
    for t in icc_types:
        theta_hat = float(point[t][0])
        ci = bootstrap_interval(theta_hat, boot[t], jack.get(t), method, confidence, constant_is_point=False)
        rows.append({"type": t, "estimate": theta_hat, "ci_low": ci.low, "ci_high": ci.high, **base,
                     "n_valid": ci.n_valid, "note": ci.note})
    return rows
