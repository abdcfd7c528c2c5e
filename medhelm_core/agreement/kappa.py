"""Weighted Cohen's kappa on an ordinal rating scale, in numpy (no scikit-learn in the product)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from medhelm_core.agreement.contract import AgreementInputError

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
