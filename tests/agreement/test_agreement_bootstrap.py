"""Bootstrap intervals over items: seeded, vectorised, and equal to the slow ways of computing them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats

import medhelm_core.agreement.bootstrap as bootstrap_module
from medhelm_core.agreement import bootstrap_icc
from medhelm_core.agreement.bootstrap import bootstrap_distribution, jackknife_distribution
from medhelm_core.agreement.icc import PINGOUIN_NAMES, icc_matrix
from medhelm_core.errors import AgreementInputError

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


def rated_matrix(seed: int, n: int, k: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 3 + rng.normal(size=(n, 1)) + rng.normal(scale=0.3, size=(1, k)) + rng.normal(scale=0.9, size=(n, k))


def pingouin_icc3k(x: np.ndarray) -> float:
    n, k = x.shape
    long = pd.DataFrame({"item": np.repeat(np.arange(n), k), "rater": np.tile(np.arange(k), n), "score": x.ravel()})
    table = pg.intraclass_corr(long, "item", "rater", "score")
    return float(table.set_index(table["Type"].map(PINGOUIN_NAMES)).loc["ICC3k", "ICC"])


def scipy_bootstrap(x: np.ndarray, method: str, seed: int, n_resamples: int) -> tuple[float, float]:
    n = x.shape[0]

    def icc3k_of_rows(rows: np.ndarray, axis: int = -1) -> np.ndarray:
        rows = np.atleast_2d(rows)
        flat = rows.reshape(-1, rows.shape[-1])
        values = [icc_matrix(x[r]).set_index("type").loc["ICC3k", "icc"] for r in flat]
        return np.asarray(values).reshape(rows.shape[:-1])

    res = stats.bootstrap(
        (np.arange(n),),
        icc3k_of_rows,
        vectorized=True,
        method=method,
        n_resamples=n_resamples,
        rng=np.random.default_rng(seed),
    )
    return float(np.squeeze(res.confidence_interval.low)), float(np.squeeze(res.confidence_interval.high))


def test_bootstrap_is_seeded_and_vectorised() -> None:
    x = rated_matrix(0, 40, 2)
    first = bootstrap_icc(x, seed=3)
    again = bootstrap_icc(x, seed=3)
    other = bootstrap_icc(x, seed=4)
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["ci_low"], other["ci_low"])
    assert (first["n_resamples"] == 2000).all() and (first["ci_method"] == "bootstrap-bca").all()
    # Vectorised means every resample is drawn at once: B x n indices from one numpy Generator call.
    idx = np.random.default_rng(3).integers(0, 40, (2000, 40))
    boot = bootstrap_distribution(x, ["ICC3k"], 2000, 3)["ICC3k"]
    for b in (0, 1, 999, 1999):
        assert boot[b] == pytest.approx(icc_matrix(x[idx[b]]).set_index("type").loc["ICC3k", "icc"], abs=1e-12)


def test_bootstrap_resamples_equal_a_naive_loop_calling_pingouin() -> None:
    x = rated_matrix(1, 25, 3)
    idx = np.random.default_rng(9).integers(0, 25, (40, 25))
    boot = bootstrap_distribution(x, ["ICC3k"], 40, 9)["ICC3k"]
    naive = np.array([pingouin_icc3k(x[i]) for i in idx])
    np.testing.assert_allclose(boot, naive, atol=1e-9)


def test_jackknife_equals_leaving_each_item_out() -> None:
    x = rated_matrix(2, 15, 2)
    jack = jackknife_distribution(x, ["ICC3k", "ICC2"])
    for i in range(15):
        table = icc_matrix(np.delete(x, i, axis=0)).set_index("type")
        assert jack["ICC3k"][i] == pytest.approx(table.loc["ICC3k", "icc"], abs=1e-12)
        assert jack["ICC2"][i] == pytest.approx(table.loc["ICC2", "icc"], abs=1e-12)


@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_bootstrap_interval_matches_scipy_bootstrap_on_the_same_seed(method: str) -> None:
    x = rated_matrix(3, 20, 2)
    ours = bootstrap_icc(x, icc_types=["ICC3k"], n_resamples=300, method=method, seed=5).iloc[0]
    low, high = scipy_bootstrap(x, method, seed=5, n_resamples=300)
    assert ours["ci_method"] == f"bootstrap-{method}"
    assert ours["ci_low"] == pytest.approx(low, abs=1e-9)
    assert ours["ci_high"] == pytest.approx(high, abs=1e-9)


def test_bootstrap_blocks_give_the_same_answer_as_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    x = rated_matrix(4, 30, 2)
    whole = bootstrap_icc(x, n_resamples=500, seed=1)
    monkeypatch.setattr(bootstrap_module, "_BLOCK_CELLS", 30 * 7)
    split = bootstrap_icc(x, n_resamples=500, seed=1)
    pd.testing.assert_frame_equal(whole, split)


def test_bootstrap_reads_long_tables() -> None:
    x = rated_matrix(5, 12, 2)
    long = pd.DataFrame(
        {
            "item_id": np.repeat([f"i{i:02d}" for i in range(12)], 2),
            "rater_id": np.tile(["a", "b"], 12),
            "score": x.ravel(),
        }
    )
    pd.testing.assert_frame_equal(bootstrap_icc(long, n_resamples=200), bootstrap_icc(x, n_resamples=200))


def test_bootstrap_leaves_out_resamples_without_variance_and_says_so() -> None:
    x = np.array([[1.0, 1.2], [1.0, 0.9], [5.0, 4.8]])
    out = bootstrap_icc(x, icc_types=["ICC3k"], n_resamples=500, method="percentile", seed=0).iloc[0]
    assert out["n_valid"] < 500
    assert "left out" in out["note"]


def test_bootstrap_with_fewer_than_three_items_is_nan_with_a_note() -> None:
    out = bootstrap_icc(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert out["estimate"].isna().all() and out["ci_low"].isna().all()
    assert out["note"].str.contains("fewer than 3 items").all()


def test_bootstrap_rejects_unknown_methods_and_types() -> None:
    x = rated_matrix(6, 10, 2)
    with pytest.raises(AgreementInputError, match="bootstrap method"):
        bootstrap_icc(x, method="studentized")
    with pytest.raises(AgreementInputError, match="ICC type"):
        bootstrap_icc(x, icc_types=["ICC4"])
