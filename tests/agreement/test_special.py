"""The agreement engine's distributions and correlations against scipy.stats, which the app's process no longer
imports: the F distribution to the last bit, the correlations to rounding."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from medhelm_core.agreement.special import average_ranks, f_quantile, f_survival, pearson, spearman

DFS = [0.5, 1, 2, 3.7, 10, 199, 1e6, np.inf, 0, -1, np.nan]


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


@pytest.mark.parametrize("dfn", DFS)
@pytest.mark.parametrize("dfd", DFS)
def test_the_f_distribution_is_scipy_stats_f_to_the_last_bit(dfn: float, dfd: float):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for q in (0.0, 0.025, 0.5, 0.95, 0.975, 1.0, 1.5, -0.1, np.nan):
            assert _same(f_quantile(q, dfn, dfd), stats.f.ppf(q, dfn, dfd)), q
        for x in (-1.0, 0.0, 1e-300, 0.5, 1.0, 2.5, 10.0, 1e9, np.inf, np.nan):
            assert _same(f_survival(x, dfn, dfd), stats.f.sf(x, dfn, dfd)), x


def test_the_f_functions_take_arrays_as_scipy_does():
    dfn, dfd = np.array([1.0, 5.0, 30.0]), np.array([2.0, 40.0, 7.0])
    assert np.array_equal(f_quantile(0.975, dfn, dfd), stats.f.ppf(0.975, dfn, dfd))
    assert np.array_equal(f_survival(np.array([0.3, 2.0, 9.0]), dfn, dfd), stats.f.sf([0.3, 2.0, 9.0], dfn, dfd))


scores = st.lists(st.integers(1, 5), min_size=3, max_size=60)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_correlations_are_scipys_to_rounding(data):
    x = data.draw(scores)
    y = data.draw(st.lists(st.integers(1, 5), min_size=len(x), max_size=len(x)))
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    assert np.array_equal(average_ranks(x), stats.rankdata(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want_r, want_rho = stats.pearsonr(x, y).statistic, stats.spearmanr(x, y).statistic
        got_r, got_rho = pearson(x, y), spearman(x, y)
    for got, want in ((got_r, want_r), (got_rho, want_rho)):
        assert (np.isnan(got) and np.isnan(want)) or got == pytest.approx(want, abs=1e-12)


def test_a_sample_with_a_missing_value_has_no_spearman():
    assert np.isnan(spearman([1.0, 2.0, np.nan, 4.0], [1.0, 3.0, 2.0, 4.0]))
