"""Quadratic-weighted kappa on the 1-5 scale, in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from medhelm_core.agreement import weighted_kappa
from medhelm_core.errors import AgreementInputError


def test_quadratic_kappa_matches_a_hand_computed_example() -> None:
    # a = [1, 2, 3], b = [1, 3, 3] on 1..3. Observed: one third each at (1,1), (2,3), (3,3), so the
    # weighted observed disagreement is (0 + 1 + 0) / 3. Marginals a = (1/3, 1/3, 1/3), b = (1/3, 0, 2/3),
    # so the expected one is (1/3)(8/3 + 1 + 4/3) = 5/3. Kappa = 1 - (1/3) / (5/3) = 0.8.
    assert weighted_kappa([1, 2, 3], [1, 3, 3], labels=(1, 2, 3)) == pytest.approx(0.8, abs=1e-12)


def test_quadratic_kappa_counts_unused_levels_of_the_scale() -> None:
    # a = [1, 5, 3], b = [1, 4, 3] on 1..5. Observed squared disagreement: (0 + 1 + 0) / 3. Expected,
    # over all 9 pairings of a with b: a=1 -> 0 + 9 + 4, a=5 -> 16 + 1 + 4, a=3 -> 4 + 1 + 0, so 39 / 9.
    # Kappa = 1 - (1/3) / (39/9) = 12/13.
    assert weighted_kappa([1, 5, 3], [1, 4, 3]) == pytest.approx(12 / 13, abs=1e-12)
    # Levels nobody used change nothing: kappa only sees distances between used levels.
    assert weighted_kappa([1, 2, 3], [1, 3, 3]) == pytest.approx(0.8, abs=1e-12)


def test_quadratic_kappa_matches_scikit_learn_when_it_is_present() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.integers(1, 6, 40)
        b = np.clip(a + rng.integers(-2, 3, 40), 1, 5)
        for weights in ("quadratic", "linear"):
            expected = metrics.cohen_kappa_score(a, b, weights=weights, labels=[1, 2, 3, 4, 5])
            assert weighted_kappa(a, b, weights=weights) == pytest.approx(expected, abs=1e-12)


def test_kappa_rounds_means_half_away_from_zero_the_same_at_every_level() -> None:
    # 1.5 -> 2, 2.5 -> 3, 3.5 -> 4, 4.5 -> 5: one rule at every level, where half to even (MedHELM's script,
    # numpy, pandas) sends 2.5 and 4.5 down but 1.5 and 3.5 up.
    assert weighted_kappa([1.5, 2.5, 3.5, 4.5, 1.0], [2, 3, 4, 5, 1]) == pytest.approx(1.0)
    # A half computed with float noise (13/6 + 14/6 - 0.5 = 4.0 here, 4.4999... elsewhere) counts as a half.
    assert weighted_kappa([(13 / 3 + 14 / 3) / 2, 1.0, 3.0], [5, 1, 3]) == pytest.approx(1.0)


def test_perfect_and_undefined_kappa() -> None:
    assert weighted_kappa([1, 2, 5], [1, 2, 5]) == pytest.approx(1.0)
    assert np.isnan(weighted_kappa([3, 3, 3], [3, 3, 3]))
    assert np.isnan(weighted_kappa([], []))


def test_kappa_refuses_scores_off_the_scale() -> None:
    with pytest.raises(AgreementInputError, match="outside the rating scale"):
        weighted_kappa([0.2, 0.4, 0.9], [1, 2, 3])
    with pytest.raises(AgreementInputError, match="weights"):
        weighted_kappa([1, 2], [1, 2], weights="cubic")
