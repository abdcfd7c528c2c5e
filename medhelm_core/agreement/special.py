"""The few distributions and correlations the agreement engine needs, without importing ``scipy.stats``.

``scipy.stats`` brings scipy.optimize, scipy.integrate and some 350 more modules with it: 39 MB of the app's
resident memory, measured, of a 400 MB budget for a 20,000-item study, for five functions. The F distribution's
quantile and survival function here are the kernels ``scipy.stats.f`` itself calls (``scipy.special.fdtri`` and
``fdtrc``) with its handling of the arguments they do not cover, so they are equal to ``scipy.stats.f``'s to the
last bit (``tests/agreement/test_special.py`` checks a grid that includes the edges). The correlations are numpy's
and pandas' own: Pearson's r is ``numpy.corrcoef``; Spearman's rho is that on pandas' average ranks (ties share
their mean rank, as ``scipy.stats.spearmanr`` ranks them); they differ from scipy's in the last bits only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import special


def f_quantile(q: ArrayLike, dfn: ArrayLike, dfd: ArrayLike) -> NDArray[np.float64] | np.float64:
    """The F distribution's quantile (``scipy.stats.f.ppf(q, dfn, dfd)``): NaN for degrees of freedom that are not
    positive, and for ``q`` outside [0, 1]."""
    q, dfn, dfd = np.asarray(q, dtype=float), np.asarray(dfn, dtype=float), np.asarray(dfd, dtype=float)
    valid = (dfn > 0) & (dfd > 0)
    inside = np.where(q == 1, np.inf, special.fdtri(dfn, dfd, q))
    return np.where(valid & (q >= 0) & (q <= 1), np.where(q == 0, 0.0, inside), np.nan)[()]


def f_survival(x: ArrayLike, dfn: ArrayLike, dfd: ArrayLike) -> NDArray[np.float64] | np.float64:
    """The F distribution's survival function, P(F > x) (``scipy.stats.f.sf(x, dfn, dfd)``): 1 at and below 0, NaN
    for degrees of freedom that are not positive."""
    x, dfn, dfd = np.asarray(x, dtype=float), np.asarray(dfn, dtype=float), np.asarray(dfd, dtype=float)
    valid = (dfn > 0) & (dfd > 0)
    with np.errstate(invalid="ignore"):
        tail = special.fdtrc(dfn, dfd, np.where(x > 0, x, 1.0))
    return np.where(valid, np.where(x > 0, tail, np.where(np.isnan(x), np.nan, 1.0)), np.nan)[()]


def average_ranks(values: ArrayLike) -> NDArray[np.float64]:
    """1-based ranks, ties sharing the mean of their ranks (``scipy.stats.rankdata``'s default); NaN stays NaN."""
    return pd.Series(np.asarray(values)).rank(method="average").to_numpy(dtype=float)


def pearson(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson's r of two equally long samples (NaN when either is constant)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.corrcoef(np.asarray(x, dtype=float), np.asarray(y, dtype=float))[0, 1])


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rho: Pearson's r of the average ranks (NaN when either sample is constant or holds NaN, whose rank
    stays NaN)."""
    return pearson(average_ranks(x), average_ranks(y))
