"""Weighted Cohen's kappa on an ordinal rating scale, in numpy (no scikit-learn in the product).

:func:`weighted_kappa_ci` adds a bootstrap interval that resamples items.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from medhelm_core.agreement.bootstrap import bootstrap_interval, check_bootstrap, leave_one_out, resample_counts
from medhelm_core.agreement.contract import MIN_ITEMS, scale_codes
from medhelm_core.errors import AgreementInputError

KAPPA_WEIGHTS: tuple[str, ...] = ("quadratic", "linear", "none")
#: what kappa needs to be defined, for the notes of its interval
UNDEFINED = "expected disagreement"


def paired_codes(
    a: ArrayLike, b: ArrayLike, labels: Sequence[float]
) -> tuple[NDArray[np.intp], NDArray[np.intp], int]:
    """Two raters' paired scores as level codes of the scale (means rounded half away from zero), and the level count.

    Examples
    --------
    >>> from medhelm_core.agreement.kappa import paired_codes
    >>> x, y, m = paired_codes([1, 2.4], [3, 3], (1, 2, 3))
    >>> x.tolist(), y.tolist(), m
    ([0, 1], [2, 2], 3)
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise AgreementInputError("agreement on the rating scale needs two equally long score vectors")
    codes, m = scale_codes(np.concatenate([x, y]), labels)
    return codes[: x.size], codes[x.size :], m


def kappa_weights(m: int, weights: str = "quadratic") -> NDArray[np.float64]:
    """Disagreement weights of an m-level scale: (i - j)^2, |i - j|, or 1 off the diagonal (``"none"``).

    Examples
    --------
    >>> from medhelm_core.agreement.kappa import kappa_weights
    >>> kappa_weights(3)[0].tolist()
    [0.0, 1.0, 4.0]
    """
    if weights not in KAPPA_WEIGHTS:
        raise AgreementInputError(f"kappa weights {weights!r} unknown; use one of {', '.join(KAPPA_WEIGHTS)}")
    grid = np.arange(m)
    diff = np.abs(grid[:, None] - grid[None, :]).astype(float)
    return {"quadratic": diff**2, "linear": diff, "none": (diff > 0).astype(float)}[weights]


def weighted_kappa(
    a: ArrayLike, b: ArrayLike, labels: Sequence[int] = (1, 2, 3, 4, 5), weights: str = "quadratic"
) -> float:
    """Cohen's kappa between two raters' integer scores, quadratic-weighted by default.

    Integer scores (a criterion) are used as they are; means (a composite, a mean clinician) are rounded
    to the nearest level first, halves away from zero (4.5 to 5, 3.5 to 4; see
    :func:`~medhelm_core.agreement.contract.scale_codes`), not half to even as MedHELM's script did.

    Parameters
    ----------
    a, b : array_like
        Paired scores, one per item.
    labels : sequence of int
        The ordered rating scale; it fixes the weight matrix even when some levels go unused.
    weights : {"quadratic", "linear", "none"}
        Disagreement weights (i - j)^2, |i - j|, or unweighted kappa.

    Returns
    -------
    float
        Kappa, or NaN when it is undefined (fewer than one pair, or no expected disagreement).

    Examples
    --------
    >>> from medhelm_core.agreement import weighted_kappa
    >>> round(weighted_kappa([1, 2, 3], [1, 3, 3], labels=(1, 2, 3)), 4)
    0.8
    """
    if weights not in KAPPA_WEIGHTS:
        raise AgreementInputError(f"kappa weights {weights!r} unknown; use one of {', '.join(KAPPA_WEIGHTS)}")
    xi, yi, m = paired_codes(a, b, labels)
    if xi.size == 0:
        return float("nan")
    cells = np.zeros(m * m)
    np.add.at(cells, xi * m + yi, 1.0)
    return float(kappa_from_cells(cells[None, :], kappa_weights(m, weights))[0])


KAPPA_CI_COLUMNS: tuple[str, ...] = (
    "weights",
    "estimate",
    "ci_low",
    "ci_high",
    "ci_method",
    "n_resamples",
    "n_valid",
    "n_items",
    "note",
)


def kappa_from_cells(cells: NDArray[np.float64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Weighted kappa of each row of a (B, m*m) matrix of (weighted) confusion counts; NaN where undefined.

    The kernel of every bootstrapped kappa: a resample, a jackknife sample or a multinomial draw of score
    pairs is a row of counts, so all of them are a few array operations.

    Parameters
    ----------
    cells : ndarray of shape (B, m*m)
        Counts of the (first, second) level pairs, flattened row by row.
    w : ndarray of shape (m, m)
        Disagreement weights (:func:`kappa_weights`).

    Returns
    -------
    ndarray of shape (B,)
        Kappa per row, NaN where no disagreement is expected.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.kappa import kappa_from_cells, kappa_weights
    >>> cells = np.array([[1.0, 0, 0, 0, 1, 0, 0, 1, 1]])  # (1,1), (2,2), (3,2), (3,3)
    >>> round(float(kappa_from_cells(cells, kappa_weights(3))[0]), 4)
    0.8
    """
    m = w.shape[0]
    total = cells.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = (cells / total[:, None]).reshape(-1, m, m)
        rows, cols = observed.sum(axis=2), observed.sum(axis=1)
        expected = np.einsum("bi,ij,bj->b", rows, w, cols)
        kappa = 1 - np.einsum("bij,ij->b", observed, w) / expected
    kappa[~(expected > 0)] = np.nan
    return kappa


def weighted_kappa_ci(
    a: ArrayLike,
    b: ArrayLike,
    labels: Sequence[int] = (1, 2, 3, 4, 5),
    weights: str = "quadratic",
    *,
    n_resamples: int = 2000,
    seed: int | np.random.Generator = 0,
    method: str = "bca",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Weighted kappa with a bootstrap confidence interval that resamples items (percentile or BCa).

    The point estimate is :func:`weighted_kappa`'s (same rounding, same scale). Each resample is a
    vector of item counts, so the kappas of all resamples are a few matrix products of the (B, n)
    count matrix with the items' confusion cells; indices are drawn as in
    :func:`medhelm_core.agreement.bootstrap_distribution` (and ``scipy.stats.bootstrap``), so a seed
    gives the same resamples there. BCa takes its acceleration from the leave-one-item-out jackknife.

    Parameters
    ----------
    a, b : array_like
        Paired scores, one per item.
    labels : sequence of int
        The ordered rating scale.
    weights : {"quadratic", "linear", "none"}
        Disagreement weights, as for :func:`weighted_kappa`.
    n_resamples : int
        Number of bootstrap resamples (2,000 by default); 0 skips the interval.
    seed : int or numpy.random.Generator
        Seed of the resampling.
    method : {"bca", "percentile"}
        Interval method.
    confidence : float
        Confidence level.

    Returns
    -------
    pandas.DataFrame
        One row, columns ``weights``, ``estimate``, ``ci_low``, ``ci_high``, ``ci_method``
        (``bootstrap-bca``, ``bootstrap-percentile`` or ``none``), ``n_resamples``, ``n_valid``
        (resamples whose kappa is defined), ``n_items`` and ``note``.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.kappa import weighted_kappa_ci
    >>> rng = np.random.default_rng(0)
    >>> a = rng.integers(1, 6, 80)
    >>> b = np.clip(a + rng.integers(-1, 2, 80), 1, 5)
    >>> row = weighted_kappa_ci(a, b, seed=1).iloc[0]
    >>> bool(row.ci_low < row.estimate < row.ci_high), row.ci_method
    (True, 'bootstrap-bca')
    """
    check_bootstrap(method, confidence, n_resamples)
    estimate = weighted_kappa(a, b, labels, weights)  # validates scale, shapes and weights
    xi, yi, m = paired_codes(a, b, labels)
    n = xi.size
    w = kappa_weights(m, weights)
    row: dict[str, object] = {
        "weights": weights,
        "estimate": estimate,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "ci_method": f"bootstrap-{method}" if n_resamples else "none",
        "n_resamples": int(n_resamples),
        "n_valid": 0,
        "n_items": int(n),
        "note": "",
    }
    if not n_resamples:
        return pd.DataFrame([row], columns=list(KAPPA_CI_COLUMNS))
    if n < MIN_ITEMS:
        row["note"] = f"fewer than {MIN_ITEMS} items (n={n}): no interval"
        return pd.DataFrame([row], columns=list(KAPPA_CI_COLUMNS))
    if np.isnan(estimate):
        row["note"] = "kappa undefined: no expected disagreement"
        return pd.DataFrame([row], columns=list(KAPPA_CI_COLUMNS))
    # One-hot confusion cell of each item: a resample's confusion matrix is its counts times this.
    onehot = np.zeros((n, m * m))
    onehot[np.arange(n), xi * m + yi] = 1.0
    boot = np.concatenate([kappa_from_cells(counts @ onehot, w) for counts in resample_counts(n, n_resamples, seed)])
    jack = None
    if method == "bca":
        jack = kappa_from_cells(np.concatenate([mask @ onehot for mask in leave_one_out(n)]), w)
    ci = bootstrap_interval(estimate, boot, jack, method, confidence, undefined=UNDEFINED)
    row.update(ci_low=ci.low, ci_high=ci.high, n_valid=ci.n_valid, note=ci.note)
    return pd.DataFrame([row], columns=list(KAPPA_CI_COLUMNS))
