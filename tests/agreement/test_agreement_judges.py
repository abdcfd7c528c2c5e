"""Judge subsets against the clinicians, the clinicians' own ceiling, and kappa with a bootstrap interval."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from medhelm_core.agreement import agreement_table, leave_one_clinician_out, weighted_kappa
from medhelm_core.agreement.judges import CLINICIAN_CEILING, JUDGE_SUBSET_COLUMNS, judge_subset_agreement
from medhelm_core.agreement.kappa import weighted_kappa_ci
from medhelm_core.errors import AgreementInputError

CRITERIA = ("accuracy", "completeness", "clarity")


def rated_long(n_items: int = 40, seed: int = 0, judges: dict[str, float] | None = None) -> pd.DataFrame:
    """Three clinicians rate every item near a latent truth; each judge adds noise of the given sd."""
    rng = np.random.default_rng(seed)
    judges = {"gpt-4o": 0.4, "claude": 0.5, "noise": 6.0} if judges is None else judges
    truth = rng.normal(3, 1, n_items)
    raters = [(c, "clinician", 0.5) for c in ("c1", "c2", "c3")] + [(j, "judge", sd) for j, sd in judges.items()]
    rows = [
        (f"i{i:02d}", r, kind, crit, float(np.clip(np.rint(truth[i] + rng.normal(0, sd)), 1, 5)))
        for i in range(n_items)
        for r, kind, sd in raters
        for crit in CRITERIA
    ]
    long = pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "criterion", "score"])
    return long.assign(benchmark=np.where(long["item_id"] < "i20", "medi_qa", "aci_bench"))


def with_mean_clinician_judge(long: pd.DataFrame) -> pd.DataFrame:
    clin = long[long["rater_kind"] == "clinician"]
    mean = clin.groupby(["item_id", "criterion", "benchmark"], as_index=False)["score"].mean()
    return pd.concat([long, mean.assign(rater_id="oracle", rater_kind="judge")], ignore_index=True)


def test_a_judge_identical_to_the_clinician_mean_agrees_perfectly_alone() -> None:
    table = judge_subset_agreement(with_mean_clinician_judge(rated_long())).set_index("subset")
    oracle = table.loc["judge: oracle"]
    assert oracle["estimate"] == pytest.approx(1.0, abs=1e-9)
    assert oracle["pearson_r"] == pytest.approx(1.0, abs=1e-9)
    assert oracle["n_items"] == 40
    assert oracle["judges"] == ("oracle",)


def test_dropping_a_noise_judge_raises_agreement() -> None:
    table = judge_subset_agreement(rated_long()).set_index("subset")
    assert table.loc["without: noise", "estimate"] > table.loc["all judges", "estimate"]
    assert table.loc["without: gpt-4o", "estimate"] < table.loc["all judges", "estimate"]
    assert table.loc["judge: noise", "estimate"] < table.loc["judge: gpt-4o", "estimate"]


def test_every_judge_alone_and_every_leave_one_judge_out_jury_is_listed() -> None:
    table = judge_subset_agreement(rated_long())
    assert list(table.columns) == list(JUDGE_SUBSET_COLUMNS)
    assert table["subset"].tolist() == [
        "judge: claude",
        "judge: gpt-4o",
        "judge: noise",
        "all judges",
        "without: claude",
        "without: gpt-4o",
        "without: noise",
        CLINICIAN_CEILING,
    ]
    without = table.set_index("subset").loc["without: noise"]
    assert without["judges"] == ("claude", "gpt-4o") and without["n_judges"] == 2


def test_all_judges_row_is_the_jury_of_agreement_table() -> None:
    long = rated_long()
    judges = long[long["rater_kind"] == "judge"]
    jury = judges.groupby(["item_id", "criterion", "benchmark"], as_index=False)["score"].mean()
    with_jury = pd.concat(
        [long[long["rater_kind"] == "clinician"], jury.assign(rater_id="jury", rater_kind="jury")], ignore_index=True
    )
    ref = agreement_table(with_jury).query(
        "benchmark == 'pooled' and criterion == 'composite' and comparison == 'jury-clinician'"
    ).iloc[0]
    ours = judge_subset_agreement(long).set_index("subset").loc["all judges"]
    for col in ("estimate", "ci_low", "ci_high", "pearson_r", "kappa_qw"):
        assert ours[col] == pytest.approx(ref[col], abs=1e-12), col


def test_spearman_keeps_tied_means_tied() -> None:
    # The item sums of integer scores are exact, and rank like the means; float noise in the means
    # (mean of judges' composites vs. mean of criteria's jury means) must not break their ties.
    long = rated_long()
    exact = stats.spearmanr(
        long[long["rater_kind"] == "clinician"].groupby("item_id")["score"].sum(),
        long[long["rater_kind"] == "judge"].groupby("item_id")["score"].sum(),
    ).statistic
    ours = judge_subset_agreement(long).set_index("subset").loc["all judges", "spearman_rho"]
    assert ours == pytest.approx(exact, abs=1e-12)


def test_ceiling_is_the_leave_one_clinician_out_median_and_range() -> None:
    long = rated_long()
    loco = leave_one_clinician_out(long)
    table = judge_subset_agreement(long, per_clinician=True).set_index("subset")
    ceiling = table.loc[CLINICIAN_CEILING]
    assert ceiling["estimate"] == pytest.approx(loco["icc3k"].median())
    assert ceiling["range_low"] == pytest.approx(loco["icc3k"].min())
    assert ceiling["range_high"] == pytest.approx(loco["icc3k"].max())
    assert ceiling["ci_method"] == "none"
    for rec in loco.to_dict("records"):
        row = table.loc[f"clinician: {rec['clinician']}"]
        assert row["estimate"] == pytest.approx(rec["icc3k"])
        assert row["ci_low"] == pytest.approx(rec["ci_low"])
        assert row["n_items"] == rec["n_items"]


def test_one_criterion_and_per_benchmark_blocks() -> None:
    table = judge_subset_agreement(rated_long(), criterion="accuracy", by_benchmark=True)
    assert table["benchmark"].unique().tolist() == ["aci_bench", "medi_qa", "pooled"]
    assert set(table["criterion"]) == {"accuracy"}
    assert table.query("benchmark == 'medi_qa' and subset == 'all judges'")["n_items"].iloc[0] == 20


def test_bootstrap_adds_an_interval_row_per_subset() -> None:
    table = judge_subset_agreement(rated_long(), bootstrap="percentile", n_resamples=200)
    boot = table[table["ci_method"] == "bootstrap-percentile"]
    assert len(boot) == 7
    assert (boot["ci_low"] <= boot["estimate"]).all() and (boot["estimate"] <= boot["ci_high"]).all()


def test_one_judge_has_no_leave_one_out_rows() -> None:
    table = judge_subset_agreement(rated_long(judges={"gpt-4o": 0.4}))
    assert table["subset"].tolist() == ["judge: gpt-4o", CLINICIAN_CEILING]


def test_items_a_judge_failed_on_are_counted_in_the_note() -> None:
    long = rated_long()
    failed = (long["rater_id"] == "noise") & long["item_id"].isin(["i00", "i01"])
    row = judge_subset_agreement(long[~failed]).set_index("subset").loc["all judges"]
    assert row["n_items"] == 40
    assert "2 item(s) rest on fewer than 3 judge(s)" in row["note"]


def test_a_table_without_judges_or_clinicians_says_what_is_missing() -> None:
    long = rated_long()
    with pytest.raises(AgreementInputError, match="no judge ratings"):
        judge_subset_agreement(long[long["rater_kind"] == "clinician"])
    with pytest.raises(AgreementInputError, match="no clinician ratings"):
        judge_subset_agreement(long[long["rater_kind"] == "judge"])
    with pytest.raises(AgreementInputError, match="not rated by clinicians"):
        judge_subset_agreement(long, criterion="empathy")


# Quadratic-weighted kappa with a bootstrap interval (requirement 8).


def scipy_kappa_interval(a: np.ndarray, b: np.ndarray, method: str, seed: int, n: int) -> tuple[float, float]:
    def kappa_of_rows(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.atleast_2d(idx)
        flat = idx.reshape(-1, idx.shape[-1])
        return np.asarray([weighted_kappa(a[r], b[r]) for r in flat]).reshape(idx.shape[:-1])

    res = stats.bootstrap(
        (np.arange(a.size),),
        kappa_of_rows,
        vectorized=True,
        method=method,
        n_resamples=n,
        rng=np.random.default_rng(seed),
    )
    return float(np.squeeze(res.confidence_interval.low)), float(np.squeeze(res.confidence_interval.high))


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_kappa_interval_matches_scipy_bootstrap_on_the_same_seed(method: str) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(1, 6, 40)
    b = np.clip(a + rng.integers(-2, 3, 40), 1, 5)
    row = weighted_kappa_ci(a, b, n_resamples=300, seed=5, method=method).iloc[0]
    low, high = scipy_kappa_interval(a, b, method, seed=5, n=300)
    assert row["estimate"] == pytest.approx(weighted_kappa(a, b), abs=1e-12)
    assert row["ci_method"] == f"bootstrap-{method}"
    assert row["ci_low"] == pytest.approx(low, abs=1e-9)
    assert row["ci_high"] == pytest.approx(high, abs=1e-9)


def test_kappa_interval_is_seeded_and_a_point_when_agreement_is_perfect() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(1, 6, 30)
    b = np.clip(a + rng.integers(-1, 2, 30), 1, 5)
    pd.testing.assert_frame_equal(weighted_kappa_ci(a, b, seed=3), weighted_kappa_ci(a, b, seed=3))
    perfect = weighted_kappa_ci([1, 2, 3, 4, 5] * 4, [1, 2, 3, 4, 5] * 4).iloc[0]
    assert perfect["estimate"] == perfect["ci_low"] == perfect["ci_high"] == 1.0


def test_kappa_interval_refuses_bad_arguments_and_notes_too_few_items() -> None:
    with pytest.raises(AgreementInputError, match="bootstrap method"):
        weighted_kappa_ci([1, 2, 3], [1, 2, 3], method="basic")
    with pytest.raises(AgreementInputError, match="outside the rating scale"):
        weighted_kappa_ci([1, 2, 9], [1, 2, 3])
    row = weighted_kappa_ci([1, 2], [1, 2]).iloc[0]
    assert np.isnan(row["ci_low"]) and "fewer than 3 items" in row["note"]
    assert weighted_kappa_ci([1, 2, 3], [1, 3, 3], n_resamples=0).iloc[0]["ci_method"] == "none"
