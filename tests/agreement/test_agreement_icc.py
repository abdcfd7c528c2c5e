"""ICC in six forms: equal to pingouin on complete data, with unrounded F intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats

from medhelm_core.agreement import icc_table
from medhelm_core.agreement.icc import (
    ICC_TYPES,
    PINGOUIN_NAMES,
    icc_from_sums_of_squares,
    icc_matrix,
    weighted_sums_of_squares,
)
from medhelm_core.errors import AgreementInputError

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


def long_from_matrix(x: np.ndarray) -> pd.DataFrame:
    n, k = x.shape
    return pd.DataFrame(
        {
            "item_id": [f"i{i:03d}" for i in range(n) for _ in range(k)],
            "rater_id": [f"r{j}" for _ in range(n) for j in range(k)],
            "score": x.ravel(),
        }
    )


def pingouin_icc(long: pd.DataFrame) -> pd.DataFrame:
    """pingouin's table under our names, for pingouin 0.7 (ICC(C,k), CI95) or older (ICC3k, CI95%)."""
    raw = pg.intraclass_corr(long, "item_id", "rater_id", "score", nan_policy="omit")
    ci_col = "CI95" if "CI95" in raw.columns else "CI95%"
    out = raw.assign(type=raw["Type"].map(PINGOUIN_NAMES)).set_index("type")
    ci = np.stack(out[ci_col].to_numpy())
    return out.assign(ci_low=ci[:, 0], ci_high=ci[:, 1])


def rated_matrix(seed: int, n: int, k: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=(n, 1))
    bias = rng.normal(scale=0.5, size=(1, k))
    return np.round(3 + truth + bias + rng.normal(scale=0.8, size=(n, k)), 3)


@pytest.mark.parametrize(("seed", "n", "k"), [(0, 5, 2), (1, 30, 2), (2, 20, 4), (3, 74, 3), (4, 12, 7)])
def test_icc_matches_pingouin_on_complete_data(seed: int, n: int, k: int) -> None:
    x = rated_matrix(seed, n, k)
    ours = icc_matrix(x).set_index("type")
    ref = pingouin_icc(long_from_matrix(x))
    assert list(ours.index) == list(ICC_TYPES)
    for t in ICC_TYPES:
        assert ours.loc[t, "icc"] == pytest.approx(ref.loc[t, "ICC"], abs=1e-9)
        assert ours.loc[t, "F"] == pytest.approx(ref.loc[t, "F"], rel=1e-9)
        assert ours.loc[t, "df1"] == ref.loc[t, "df1"]
        assert ours.loc[t, "df2"] == ref.loc[t, "df2"]
        assert ours.loc[t, "pval"] == pytest.approx(ref.loc[t, "pval"], rel=1e-6, abs=1e-12)
        # pingouin rounds its intervals to 2 decimals.
        for bound in ("ci_low", "ci_high"):
            if np.isnan(ours.loc[t, bound]):
                # Ours is NaN only where pingouin's bound is no bound: a single-rater ICC below -1/(k-1), or
                # an average-measure bound beyond the other bound (5 items x 2 raters: ICC2k from "16.98").
                single = ref.loc[t.removesuffix("k"), bound]
                assert single < -1 / (k - 1) + 0.005 or ref.loc[t, "ci_low"] > ref.loc[t, "ci_high"]
                assert "undefined" in ours.loc[t, "note"]
            else:
                assert ours.loc[t, bound] == pytest.approx(ref.loc[t, bound], abs=0.005 + 1e-9)


def test_icc_table_reads_long_data_like_pingouin() -> None:
    x = rated_matrix(7, 25, 3)
    ours = icc_table(long_from_matrix(x)).set_index("type")
    ref = pingouin_icc(long_from_matrix(x))
    np.testing.assert_allclose(ours.loc[list(ICC_TYPES), "icc"], ref.loc[list(ICC_TYPES), "ICC"], atol=1e-9)


def test_icc_f_intervals_match_the_unrounded_formulas() -> None:
    # Shrout & Fleiss (1979) for ICC(3,k): bounds 1 - 1/(F/F_crit) and 1 - 1/(F * F_crit').
    x = rated_matrix(11, 40, 2)
    row = icc_matrix(x, confidence=0.90).set_index("type").loc["ICC3k"]
    n, k = x.shape
    f_val = row["F"]
    low = 1 - 1 / (f_val / stats.f.ppf(0.95, n - 1, (n - 1) * (k - 1)))
    high = 1 - 1 / (f_val * stats.f.ppf(0.95, (n - 1) * (k - 1), n - 1))
    assert row["ci_low"] == pytest.approx(low, abs=1e-12)
    assert row["ci_high"] == pytest.approx(high, abs=1e-12)


def test_icc_table_drops_items_missing_a_rater_as_pingouin_does() -> None:
    x = rated_matrix(5, 20, 3)
    long = long_from_matrix(x)
    long = long[~((long["item_id"].isin(["i000", "i007"])) & (long["rater_id"] == "r1"))]
    ours = icc_table(long).set_index("type")
    ref = pingouin_icc(long)
    assert (ours["n_items"] == 18).all()
    np.testing.assert_allclose(ours.loc[list(ICC_TYPES), "icc"], ref.loc[list(ICC_TYPES), "ICC"], atol=1e-9)


def test_icc_refuses_duplicate_ratings_that_pingouin_would_average() -> None:
    long = long_from_matrix(rated_matrix(1, 6, 2))
    long = pd.concat([long, long.iloc[[0]]])
    with pytest.raises(AgreementInputError, match="more than once"):
        icc_table(long)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_icc_with_fewer_than_three_items_is_nan_with_a_note(n: int) -> None:
    out = icc_matrix(np.arange(2 * n, dtype=float).reshape(n, 2))
    assert out["icc"].isna().all()
    assert out["note"].str.contains("fewer than 3 items").all()


def test_icc_without_variance_between_items_is_nan_not_an_error() -> None:
    out = icc_matrix(np.tile([[2.0, 3.0]], (6, 1)))
    assert out["icc"].isna().all()
    assert (out["note"] == "no variance between items").all()


def test_icc_with_one_rater_is_nan_with_a_note() -> None:
    out = icc_matrix(np.arange(5.0).reshape(5, 1))
    assert out["icc"].isna().all()
    assert out["note"].str.contains("fewer than 2 raters").all()


# Shrout, P. E. & Fleiss, J. L. (1979). Intraclass correlations: uses in assessing rater reliability.
# Psychological Bulletin, 86(2), 420-428. Table 2: four judges rate six targets.
SHROUT_FLEISS_TABLE_2 = np.array(
    [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]], dtype=float
)


@pytest.mark.parametrize(
    ("form", "published"),
    [("ICC1", 0.17), ("ICC2", 0.29), ("ICC3", 0.71), ("ICC1k", 0.44), ("ICC2k", 0.62), ("ICC3k", 0.91)],
)
def test_icc_reproduces_shrout_and_fleiss_1979_table_2(form: str, published: float) -> None:
    """Shrout & Fleiss (1979), Psychological Bulletin 86(2):420-428, Tables 2 and 4.

    The published ICC(1,1) .17, ICC(2,1) .29, ICC(3,1) .71, ICC(1,4) .44, ICC(2,4) .62 and ICC(3,4) .91
    are given to two decimals; ours must round to them.
    """
    table = icc_matrix(SHROUT_FLEISS_TABLE_2).set_index("type")
    assert round(float(table.loc[form, "icc"]), 2) == published


def test_icc_reproduces_shrout_and_fleiss_1979_mean_squares() -> None:
    # Their ANOVA of Table 2: BMS 11.24, WMS 6.26, JMS 32.49, EMS 1.02.
    ss = weighted_sums_of_squares(SHROUT_FLEISS_TABLE_2, np.ones((1, 6)))
    ms = {k: round(float(v[0]), 2) for k, v in icc_from_sums_of_squares(ss).items() if k.startswith("ms")}
    assert ms == {"msr": 11.24, "msw": 6.26, "msc": 32.49, "mse": 1.02}


def test_icc2_interval_of_a_near_singular_design_is_stable_under_rescaling():
    # Rater means that differ less than chance put ICC(2)'s F bound on -1, where ICC(2,k)'s Spearman-Brown
    # bound divides by zero: it was -2.7e9 and moved with the scale; it is NaN with a note, at every scale.
    x = np.array([[5.0, 1.0], [2.0, 2.0], [2.0, 2.0]])  # found by the property test under another seed
    a = icc_matrix(x).set_index("type")
    b = icc_matrix(0.109375 * x).set_index("type")
    cols = ["icc", "ci_low", "ci_high"]
    np.testing.assert_allclose(a[cols].to_numpy(float), b[cols].to_numpy(float), rtol=1e-9, atol=1e-9)
    assert np.isnan(a.loc["ICC2k", "ci_low"]) and "lower bound undefined" in a.loc["ICC2k", "note"]
    bounds = a[["ci_low", "ci_high"]].to_numpy(float)
    assert (np.abs(bounds[np.isfinite(bounds)]) < 1e3).all()


def test_icc2k_with_an_exactly_zero_denominator_is_nan_with_a_note_not_1e16():
    # msr + (msc - mse) / n is exactly 0 here (the items vary no more than the raters' disagreement takes
    # away); in floating point it is -8.7e-19, and dividing by it printed ICC(2,k) = 2.3e16.
    x = np.array([[2.0, 4.0], [4.0, 2.0], [3.0, 5.0]]) * 0.1
    out = icc_from_sums_of_squares(weighted_sums_of_squares(x, np.ones((1, 3))))
    assert out["msr"][0] + (out["msc"][0] - out["mse"][0]) / 3 == pytest.approx(0.0, abs=1e-15)
    assert np.isnan(out["ICC2k"][0]) and np.isfinite(out["ICC3k"][0])
    row = icc_matrix(x).set_index("type").loc["ICC2k"]
    assert np.isnan(row["icc"]) and np.isnan(row["ci_low"]) and "not positive" in row["note"]
