"""Which confidence interval each printed ICC gets, chosen by its coverage, and the generalized intervals.

Every interval the product prints was checked by simulation (``benchmarks/interval_coverage.py``, table in
docs/benchmarks.md): at 100 items each covers its true value in 93-97% of studies. What was chosen:

==========================  ==============================  ===================================================
form                        interval                        why
==========================  ==============================  ===================================================
ICC(C,1), ICC(C,k)          exact F (Shrout & Fleiss 1979)  exact under the two-way model; 94-96% from 10 items
consistency, any design                                     on (and on z-scored pairs, MedHELM's protocol)
ICC(1,1), ICC(1,k) one-way  F with k0 (Donner 1986)         designs where raters differ by item (every
over all clinicians                                         clinician at once); approximate when unbalanced
ICC(A,1), ICC(A,k) with     generalized confidence          McGraw & Wong's F interval covers 74-96% once the
raters drawn at random      interval (GCI, random raters)   raters differ (it undercovers more as items grow);
(two clinicians)                                            the item bootstrap 45-85%. The GCI (Weerahandi
                                                            1993; compared in Ionan et al. 2014) covers 94-97%
ICC(A,1), ICC(A,k) with     GCI with fixed rater effects    the raters are these raters (this jury, the mean
fixed raters (jury, judge,                                  clinician): McGraw & Wong's interval treats their
test-retest occasions)                                      bias as random and covers 100% (needlessly wide)
bootstrap (items)           only ICC(C,·), on request       BCa and percentile cover 88-93% at 30 items: not
                                                            printed by default, never in a headline
AC2, weighted kappa         BCa over items (multinomial)    94-95% at 100 items, 91-93% at 30: the note says
                                                            so below 100 items
==========================  ==============================  ===================================================

With two raters drawn at random, the spread between raters rests on one degree of freedom, so no interval
that generalises to other raters can be narrow (this is unavoidable without extra assumptions); the GCI
says so by being wide, and the figure's note says why.

The generalized pivotal quantities (two-way model ``y_ij = mu + b_i + c_j + e_ij`` without interaction,
sums of squares SSR, SSC, SSE on n - 1, k - 1 and (n - 1)(k - 1) degrees of freedom):

* ``s_e* = SSE / chi2_{(n-1)(k-1)}``, ``s_b* = max(0, (SSR / chi2_{n-1} - s_e*) / k)``;
* random raters: ``s_c* = max(0, (SSC / chi2_{k-1} - s_e*) / n)``;
* fixed raters: ``c_j* = (m_j - m) - sqrt(s_e* / n) (Z_j - Z_mean)`` from the rater means ``m_j``, and
  ``s_c* = sum_j c_j*^2 / (k - 1)`` (McGraw & Wong's theta^2 of case 3A);
* ``ICC(A,1)* = s_b* / (s_b* + s_c* + s_e*)``, ``ICC(A,k)* = s_b* / (s_b* + (s_c* + s_e*) / k)``; the
  interval is the alpha/2 and 1 - alpha/2 quantiles over ``n_draws`` draws with a fixed seed.

References
----------
McGraw, K. O., & Wong, S. P. (1996). Forming inferences about some intraclass correlation coefficients.
Psychological Methods, 1(1), 30-46.
Weerahandi, S. (1993). Generalized confidence intervals. JASA, 88(423), 899-905.
Ionan, A. C., Polley, M.-Y. C., McShane, L. M., & Dobbin, K. K. (2014). Comparison of confidence interval
methods for an intra-class correlation coefficient (ICC). BMC Medical Research Methodology, 14, 121.
Rousson, V. (2011). Assessing inter-rater reliability when the raters are fixed. Biometrical Journal, 53(3).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from medhelm_core.agreement.icc import weighted_sums_of_squares
from medhelm_core.errors import AgreementInputError

Float = NDArray[np.float64]
RATER_DESIGNS: tuple[str, ...] = ("random", "fixed")
#: draws of the generalized pivots: the Monte Carlo error of a 95% bound is about 0.003 at this size
GCI_DRAWS = 5000
#: the ``ci_method`` of each interval, as the tables print it
CI_METHODS: dict[str, str] = {"random": "GCI (raters random)", "fixed": "GCI (raters fixed)"}
TWO_RANDOM_RATERS = (
    "two raters drawn at random: the spread between raters rests on one degree of freedom, so this interval "
    "stays wide however many items are rated (add raters to narrow it)"
)


def check_raters(raters: str) -> None:
    """Refuse a rater design other than ``random`` or ``fixed``.

    Examples
    --------
    >>> from medhelm_core.agreement.intervals import check_raters
    >>> check_raters("fixed")
    """
    if raters not in RATER_DESIGNS:
        raise AgreementInputError(f"raters {raters!r} unknown; use one of {', '.join(RATER_DESIGNS)}")


def gci_batch(
    ss: dict[str, Float],
    rater_means: Float,
    raters: str = "random",
    confidence: float = 0.95,
    n_draws: int = GCI_DRAWS,
    seed: int | np.random.Generator = 0,
) -> dict[str, tuple[Float, Float]]:
    """Generalized confidence intervals of ICC(A,1) and ICC(A,k) for a batch of two-way ANOVAs.

    Parameters
    ----------
    ss : dict
        Sums of squares of R data sets (:func:`~medhelm_core.agreement.icc.sums_of_squares_batch`).
    rater_means : ndarray of shape (R, k)
        Each data set's rater (column) means; used with fixed raters only.
    raters : {"random", "fixed"}
        Whether the raters stand for a population of raters (random) or are the raters of interest (fixed).
    confidence : float
        Confidence level.
    n_draws : int
        Draws of the pivots per data set.
    seed : int or numpy.random.Generator
        Seed of the draws.

    Returns
    -------
    dict
        ``{"ICC2": (low, high), "ICC2k": (low, high)}``, arrays of shape (R,).

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.icc import sums_of_squares_batch
    >>> from medhelm_core.agreement.intervals import gci_batch
    >>> x = np.random.default_rng(0).normal(size=(1, 60, 1)) + np.random.default_rng(1).normal(0, 0.5, (1, 60, 3))
    >>> low, high = gci_batch(sums_of_squares_batch(x), x.mean(axis=1), "fixed")["ICC2"]
    >>> bool(0 <= low[0] < high[0] <= 1)
    True
    """
    check_raters(raters)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n, k = float(ss["n"]), int(ss["k"])
    size = (ss["ssr"].shape[0], int(n_draws))
    with np.errstate(divide="ignore", invalid="ignore"):
        s_e = ss["sse"][:, None] / rng.chisquare((n - 1) * (k - 1), size)
        s_b = np.maximum((ss["ssr"][:, None] / rng.chisquare(n - 1, size) - s_e) / k, 0.0)
        if raters == "random":
            s_c = np.maximum((ss["ssc"][:, None] / rng.chisquare(k - 1, size) - s_e) / n, 0.0)
        else:
            deviation = np.asarray(rater_means, dtype=float)
            deviation = deviation - deviation.mean(axis=1, keepdims=True)
            z = rng.standard_normal((*size, k))
            c = deviation[:, None, :] - np.sqrt(s_e / n)[:, :, None] * (z - z.mean(axis=2, keepdims=True))
            s_c = (c**2).sum(axis=2) / (k - 1)
        alpha = (1 - confidence) / 2
        out = {}
        for name, per in (("ICC2", 1), ("ICC2k", k)):
            draws = s_b / (s_b + (s_c + s_e) / per)
            low, high = np.nanquantile(draws, [alpha, 1 - alpha], axis=1)
            out[name] = (low, high)
    return out


def absolute_agreement_interval(
    x: ArrayLike,
    raters: str = "random",
    confidence: float = 0.95,
    n_draws: int = GCI_DRAWS,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """The generalized confidence intervals of ICC(A,1) and ICC(A,k) for one complete items x raters matrix.

    Parameters
    ----------
    x : array_like of shape (n_items, n_raters)
        Complete scores on one scale (absolute agreement compares the scores as given).
    raters : {"random", "fixed"}
        ``random``: the raters were drawn from a population the figure speaks for (two clinicians);
        ``fixed``: they are the raters of interest (the jury and the mean clinician).
    confidence : float
        Confidence level.
    n_draws, seed : int
        Draws of the pivots and their seed (the interval is the same for the same seed).

    Returns
    -------
    dict
        ``{"ICC2": (low, high), "ICC2k": (low, high)}``.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.intervals import absolute_agreement_interval
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(100, 1)) + np.array([0.0, 0.5]) + rng.normal(0, 0.5, (100, 2))
    >>> low, high = absolute_agreement_interval(x, "fixed")["ICC2"]
    >>> round(low, 2), round(high, 2)
    (0.61, 0.78)
    """
    arr = np.asarray(x, dtype=float)
    ss = weighted_sums_of_squares(arr, np.ones((1, arr.shape[0])))
    found = gci_batch(ss, arr.mean(axis=0)[None, :], raters, confidence, n_draws, seed)
    return {name: (float(low[0]), float(high[0])) for name, (low, high) in found.items()}
