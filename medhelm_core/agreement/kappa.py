"""Weighted Cohen's kappa on an ordinal rating scale, in numpy (no scikit-learn in the product).

:func:`weighted_kappa_ci` adds a bootstrap interval that resamples items.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from medhelm_core.agreement.bootstrap import BOOTSTRAP_METHODS, _bca_levels
from medhelm_core.agreement.contract import MIN_ITEMS, AgreementInputError

KAPPA_WEIGHTS: tuple[str, ...] = ("quadratic", "linear", "none")


def weighted_kappa(
    a: ArrayLike, b: ArrayLike, labels: Sequence[int] = (1, 2, 3, 4, 5), weights: str = "quadratic"
) -> float:
    """Cohen's kappa between two raters' integer scores, quadratic-weighted by default.

    Both sets of scores are rounded to the nearest integer first (half to even, as numpy and pandas
    round, which is what MedHELM's script did), so means of 1-5 ratings can be passed directly.

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
    x = np.rint(np.asarray(a, dtype=float))
    y = np.rint(np.asarray(b, dtype=float))
    if x.shape != y.shape or x.ndim != 1:
        raise AgreementInputError("kappa needs two equally long score vectors")
    if x.size == 0:
        return float("nan")
    levels = np.unique(np.asarray(list(labels), dtype=float))
    pos = {v: i for i, v in enumerate(levels)}
    off = [v for v in np.unique(np.concatenate([x, y])) if v not in pos]
    if off:
        raise AgreementInputError(f"score(s) {off} lie outside the rating scale {list(labels)}")
    m = levels.size
    xi = np.searchsorted(levels, x)
    yi = np.searchsorted(levels, y)
    observed = np.zeros((m, m))
    np.add.at(observed, (xi, yi), 1.0)
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    grid = np.arange(m)
    diff = np.abs(grid[:, None] - grid[None, :]).astype(float)
    w = {"quadratic": diff**2, "linear": diff, "none": (diff > 0).astype(float)}[weights]
    denom = (w * expected).sum()
    if denom == 0:
        return float("nan")
    return float(1 - (w * observed).sum() / denom)


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
# Cap on the cells of one resample block, as in bootstrap.py.
_BLOCK_CELLS = 4_000_000


def _kappa_batch(cells: NDArray[np.float64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Kappa of each row of a (B, m*m) matrix of weighted confusion counts."""
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
    if method not in BOOTSTRAP_METHODS:
        raise AgreementInputError(f"bootstrap method {method!r} is unknown; use one of {', '.join(BOOTSTRAP_METHODS)}")
    if not 0 < confidence < 1:
        raise AgreementInputError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    if int(n_resamples) < 0:
        raise AgreementInputError(f"n_resamples must be 0 or more, got {n_resamples}")
    estimate = weighted_kappa(a, b, labels, weights)  # validates scale, shapes and weights
    x = np.rint(np.asarray(a, dtype=float))
    y = np.rint(np.asarray(b, dtype=float))
    levels = np.unique(np.asarray(list(labels), dtype=float))
    m, n = levels.size, x.size
    grid = np.arange(m)
    diff = np.abs(grid[:, None] - grid[None, :]).astype(float)
    w = {"quadratic": diff**2, "linear": diff, "none": (diff > 0).astype(float)}[weights]
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
    cell = np.searchsorted(levels, x) * m + np.searchsorted(levels, y)
    onehot = np.zeros((n, m * m))
    onehot[np.arange(n), cell] = 1.0
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    size = max(1, _BLOCK_CELLS // max(n, 1))
    boot = []
    for start in range(0, int(n_resamples), size):
        nb = min(int(n_resamples), start + size) - start
        idx = rng.integers(0, n, (nb, n))
        counts = np.bincount((idx + n * np.arange(nb)[:, None]).ravel(), minlength=nb * n).reshape(nb, n)
        boot.append(_kappa_batch(counts.astype(float) @ onehot, w))
    theta_b = np.concatenate(boot)
    valid = theta_b[np.isfinite(theta_b)]
    row["n_valid"] = int(valid.size)
    if valid.size < n_resamples:
        row["note"] = f"{int(n_resamples) - valid.size} resamples with no expected disagreement were left out"
    if valid.size == 0:
        return pd.DataFrame([row], columns=list(KAPPA_CI_COLUMNS))
    alpha = (1 - confidence) / 2
    bounds: tuple[float, float] = (alpha, 1 - alpha)
    if method == "bca":
        jack = _kappa_batch((1.0 - np.eye(n)) @ onehot, w)
        bounds = _bca_levels(estimate, valid, jack, alpha) if np.isfinite(jack).all() else (np.nan, np.nan)
    if np.isfinite(bounds).all():
        row["ci_low"], row["ci_high"] = (float(v) for v in np.quantile(valid, bounds))
    elif np.ptp(valid) == 0:
        # Every resample equal (e.g. perfect agreement) leaves BCa undefined; the interval is a point.
        row["ci_low"] = row["ci_high"] = float(valid[0])
    else:
        row["note"] = (str(row["note"]) + "; " if row["note"] else "") + "BCa undefined (degenerate resamples)"
    return pd.DataFrame([row], columns=list(KAPPA_CI_COLUMNS))
