"""Sample-size planner for the ICC (issue 9, requirement 1): exact Zou (2012) criteria, checked against
published approximations and against simulated studies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from medhelm_core.agreement.icc import f_intervals, sums_of_squares_batch
from medhelm_core.agreement.planning import (
    PLAN_COLUMNS,
    bonett_items,
    ci_width_distribution,
    items_needed,
    plan_table,
    zou_lower_bound_items,
)
from medhelm_core.errors import PlanningError


def simulated_intervals(
    n: int, k: int, rho: float, reps: int, seed: int, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Simulate one-way random-effects studies and return the exact F-based ICC(1) and ICC(1,k) limits.

    Written out here from Shrout & Fleiss (1979) / Searle, independently of the planner's algebra.
    """
    rng = np.random.default_rng(seed)
    y = rng.normal(scale=np.sqrt(rho), size=(reps, n, 1)) + rng.normal(scale=np.sqrt(1 - rho), size=(reps, n, k))
    item_means = y.mean(axis=2)
    msb = k * ((item_means - item_means.mean(axis=1, keepdims=True)) ** 2).sum(axis=1) / (n - 1)
    msw = ((y - item_means[..., None]) ** 2).sum(axis=(1, 2)) / (n * (k - 1))
    f0 = msb / msw
    alpha = 1 - confidence
    f_hi = stats.f.ppf(1 - alpha / 2, n - 1, n * (k - 1))
    f_lo = stats.f.ppf(alpha / 2, n - 1, n * (k - 1))
    fl, fu = f0 / f_hi, f0 / f_lo
    single = np.stack([(fl - 1) / (fl + k - 1), (fu - 1) / (fu + k - 1)], axis=1)
    average = np.stack([1 - f_hi / f0, 1 - f_lo / f0], axis=1)
    return single, average, f0


def test_bonett_formula_reproduces_published_examples() -> None:
    # Bonett (2002), Stat Med 21:1331: 4 raters, ICC 0.85, width 0.2 -> n = 19.2 (his worked example).
    assert bonett_items(0.85, 4, 0.2) == pytest.approx(19.2, abs=0.05)
    # The same formula as the R package ICC's Nest(w = 0.2, ICC = 0.7, k = 2): 101.
    assert np.ceil(bonett_items(0.7, 2, 0.2)) == 101


@pytest.mark.parametrize(("rho", "k", "bonett_corrected"), [(0.7, 2, 101 + 5 * 0.7), (0.8, 2, 51 + 5 * 0.8)])
def test_exact_expected_width_matches_bonetts_correction_for_two_raters(
    rho: float, k: int, bonett_corrected: float
) -> None:
    # Bonett (2002) reports that for k = 2 and rho >= 0.7 the exact n exceeds his formula by about 5 rho.
    plan = items_needed(rho, k, width=0.2, assurance=None)
    assert abs(plan.items - bonett_corrected) <= 2
    assert plan.expected_width <= 0.2


def test_exact_expected_width_is_close_to_bonett_for_four_raters() -> None:
    # Bonett's approximation (19.2) for his k = 4 example; the exact expected-width n is 21.
    assert abs(items_needed(0.85, 4, width=0.2, assurance=None).items - 19.2) <= 2


@pytest.mark.parametrize("k", [2, 3, 4])
def test_exact_lower_bound_plan_matches_zous_closed_form(k: int) -> None:
    # Zou (2012)'s normal approximation to ln F (as implemented in the R package Agree, n_icc) should
    # be within a few items of the exact n it approximates.
    exact = items_needed(0.7, k, lower_bound=0.6, assurance=0.8).items
    assert abs(exact - zou_lower_bound_items(0.7, k, 0.6, assurance=0.8)) <= 3


def test_expected_width_equals_adaptive_quadrature() -> None:
    n, k, rho = 40, 3, 0.6
    nu1, nu2 = n - 1, n * (k - 1)
    f_lo, f_hi = stats.f.ppf([0.025, 0.975], nu1, nu2)
    theta = (1 + (k - 1) * rho) / (1 - rho)

    def width(f: float) -> float:
        x = theta * f
        return (k / (x / f_hi + k - 1) - k / (x / f_lo + k - 1)) * stats.f.pdf(f, nu1, nu2)

    expected = integrate.quad(width, 0, np.inf, limit=200)[0]
    assert ci_width_distribution(n, rho, k).expected == pytest.approx(expected, abs=1e-6)


def test_planned_items_are_the_fewest_that_meet_the_assurance() -> None:
    plan = items_needed(0.75, 2, width=0.2, assurance=0.8)
    assert plan.achieved_assurance >= 0.8
    assert ci_width_distribution(plan.items - 1, 0.75, 2).cdf(0.2) < 0.8
    assert ci_width_distribution(plan.items, 0.75, 2).cdf(0.2) == pytest.approx(plan.achieved_assurance)


def test_simulated_studies_of_the_planned_size_meet_the_width_with_the_stated_assurance() -> None:
    plan = items_needed(0.75, 2, width=0.2, assurance=0.8)
    single, _, _ = simulated_intervals(plan.items, 2, 0.75, reps=4000, seed=11)
    widths = single[:, 1] - single[:, 0]
    # 4,000 studies: the share's standard error is ~0.0063, so 0.025 is four of them.
    assert (widths <= 0.2).mean() == pytest.approx(plan.achieved_assurance, abs=0.025)
    assert widths.mean() == pytest.approx(plan.expected_width, abs=0.003)
    assert np.quantile(widths, 0.8) == pytest.approx(
        ci_width_distribution(plan.items, 0.75, 2).quantile(0.8), abs=0.004
    )


def test_simulated_lower_bounds_exceed_rho0_with_the_stated_assurance() -> None:
    plan = items_needed(0.75, 3, lower_bound=0.6, assurance=0.8)
    # The one-sided 95% lower bound is the lower limit of the two-sided 90% interval.
    single, _, _ = simulated_intervals(plan.items, 3, 0.75, reps=4000, seed=12, confidence=0.90)
    assert (single[:, 0] > 0.6).mean() == pytest.approx(plan.achieved_assurance, abs=0.025)


def test_average_measure_plan_holds_in_simulation() -> None:
    plan = items_needed(0.8, 2, width=0.15, assurance=0.8, measure="average")
    rho1 = 0.8 / (2 - 0.8)  # the single-rating ICC whose ICC(1,2) is 0.8
    _, average, _ = simulated_intervals(plan.items, 2, rho1, reps=4000, seed=13)
    widths = average[:, 1] - average[:, 0]
    assert (widths <= 0.15).mean() == pytest.approx(plan.achieved_assurance, abs=0.025)
    assert widths.mean() == pytest.approx(plan.expected_width, abs=0.003)


@pytest.mark.parametrize(("k", "measure"), [(2, "average"), (3, "single")])
def test_two_way_consistency_plans_hold_in_simulated_studies_with_rater_effects(k: int, measure: str) -> None:
    # The form the study reports: the same k raters on every item, each with a level of its own (a lenient
    # jury), ICC(C,k) with the product's exact F interval. Rater levels do not change its width; a one-way
    # plan would count them as error.
    plan = items_needed(0.75, k, width=0.2, assurance=0.8, measure=measure, design="two-way consistency")
    rho1 = 0.75 if measure == "single" else 0.75 / (k - (k - 1) * 0.75)
    rng = np.random.default_rng(21)
    reps = 4000
    y = (rng.normal(scale=np.sqrt(rho1), size=(reps, plan.items, 1)) + rng.normal(scale=1.0, size=(reps, 1, k))
         + rng.normal(scale=np.sqrt(1 - rho1), size=(reps, plan.items, k)))
    low, high = f_intervals(sums_of_squares_batch(y))["ICC3" if measure == "single" else "ICC3k"]
    widths = high - low
    assert (widths <= 0.2).mean() == pytest.approx(plan.achieved_assurance, abs=0.025)
    assert widths.mean() == pytest.approx(plan.expected_width, abs=0.004)
    assert "two-way consistency" in plan.method and ("ICC(C," in plan.method)


def test_absolute_agreement_is_not_planned_from_a_wrong_model() -> None:
    with pytest.raises(PlanningError, match="design 'two-way agreement' unknown"):
        items_needed(0.75, 2, width=0.2, design="two-way agreement")


def test_medhelm_plan_expected_icc_075_two_raters_80_percent_assurance() -> None:
    # SPEC section 2: expected ICC 0.75, two raters, 80% assurance. For a 95% CI no wider than 0.2
    # (+-0.1) that is 98 items; for 0.3, 50 items.
    assert items_needed(0.75, 2, width=0.2, assurance=0.8).items == 98
    assert items_needed(0.75, 2, width=0.3, assurance=0.8).items == 50


def test_assurance_needs_more_items_than_expected_width() -> None:
    expected = items_needed(0.75, 2, width=0.2, assurance=None)
    assured = items_needed(0.75, 2, width=0.2, assurance=0.8)
    assert expected.items < assured.items
    assert 0.4 < expected.achieved_assurance < 0.65


def test_plan_table_covers_the_grid() -> None:
    table = plan_table([0.6, 0.75], [2, 3], [0.2, 0.3])
    assert isinstance(table, pd.DataFrame)
    assert list(table.columns) == list(PLAN_COLUMNS)
    assert len(table) == 8
    # More raters or a wider interval never needs more items.
    pivot = table.set_index(["target_icc", "raters", "width"])["items"]
    assert pivot[(0.75, 3, 0.2)] <= pivot[(0.75, 2, 0.2)]
    assert pivot[(0.75, 2, 0.3)] <= pivot[(0.75, 2, 0.2)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"width": 0.2, "lower_bound": 0.5},
        {},
        {"lower_bound": 0.8},
        {"lower_bound": 0.5, "assurance": None},
        {"width": 0.0},
        {"width": 0.2, "assurance": 1.0},
    ],
)
def test_impossible_or_ambiguous_plans_raise_planning_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(PlanningError):
        items_needed(0.75, 2, **kwargs)  # type: ignore[arg-type]


def test_one_rater_per_item_is_refused() -> None:
    with pytest.raises(PlanningError, match="at least 2 ratings"):
        items_needed(0.75, 1, width=0.2)
