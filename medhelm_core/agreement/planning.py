"""How many items a rating study needs so that its ICC confidence interval is as narrow as wanted.

The planner follows the design of Zou (2012): a one-way random-effects model with ``k`` ratings per item
and the exact F-based confidence interval of the ICC, with the sample size chosen for *precision* (the
expected width of the interval is at most ``w``), for *assurance* (the width is at most ``w`` with a
stated probability, 80% by default) or for a *lower bound* (the lower confidence limit exceeds
``rho0`` with that probability). Zou gives closed-form approximations to these criteria; here the
criteria themselves are computed exactly from the F distribution, so no approximation error is added.

The model. Item ``i`` gets ``k`` scores ``y_ij = mu + b_i + e_ij`` with ``var(b) / (var(b) + var(e)) =
rho``. With ``n`` items, ``F0 = MSB / MSW`` is distributed as ``theta * F(n - 1, n (k - 1))`` with
``theta = (1 + (k - 1) rho) / (1 - rho)`` (Searle 1971). With ``F_lo`` and ``F_hi`` the ``alpha / 2``
and ``1 - alpha / 2`` quantiles of ``F(n - 1, n (k - 1))``, the exact ``1 - alpha`` interval is

* single rating, ICC(1): ``L = (F0 / F_hi - 1) / (F0 / F_hi + k - 1)``,
  ``U = (F0 / F_lo - 1) / (F0 / F_lo + k - 1)``;
* mean of the ``k`` ratings, ICC(1,k): ``L = 1 - F_hi / F0``, ``U = 1 - F_lo / F0``.

The width is therefore a function of ``F0`` alone, which gives everything in closed form or by one
integral over the F density:

* ICC(1): ``W(x) = k / (x / F_hi + k - 1) - k / (x / F_lo + k - 1)`` rises from 0 to its maximum at
  ``x* = (k - 1) sqrt(F_lo F_hi)`` and falls back to 0, so ``W <= w`` exactly when ``F0`` lies outside
  the two roots of ``w x^2 / (F_lo F_hi) + (w (k - 1) (1 / F_lo + 1 / F_hi) - k (1 / F_lo - 1 / F_hi)) x
  + w (k - 1)^2 = 0``, and ``P(W <= w)`` is two F tail probabilities.
* ICC(1,k): ``W = (F_hi - F_lo) / F0`` falls with ``F0``; ``E[W] = (F_hi - F_lo) / theta * nu1 /
  (nu1 - 2)`` with ``nu1 = n - 1`` (the mean of ``1 / F(nu1, nu2)``), and ``P(W <= w) = P(F >= (F_hi -
  F_lo) / (w theta))``.
* Lower bound: ``L > rho0`` exactly when ``F0 > theta0 F_hi`` with ``theta0`` the ``theta`` of
  ``rho0``, so the assurance is ``P(F > theta0 F_hi / theta)``, the power of the exact F test of
  ``H0: rho <= rho0`` (Donner & Eliasziw 1987). As in Zou (2012), this is the one-sided ``1 - alpha``
  lower bound, so ``F_hi`` is here the ``1 - alpha`` quantile; Zou's closed form for it is
  ``n = 1 + 2 k (z_{1-alpha} + z_{assurance})^2 / ((k - 1) ln(theta / theta0)^2)``
  (:func:`zou_lower_bound_items`).

The same algebra plans the two-way consistency ICC(C,1) and ICC(C,k) that the headline reports (the same
k raters on every item, e.g. the jury beside the mean clinician: ``design="two-way consistency"``): there
``MSR / MSE`` is distributed as ``theta * F(n - 1, (n - 1)(k - 1))`` with the same ``theta`` whatever the
raters' own levels (McGraw & Wong 1996), so only the error degrees of freedom change. The tests check the
plans against simulated studies of both designs.

The required ``n`` is the smallest number of items from which the criterion holds for every larger
``n`` checked. The widths are of the untruncated interval (the lower limit is not clipped at 0).

References
----------
Zou, G. Y. (2012). Sample size formulas for estimating intraclass correlation coefficients with
precision and assurance. Statistics in Medicine, 31(29), 3972-3981. doi:10.1002/sim.5466.
Bonett, D. G. (2002). Sample size requirements for estimating intraclass correlations with desired
precision. Statistics in Medicine, 21(9), 1331-1335. doi:10.1002/sim.1108.
Donner, A., & Eliasziw, M. (1987). Sample size requirements for reliability studies. Statistics in
Medicine, 6(4), 441-448.
Searle, S. R. (1971). Linear Models. Wiley, section 9.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import optimize, stats

from medhelm_core.errors import PlanningError

Float = NDArray[np.float64]
MEASURES: tuple[str, ...] = ("single", "average")
#: the designs planned exactly: the one-way ICC(1) (raters differ by item: every clinician) and the two-way
#: consistency ICC(C,·) that the headline reports (the same raters on every item: a jury beside the mean
#: clinician, a pair). Absolute agreement ICC(A,·) has no exact F distribution; it is not planned here.
DESIGNS: tuple[str, ...] = ("one-way", "two-way consistency")
#: what a study may plan for, by name: ``icc1`` is MedHELM's own plan (one-way ICC(1) of one rating, every
#: clinician; the ``raters`` are clinicians per item), ``headline`` the figure the Agreement page leads with
#: (two-way consistency ICC(C,2) of the jury beside the mean clinician: two sides on every item, whatever the
#: number of clinicians behind the mean). Each maps to ``(design, measure, sides)``; sides None means ``raters``.
PLAN_FORMS: dict[str, tuple[str, str, int | None]] = {
    "icc1": ("one-way", "single", None),
    "headline": ("two-way consistency", "average", 2),
}
PLAN_COLUMNS: tuple[str, ...] = tuple(
    "target_icc raters measure criterion width lower_bound confidence assurance items expected_width "
    "achieved_assurance bonett_items".split()
)
# Gauss-Legendre nodes on the probability scale for E[W] of ICC(1); W is bounded and smooth in the
# F quantile, and 256 nodes agree with adaptive quadrature to ~1e-6 from n = 5 items on.
_GL_U, _GL_W = np.polynomial.legendre.leggauss(256)
_GL_U = (_GL_U + 1) / 2
_GL_W = _GL_W / 2
_MAX_ITEMS = 200_000


@dataclass(frozen=True)
class PlanResult:
    """The number of items a study needs, and what that number achieves.

    ``items`` items each rated ``raters`` times meet ``criterion`` (``"expected width"``, ``"width with
    assurance"`` or ``"lower bound with assurance"``) for ``width`` or ``lower_bound`` at ``confidence``
    and ``assurance``; ``expected_width`` is E[W] of the two-sided interval with that many items and
    ``achieved_assurance`` the probability that the width is at most ``width`` (or that the lower bound
    exceeds ``lower_bound``). ``target_icc`` is on the scale of ``measure`` (``"single"``: ICC(1),
    ``"average"``: ICC(1,k)) and of ``design`` (one of :data:`DESIGNS`); ``method`` is one sentence for the
    report.
    """

    items: int
    raters: int
    target_icc: float
    measure: str
    criterion: str
    width: float | None
    lower_bound: float | None
    confidence: float
    assurance: float | None
    expected_width: float
    achieved_assurance: float
    method: str
    design: str = "one-way"
    #: clinicians per item the study asks for, where it differs from ``raters`` (the headline's two sides are
    #: the jury and the mean of this many clinicians); progress counts items rated by this many
    clinicians: int | None = None


@dataclass(frozen=True)
class WidthDistribution:
    """The exact distribution of the ICC interval's width for a given design.

    Built by :func:`ci_width_distribution`; ``expected`` is E[W], :meth:`cdf` gives P(W <= w) and
    :meth:`quantile` the width met with a given probability.
    """

    items: int
    raters: int
    target_icc: float
    measure: str
    confidence: float
    expected: float
    design: str = "one-way"

    def cdf(self, width: float) -> float:
        """P(W <= width)."""
        return float(
            _width_cdf(np.array([self.items]), self._rho1, self.raters, self.confidence, self.measure, width,
                       self.design)[0]
        )

    def quantile(self, probability: float) -> float:
        """The width w with P(W <= w) = probability (the width met with that assurance)."""
        if not 0 < probability < 1:
            raise PlanningError(f"probability must lie strictly between 0 and 1, got {probability}")
        hi = 2.0 if self.measure == "single" else 1e6
        return float(optimize.brentq(lambda w: self.cdf(w) - probability, 1e-12, hi, xtol=1e-10))

    @property
    def _rho1(self) -> float:
        return _single_icc(self.target_icc, self.raters, self.measure)


def _single_icc(icc: float, k: int, measure: str) -> float:
    # ICC(1,k) = k rho / (1 + (k - 1) rho), inverted; both share theta, so the F model is the same.
    return icc if measure == "single" else icc / (k - (k - 1) * icc)


def _theta(rho1: float, k: int) -> float:
    return (1 + (k - 1) * rho1) / (1 - rho1)


def _f_bounds(n: Float, k: int, confidence: float, design: str = "one-way") -> tuple[Float, Float, Float, Float]:
    # One-way: MSB / MSW on (n - 1, n (k - 1)) df. Two-way consistency: MSR / MSE on (n - 1, (n - 1)(k - 1)),
    # distributed as theta F with the same theta (rater means are removed, not counted as error).
    nu1 = n - 1.0
    nu2 = n * (k - 1.0) if design == "one-way" else (n - 1.0) * (k - 1.0)
    alpha = 1 - confidence
    return nu1, nu2, stats.f.ppf(alpha / 2, nu1, nu2), stats.f.ppf(1 - alpha / 2, nu1, nu2)


def _width_at(x: Float, f_lo: Float, f_hi: Float, k: int) -> Float:
    return k / (x / f_hi + k - 1) - k / (x / f_lo + k - 1)


def _expected_width(n: Float, rho1: float, k: int, confidence: float, measure: str, design: str = "one-way") -> Float:
    nu1, nu2, f_lo, f_hi = _f_bounds(n, k, confidence, design)
    theta = _theta(rho1, k)
    if measure == "average":
        with np.errstate(divide="ignore"):
            return np.where(nu1 > 2, (f_hi - f_lo) / theta * nu1 / (nu1 - 2), np.inf)
    q = stats.f.ppf(_GL_U[None, :], nu1[:, None], nu2[:, None])
    w = _width_at(theta * q, f_lo[:, None], f_hi[:, None], k)
    return w @ _GL_W


def _width_cdf(
    n: Float, rho1: float, k: int, confidence: float, measure: str, width: float, design: str = "one-way"
) -> Float:
    nu1, nu2, f_lo, f_hi = _f_bounds(n, k, confidence, design)
    theta = _theta(rho1, k)
    if measure == "average":
        return stats.f.sf((f_hi - f_lo) / (width * theta), nu1, nu2)
    m = k - 1.0
    c1, c2 = 1 / f_hi, 1 / f_lo
    peak = _width_at(m * np.sqrt(f_lo * f_hi), f_lo, f_hi, k)
    a = width * c1 * c2
    b = width * m * (c1 + c2) - k * (c2 - c1)
    c = width * m**2
    disc = np.sqrt(np.clip(b**2 - 4 * a * c, 0, None))
    x_lo, x_hi = (-b - disc) / (2 * a), (-b + disc) / (2 * a)
    inside = stats.f.cdf(x_lo / theta, nu1, nu2) + stats.f.sf(x_hi / theta, nu1, nu2)
    return np.where(peak <= width, 1.0, inside)


def _lower_bound_power(
    n: Float, rho1: float, rho0_1: float, k: int, confidence: float, design: str = "one-way"
) -> Float:
    # One-sided bound: the 1 - alpha quantile, which is the two-sided bound of level 1 - 2 alpha.
    nu1, nu2, _, f_hi = _f_bounds(n, k, 2 * confidence - 1, design)
    return stats.f.sf(_theta(rho0_1, k) * f_hi / _theta(rho1, k), nu1, nu2)


def bonett_items(target_icc: float, raters: int, width: float, confidence: float = 0.95) -> float:
    """Bonett's (2002, eq. 3) approximate number of items for an expected ICC(1) interval width.

    ``n = 8 z^2 (1 - rho)^2 (1 + (k - 1) rho)^2 / (k (k - 1) w^2) + 1`` with ``z`` the ``1 - alpha / 2``
    normal quantile, unrounded. Bonett notes it runs low for k = 2 and rho >= 0.7 (add about 5 rho);
    :func:`items_needed` computes the exact number instead and reports this one beside it.

    Parameters
    ----------
    target_icc : float
        Expected single-rating ICC.
    raters : int
        Ratings per item.
    width : float
        Desired full width of the interval.
    confidence : float
        Confidence level.

    Returns
    -------
    float
        The approximate n, not rounded.

    Examples
    --------
    >>> from medhelm_core.agreement.planning import bonett_items
    >>> round(bonett_items(0.85, 4, 0.2), 1)  # Bonett's (2002) own example
    19.2
    """
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    rho, k = target_icc, raters
    return float(8 * z**2 * (1 - rho) ** 2 * (1 + (k - 1) * rho) ** 2 / (k * (k - 1) * width**2) + 1)


def zou_lower_bound_items(
    target_icc: float, raters: int, lower_bound: float, confidence: float = 0.95, assurance: float = 0.8
) -> float:
    """Zou's (2012) closed-form n for a one-sided lower confidence bound above ``lower_bound``.

    ``n = 1 + 2 k (z_{confidence} + z_{assurance})^2 / ((k - 1) ln(theta / theta0)^2)`` with ``theta =
    (1 + (k - 1) rho) / (1 - rho)``: the normal approximation to ln F. :func:`items_needed` with
    ``lower_bound`` computes the exact n it approximates.

    Parameters
    ----------
    target_icc : float
        Expected single-rating ICC.
    raters : int
        Ratings per item.
    lower_bound : float
        Value the one-sided lower bound should exceed.
    confidence, assurance : float
        One-sided confidence level and probability of meeting the bound.

    Returns
    -------
    float
        The approximate n, not rounded.

    Examples
    --------
    >>> from medhelm_core.agreement.planning import zou_lower_bound_items
    >>> round(zou_lower_bound_items(0.7, 2, 0.6), 1)
    204.8
    """
    k = raters
    z = stats.norm.ppf(confidence) + stats.norm.ppf(assurance)
    ratio = _theta(target_icc, k) / _theta(lower_bound, k)
    return float(1 + 2 * k * z**2 / ((k - 1) * np.log(ratio) ** 2))


def _check(target_icc: float, raters: int, confidence: float, measure: str, design: str = "one-way") -> None:
    if design not in DESIGNS:
        raise PlanningError(
            f"design {design!r} unknown; use one of {', '.join(DESIGNS)} (absolute agreement, ICC(A,k), has no "
            "exact distribution to plan from: plan its consistency form, which needs no more items when raters agree "
            "in level)"
        )
    if measure not in MEASURES:
        raise PlanningError(f"measure {measure!r} unknown; use one of {', '.join(MEASURES)}")
    if not isinstance(raters, int | np.integer) or raters < 2:
        raise PlanningError(f"each item needs at least 2 ratings for an ICC, got raters={raters!r}")
    if not 0 < target_icc < 1:
        raise PlanningError(f"the expected ICC must lie strictly between 0 and 1, got {target_icc}")
    if not 0 < confidence < 1:
        raise PlanningError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def ci_width_distribution(
    items: int,
    target_icc: float,
    raters: int,
    confidence: float = 0.95,
    measure: str = "single",
    design: str = "one-way",
) -> WidthDistribution:
    """The exact distribution of the ICC confidence interval's width for ``items`` items.

    Use it to show what a study's actual number of items buys: the expected width and the width met
    with, say, 80% assurance. See the module docstring for the formulas (Zou 2012's design, computed
    exactly).

    Parameters
    ----------
    items : int
        Number of items n (at least 3).
    target_icc : float
        Expected ICC on the scale of ``measure``.
    raters : int
        Ratings per item k.
    confidence : float
        Confidence level of the interval.
    measure : {"single", "average"}
        ICC(1) of one rating, or ICC(1,k) of the mean of the k ratings.

    Returns
    -------
    WidthDistribution
        With ``expected`` (E[W]), ``cdf(w)`` and ``quantile(p)``.

    Examples
    --------
    >>> from medhelm_core.agreement.planning import ci_width_distribution
    >>> d = ci_width_distribution(100, 0.75, 2)
    >>> round(d.expected, 3) < round(d.quantile(0.8), 3)
    True
    """
    _check(target_icc, raters, confidence, measure, design)
    if items < 3:
        raise PlanningError(f"the ICC interval needs at least 3 items, got {items}")
    rho1 = _single_icc(target_icc, raters, measure)
    expected = float(_expected_width(np.array([float(items)]), rho1, raters, confidence, measure, design)[0])
    return WidthDistribution(int(items), int(raters), float(target_icc), measure, float(confidence), expected, design)


def items_needed(
    target_icc: float,
    raters: int,
    *,
    width: float | None = None,
    lower_bound: float | None = None,
    confidence: float = 0.95,
    assurance: float | None = 0.8,
    measure: str = "single",
    design: str = "one-way",
) -> PlanResult:
    """Number of items needed to estimate an ICC with a given interval width or lower bound.

    Implements the three criteria of Zou (2012), Statistics in Medicine 31:3972-3981, for the one-way
    random-effects ICC with ``raters`` ratings per item, computed exactly from the F distribution of
    MSB / MSW (see the module docstring for every formula):

    * ``width`` and ``assurance=None``: smallest n whose expected full width E[W] <= ``width``
      (precision; Bonett 2002's criterion, whose approximation is reported beside it);
    * ``width`` and ``assurance``: smallest n with P(W <= ``width``) >= ``assurance``;
    * ``lower_bound``: smallest n with P(one-sided ``confidence`` lower bound > ``lower_bound``) >=
      ``assurance`` (Zou's closed form is :func:`zou_lower_bound_items`).

    Parameters
    ----------
    target_icc : float
        ICC expected in the study, on the scale of ``measure``.
    raters : int
        Ratings per item k (at least 2).
    width : float, optional
        Desired full width of the interval (upper minus lower limit); give this or ``lower_bound``.
    lower_bound : float, optional
        Value the one-sided lower confidence bound should exceed; must be below ``target_icc``.
    confidence : float
        Confidence level of the two-sided interval (of the one-sided bound for ``lower_bound``).
    assurance : float or None
        Probability of meeting the goal (required for ``lower_bound``).
    measure : {"single", "average"}
        One rating (ICC(1), ICC(C,1); Zou's case) or the mean of the k ratings (ICC(1,k), ICC(C,k)).
    design : {"one-way", "two-way consistency"}
        The form the study reports: ``one-way`` for raters that differ by item (ICC(1) over every
        clinician), ``two-way consistency`` for the same k raters on every item (the headline's ICC(C,k) of
        the jury beside the mean clinician: ``raters=2, measure="average"``). Same formulas, with the error
        on (n - 1)(k - 1) degrees of freedom instead of n (k - 1).

    Returns
    -------
    PlanResult
        ``items`` with the expected width and the assurance they achieve.

    Raises
    ------
    PlanningError
        On out-of-range inputs, or a goal that more than 200,000 items cannot meet.

    Examples
    --------
    >>> from medhelm_core.agreement.planning import items_needed
    >>> plan = items_needed(0.75, 2, width=0.2, assurance=0.8)
    >>> plan.items, round(plan.achieved_assurance, 3)
    (98, 0.807)
    """
    _check(target_icc, raters, confidence, measure, design)
    if (width is None) == (lower_bound is None):
        raise PlanningError("give exactly one of width (a CI width) or lower_bound (a value to exceed)")
    if assurance is not None and not 0 < assurance < 1:
        raise PlanningError(f"assurance must lie strictly between 0 and 1, got {assurance}")
    rho1 = _single_icc(target_icc, raters, measure)
    k = int(raters)
    if width is not None:
        top = 2.0 if measure == "single" else np.inf
        if not 0 < width < top:
            raise PlanningError(f"the CI width must be positive (and below 2 for a single-rating ICC), got {width}")
        if assurance is None:
            criterion = "expected width"

            def met(n: Float) -> Float:
                return _expected_width(n, rho1, k, confidence, measure, design) <= width
        else:
            criterion = "width with assurance"

            def met(n: Float) -> Float:
                return _width_cdf(n, rho1, k, confidence, measure, width, design) >= assurance
    else:
        assert lower_bound is not None
        if assurance is None:
            raise PlanningError("a lower-bound plan needs an assurance (e.g. 0.8)")
        if not -1 / (k - 1) < lower_bound < target_icc:
            raise PlanningError(f"lower_bound must lie below the expected ICC {target_icc}, got {lower_bound}")
        criterion = "lower bound with assurance"
        rho0 = _single_icc(lower_bound, k, measure)

        def met(n: Float) -> Float:
            return _lower_bound_power(n, rho1, rho0, k, confidence, design) >= assurance

    n = _smallest_n(met)
    n_arr = np.array([float(n)])
    expected = float(_expected_width(n_arr, rho1, k, confidence, measure, design)[0])
    if lower_bound is not None:
        achieved = float(
            _lower_bound_power(n_arr, rho1, _single_icc(lower_bound, k, measure), k, confidence, design)[0]
        )
    else:
        assert width is not None
        achieved = float(_width_cdf(n_arr, rho1, k, confidence, measure, width, design)[0])
    one_way = design == "one-way"
    form = ("ICC(1)" if one_way else "ICC(C,1)") if measure == "single" else (f"ICC(1,{k})" if one_way else
                                                                              f"ICC(C,{k})")
    interval = f"one-sided {confidence:.0%} lower bound" if lower_bound is not None else f"{confidence:.0%} interval"
    method = (
        f"Zou (2012) design, computed exactly: {'one-way random-effects' if one_way else 'two-way consistency'} "
        f"{form}, {k} ratings per item, "
        f"exact F-based {interval}; {criterion}"
    )
    return PlanResult(
        items=n,
        raters=k,
        target_icc=float(target_icc),
        measure=measure,
        criterion=criterion,
        width=None if width is None else float(width),
        lower_bound=None if lower_bound is None else float(lower_bound),
        confidence=float(confidence),
        assurance=None if assurance is None else float(assurance),
        expected_width=expected,
        achieved_assurance=achieved,
        method=method,
        design=design,
    )


def _smallest_n(met: object) -> int:
    # Evaluate whole ranges at once (everything is vectorised over n) and grow the range until the
    # criterion holds at its top; the answer is the first n from which it holds to the top.
    assert callable(met)
    hi = 64
    while True:
        n = np.arange(3, hi + 1, dtype=float)
        ok = np.asarray(met(n), dtype=bool)
        if ok[-1]:
            failing = np.flatnonzero(~ok)
            return int(n[failing[-1] + 1]) if failing.size else 3
        if hi >= _MAX_ITEMS:
            raise PlanningError(
                f"even {_MAX_ITEMS:,} items do not meet this goal; allow a wider interval, a lower bound "
                "further below the expected ICC, or a lower assurance"
            )
        hi = min(hi * 4, _MAX_ITEMS)


def plan_table(
    target_iccs: Sequence[float],
    raters: Sequence[int],
    widths: Sequence[float],
    *,
    confidence: float = 0.95,
    assurance: float | None = 0.8,
    measure: str = "single",
    design: str = "one-way",
) -> pd.DataFrame:
    """Items needed over a small grid of expected ICCs, raters per item and CI widths.

    Parameters
    ----------
    target_iccs : sequence of float
        Expected ICCs.
    raters : sequence of int
        Ratings per item.
    widths : sequence of float
        Desired full CI widths.
    confidence, assurance, measure, design
        As for :func:`items_needed`.

    Returns
    -------
    pandas.DataFrame
        One row per combination, columns ``PLAN_COLUMNS`` (``bonett_items`` is Bonett's approximate
        n for the expected width, rounded up, for comparison; NaN for ``measure="average"``).

    Examples
    --------
    >>> from medhelm_core.agreement.planning import plan_table
    >>> plan_table([0.75], [2, 3], [0.2, 0.3]).shape
    (4, 12)
    """
    rows = []
    for rho in target_iccs:
        for k in raters:
            for w in widths:
                p = items_needed(rho, k, width=w, confidence=confidence, assurance=assurance, measure=measure,
                                 design=design)
                bonett = (float(np.ceil(bonett_items(rho, k, w, confidence)))
                          if measure == "single" and design == "one-way" else np.nan)
                rows.append({c: getattr(p, c) for c in PLAN_COLUMNS if c != "bonett_items"} | {"bonett_items": bonett})
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))


def plan_for_form(form: str, target_icc: float, raters: int, **goal: float | None) -> PlanResult:
    """:func:`items_needed` for the figure a study will report (a key of :data:`PLAN_FORMS`), so that the page
    and the CLI plan the same form the same way; ``goal`` is ``width``/``lower_bound``/``confidence``/``assurance``.

    Examples
    --------
    >>> plan_for_form("icc1", 0.75, 2, width=0.2, assurance=0.8).items  # MedHELM's plan
    98
    >>> plan_for_form("headline", 0.75, 3, width=0.2, assurance=0.8).design
    'two-way consistency'
    """
    if form not in PLAN_FORMS:
        raise PlanningError(f"plan form {form!r} unknown; use one of {', '.join(PLAN_FORMS)}")
    design, measure, sides = PLAN_FORMS[form]
    plan = items_needed(target_icc, sides or raters, measure=measure, design=design, **goal)
    return dataclasses.replace(plan, clinicians=int(raters)) if sides else plan
