"""Gwet's AC1 and quadratic-weighted AC2 (issue 9, requirement 8), against Gwet's worked examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medhelm_core.agreement import weighted_kappa
from medhelm_core.agreement.gwet import GWET_COLUMNS, category_counts, gwet_ac, gwet_ac_table, gwet_weights
from medhelm_core.errors import AgreementInputError

NAN = np.nan
# Gwet (2014), Handbook of Inter-Rater Reliability, 4th ed., p. 120: 4 raters, 12 units, scale 1-5,
# no rater scores every unit. Rows are units, columns raters.
HANDBOOK_4_RATERS = np.array(
    [
        [1, 1, NAN, 1],
        [2, 2, 3, 2],
        [3, 3, 3, 3],
        [3, 3, 3, 3],
        [2, 2, 2, 2],
        [1, 2, 3, 4],
        [4, 4, 4, 4],
        [1, 1, 2, 1],
        [2, 2, 2, 2],
        [NAN, 5, 5, 5],
        [NAN, NAN, 1, 1],
        [NAN, NAN, 3, NAN],
    ]
)
# Gwet (2014), 4th ed., after p. 125: 5 observers, 15 units, scale 0-3, with missing scores.
HANDBOOK_5_OBSERVERS = np.array(
    [
        [1, 1, 2, NAN, 2],
        [1, 1, 0, 1, NAN],
        [2, 3, 3, 3, NAN],
        [NAN, 0, 0, NAN, 0],
        [0, 0, 0, NAN, 0],
        [0, 0, 0, NAN, 0],
        [1, 0, 2, NAN, 1],
        [1, NAN, 2, 0, NAN],
        [2, 2, 2, NAN, 2],
        [2, 1, 1, 1, NAN],
        [NAN, 1, 0, 0, NAN],
        [0, 0, 0, 0, NAN],
        [1, 2, 2, 2, NAN],
        [3, 3, 2, 2, 3],
        [1, 1, 1, NAN, 1],
    ]
)


def pairs_from_table(table: list[list[int]]) -> np.ndarray:
    """Two raters' scores (categories 1..q) from a q x q contingency table (rows: rater A)."""
    rows = [[i + 1, j + 1] for i, row in enumerate(table) for j, count in enumerate(row) for _ in range(count)]
    return np.array(rows, dtype=float)


def as_long(x: np.ndarray) -> pd.DataFrame:
    items, raters = np.nonzero(~np.isnan(x))
    return pd.DataFrame(
        {"item_id": [f"i{i:02d}" for i in items], "rater_id": [f"r{r}" for r in raters], "score": x[items, raters]}
    )


@pytest.mark.parametrize(
    ("weights", "ac", "pa", "pe"),
    [("identity", 0.775, 0.818, 0.190), ("quadratic", 0.914, 0.975, 0.714), ("linear", 0.859, 0.939, 0.571)],
)
def test_handbook_four_raters_with_missing_ratings(weights: str, ac: float, pa: float, pe: float) -> None:
    # Published to three decimals in Gwet (2014) and reproduced by his irrCAC packages.
    row = gwet_ac_table(HANDBOOK_4_RATERS, weights=weights, n_resamples=0).iloc[0]
    assert row.estimate == pytest.approx(ac, abs=5e-4)
    assert row.pa == pytest.approx(pa, abs=5e-4)
    assert row.pe == pytest.approx(pe, abs=5e-4)
    assert (row.n_items, row.n_items_multi, row.n_raters) == (12, 11, 4)


def test_handbook_five_observers_ac1() -> None:
    row = gwet_ac_table(HANDBOOK_5_OBSERVERS, labels=(0, 1, 2, 3), weights="identity", n_resamples=0).iloc[0]
    assert (row.estimate, row.pa, row.pe) == pytest.approx((0.497, 0.616, 0.236), abs=5e-4)


def test_handbook_two_abstractors_three_categories() -> None:
    # Gwet (2014): 100 pregnancies classified by 2 abstractors; AC1 0.849, quadratic AC2 0.940.
    x = pairs_from_table([[13, 0, 0], [0, 20, 7], [0, 4, 56]])
    assert gwet_ac(x, labels=(1, 2, 3), weights="identity") == pytest.approx(0.849, abs=5e-4)
    assert gwet_ac(x, labels=(1, 2, 3), weights="quadratic") == pytest.approx(0.940, abs=5e-4)


def test_kappa_paradox_high_agreement_low_kappa_high_ac1() -> None:
    # Gwet (2008)'s 2 x 2 example: 118 agreements on "+", none on "-", 7 disagreements.
    x = pairs_from_table([[118, 5], [2, 0]])
    # Cohen's kappa: p_o = 118/125, p_e = 0.984 * 0.96 + 0.016 * 0.04 = 0.94528 -> -0.0234.
    assert weighted_kappa(x[:, 0], x[:, 1], labels=(1, 2), weights="none") == pytest.approx(-0.0234, abs=1e-4)
    # AC1 by hand: pi_+ = (123 + 120) / 250 = 0.972, p_e = 2 * 0.972 * 0.028 = 0.054432,
    # AC1 = (0.944 - 0.054432) / (1 - 0.054432) = 0.94078.
    assert gwet_ac(x, labels=(1, 2), weights="identity") == pytest.approx(0.889568 / 0.945568, abs=1e-9)


def test_top_heavy_rubric_scores_keep_ac2_high_where_kappa_collapses() -> None:
    # Clinicians who almost always give 5 and disagree by one point on a few items.
    a = np.array([5] * 45 + [4, 5, 5, 4, 5])
    b = np.array([5] * 45 + [5, 4, 4, 5, 5])
    x = np.column_stack([a, b]).astype(float)
    assert weighted_kappa(a, b) < 0
    assert gwet_ac(x) > 0.95


def test_perfect_agreement_is_one_even_on_a_single_category() -> None:
    x = np.array([[1, 1, 1], [3, 3, 3], [5, 5, NAN], [2, 2, 2]])
    assert gwet_ac(x) == pytest.approx(1.0)
    assert gwet_ac(x, weights="identity") == pytest.approx(1.0)
    everyone_five = np.full((10, 2), 5.0)
    assert gwet_ac(everyone_five) == pytest.approx(1.0)  # kappa is undefined here
    assert np.isnan(weighted_kappa(everyone_five[:, 0], everyone_five[:, 1]))


def test_rater_order_and_item_order_do_not_matter() -> None:
    rng = np.random.default_rng(5)
    x = HANDBOOK_4_RATERS
    expected = gwet_ac(x)
    for _ in range(5):
        shuffled = x[rng.permutation(x.shape[0])][:, rng.permutation(x.shape[1])]
        assert gwet_ac(shuffled) == pytest.approx(expected, abs=1e-12)


def test_long_table_equals_matrix_and_row_order_is_irrelevant() -> None:
    long = as_long(HANDBOOK_4_RATERS)
    assert gwet_ac(long) == pytest.approx(gwet_ac(HANDBOOK_4_RATERS), abs=1e-12)
    shuffled = long.sample(frac=1, random_state=3)
    assert gwet_ac_table(shuffled, seed=2).equals(gwet_ac_table(long, seed=2))


def test_unused_levels_of_the_scale_count() -> None:
    # q enters p_e, so the full 1-5 scale gives a different AC1 than the three levels used.
    x = np.array([[3, 3], [4, 4], [4, 5], [5, 5], [3, 4]], dtype=float)
    assert gwet_ac(x, weights="identity") != pytest.approx(gwet_ac(x, labels=(3, 4, 5), weights="identity"))


def test_items_rated_once_count_only_in_the_category_shares() -> None:
    base = np.array([[1, 1], [2, 2], [2, 1]], dtype=float)
    with_single = np.vstack([base, [[5, NAN]]])
    counts, _ = category_counts(with_single)
    assert counts.sum(axis=1).tolist() == [2, 2, 2, 1]
    row, base_row = (gwet_ac_table(v, n_resamples=0).iloc[0] for v in (with_single, base))
    assert row.pa == pytest.approx(base_row.pa)
    assert row.pe != pytest.approx(base_row.pe)


def test_bootstrap_is_seeded_brackets_the_estimate_and_equals_a_loop_over_resamples() -> None:
    rng = np.random.default_rng(8)
    truth = rng.choice([3, 4, 5], size=80, p=[0.15, 0.35, 0.5])
    x = np.clip(truth[:, None] + rng.choice([-1, 0, 0, 0, 1], size=(80, 3)), 1, 5).astype(float)
    x[rng.random(x.shape) < 0.15] = NAN
    table = gwet_ac_table(x, n_resamples=200, method="percentile", seed=4)
    assert list(table.columns) == list(GWET_COLUMNS)
    row = table.iloc[0]
    assert row.ci_low < row.estimate < row.ci_high
    assert gwet_ac_table(x, n_resamples=200, method="percentile", seed=4).equals(table)
    # The slow way: draw the same indices, recompute AC2 on each resampled matrix.
    draw = np.random.default_rng(4).integers(0, x.shape[0], (200, x.shape[0]))
    slow = np.array([gwet_ac(x[idx]) for idx in draw])
    assert (row.ci_low, row.ci_high) == pytest.approx(tuple(np.quantile(slow, [0.025, 0.975])), abs=1e-12)
    bca = gwet_ac_table(x, n_resamples=200, seed=4).iloc[0]
    assert bca.ci_method == "bootstrap-bca" and bca.ci_low < bca.estimate < bca.ci_high


def test_weights_are_gwets() -> None:
    w = gwet_weights((1, 2, 3, 4, 5))
    assert w[0].tolist() == pytest.approx([1, 15 / 16, 12 / 16, 7 / 16, 0])
    assert gwet_weights((1, 2, 3), "identity").tolist() == np.eye(3).tolist()


def test_bad_input_names_the_problem() -> None:
    with pytest.raises(AgreementInputError, match="outside the rating scale"):
        gwet_ac(np.array([[1, 7], [2, 2]], dtype=float))
    with pytest.raises(AgreementInputError, match="more than once"):
        gwet_ac(pd.DataFrame({"item_id": ["a", "a"], "rater_id": ["c1", "c1"], "score": [4, 5]}))
    with pytest.raises(AgreementInputError, match="weights"):
        gwet_ac(HANDBOOK_4_RATERS, weights="cubic")


def test_no_item_rated_twice_gives_nan_with_a_note() -> None:
    row = gwet_ac_table(np.array([[1, NAN], [NAN, 2], [3, NAN]]), n_resamples=100).iloc[0]
    assert np.isnan(row.estimate)
    assert row.note == "no item has two ratings"
