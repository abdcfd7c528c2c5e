"""AC2 and weighted kappa beside the ICC: equal to the reference implementations, with sound bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medhelm_core.agreement.contract import round_half_away
from medhelm_core.agreement.gwet import gwet_ac, gwet_ac_table
from medhelm_core.agreement.kappa import weighted_kappa, weighted_kappa_ci
from medhelm_core.agreement.robust import ROBUST_COLUMNS, robust_table, scale_agreement


def skewed_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.choice([2, 3, 4, 5], n, p=[0.05, 0.15, 0.3, 0.5])
    return a, np.clip(a + rng.choice([-1, 0, 0, 1], n), 1, 5)


@pytest.mark.parametrize("seed", range(5))
def test_estimates_equal_gwets_ac2_and_the_weighted_kappa(seed):
    a, b = skewed_pairs(60 + 40 * seed, seed)
    table = scale_agreement(a, b, n_resamples=0).set_index("method")
    assert table.loc["AC2", "estimate"] == pytest.approx(gwet_ac(np.column_stack([a, b])), abs=1e-12)
    assert table.loc["kappa_qw", "estimate"] == pytest.approx(weighted_kappa(a, b), abs=1e-12)
    reference = gwet_ac_table(np.column_stack([a, b]), n_resamples=0).iloc[0]
    assert table.loc["AC2", "observed_agreement"] == pytest.approx(reference["pa"], abs=1e-12)
    assert table.loc["AC2", "chance_agreement"] == pytest.approx(reference["pe"], abs=1e-12)


def test_means_between_levels_are_rounded_to_the_scale_as_kappa_rounds_them():
    a = np.array([4.5, 3.5, 5.0, 2.0, 4.0, 4.4])
    b = np.array([4.0, 4.0, 5.0, 2.5, 3.6, 4.0])
    table = scale_agreement(a, b, n_resamples=0).set_index("method")
    assert table.loc["kappa_qw", "estimate"] == pytest.approx(weighted_kappa(a, b), abs=1e-12)
    halves_up = np.column_stack([round_half_away(a), round_half_away(b)])
    assert table.loc["AC2", "estimate"] == pytest.approx(gwet_ac(halves_up), abs=1e-12)


def test_the_cell_bootstrap_gives_the_intervals_of_the_item_bootstrap():
    # The same bootstrap in distribution: with many resamples both intervals agree to Monte Carlo noise.
    a, b = skewed_pairs(300, 11)
    ours = scale_agreement(a, b, n_resamples=20_000, seed=3).set_index("method")
    ac = gwet_ac_table(np.column_stack([a, b]), n_resamples=20_000, seed=4).iloc[0]
    kappa = weighted_kappa_ci(a, b, n_resamples=20_000, seed=4).iloc[0]
    assert ours.loc["AC2", "ci_low"] == pytest.approx(ac["ci_low"], abs=0.01)
    assert ours.loc["AC2", "ci_high"] == pytest.approx(ac["ci_high"], abs=0.01)
    assert ours.loc["kappa_qw", "ci_low"] == pytest.approx(kappa["ci_low"], abs=0.015)
    assert ours.loc["kappa_qw", "ci_high"] == pytest.approx(kappa["ci_high"], abs=0.015)
    for method in ("AC2", "kappa_qw"):
        row = ours.loc[method]
        assert row["ci_low"] < row["estimate"] < row["ci_high"]


def test_kappa_collapses_on_skewed_scores_where_ac2_does_not():
    # 90% of both raters' scores are 5 and they agree on 92% of items: kappa is low, AC2 is high.
    a = np.array([5] * 88 + [4] * 2 + [5] * 4 + [4] * 6)
    b = np.array([5] * 88 + [5] * 2 + [4] * 4 + [4] * 6)
    table = scale_agreement(a, b, seed=0).set_index("method")
    assert table.loc["AC2", "estimate"] > 0.95 and table.loc["kappa_qw", "estimate"] < 0.7


def test_perfect_agreement_gives_a_point_interval_and_too_few_items_no_figure():
    table = scale_agreement([5, 4, 3, 5, 4], [5, 4, 3, 5, 4], seed=0).set_index("method")
    assert table.loc["AC2", "estimate"] == 1.0 and table.loc["AC2", "ci_low"] == table.loc["AC2", "ci_high"] == 1.0
    few = scale_agreement([5, 4], [5, 3], seed=0)
    assert few["estimate"].isna().all() and few["note"].str.contains("fewer than 3").all()


def test_robust_table_covers_the_clinician_pair_the_jury_and_each_judge_per_scope():
    rng = np.random.default_rng(5)
    truth = rng.choice([3, 4, 5], 60, p=[0.2, 0.3, 0.5])
    raters = [("c1", "clinician"), ("c2", "clinician"), ("jury", "jury"), ("gpt", "judge"), ("llama", "judge"),
              ("rougeL_f", "metric")]
    rows = [(f"i{i}", r, k, c, float(np.clip(truth[i] + rng.integers(-1, 2), 1, 5)), "medi_qa" if i < 30 else "aci")
            for i in range(60) for r, k in raters for c in ("accuracy", "clarity")]
    long = pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "criterion", "score", "benchmark"])
    long = long[~((long["rater_kind"] == "metric") & (long["criterion"] == "clarity"))]
    table = robust_table(long, n_resamples=500)
    assert list(table.columns) == list(ROBUST_COLUMNS)
    assert set(table["comparison"]) == {"clinician-clinician", "jury-clinician", "judge:gpt-clinician",
                                        "judge:llama-clinician"}
    assert set(table["benchmark"]) == {"aci", "medi_qa", "pooled"}
    assert set(table["criterion"]) == {"composite", "accuracy", "clarity"}
    pooled = table[(table["benchmark"] == "pooled") & (table["criterion"] == "accuracy")].set_index(
        ["comparison", "method"])
    jury = long[(long["rater_id"] == "jury") & (long["criterion"] == "accuracy")].set_index("item_id")["score"]
    clin = long[(long["rater_kind"] == "clinician") & (long["criterion"] == "accuracy")].groupby("item_id")["score"]
    expected = weighted_kappa(clin.mean().loc[jury.index], jury)
    assert pooled.loc[("jury-clinician", "kappa_qw"), "estimate"] == pytest.approx(expected, abs=1e-12)
    assert pooled.loc[("jury-clinician", "AC2"), "n_items"] == 60
    assert "pair c1 and c2" in pooled.loc[("clinician-clinician", "AC2"), "note"]
