"""MedHELM's agreement protocol on the paper's own ratings, and the summary tables built on it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats

from medhelm_core.agreement import agreement_table, icc1_unbalanced
from medhelm_core.agreement.contract import round_half_away
from medhelm_core.agreement.icc import PINGOUIN_NAMES, icc_matrix
from medhelm_core.agreement.pairs import PAIR_FORMS, zscore_within
from medhelm_core.agreement.protocol import TABLE_COLUMNS

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")

RATINGS = Path(__file__).resolve().parents[2] / "annotations" / "medhelm_validation" / "ratings.csv"
CRITERIA = ["accuracy", "completeness", "clarity"]
PAPER_POOL = ["aci_bench", "medi_qa"]


def medhelm_long() -> pd.DataFrame:
    """ratings.csv in the engine's long contract: clinicians as they are, the jury as one rater per item."""
    if not RATINGS.exists():
        pytest.skip(f"MedHELM ratings not found at {RATINGS}")
    df = pd.read_csv(RATINGS)
    keys = ["instance_id", "dataset_name"]
    clin = df.melt(id_vars=[*keys, "rater_id"], value_vars=CRITERIA, var_name="criterion", value_name="score")
    # The jury's scores are repeated on both clinician rows of an item; keep one.
    jury = df.drop_duplicates("instance_id").melt(
        id_vars=keys, value_vars=[f"llm_{c}" for c in CRITERIA], var_name="criterion", value_name="score"
    )
    jury = jury.assign(criterion=jury["criterion"].str.removeprefix("llm_"), rater_id="jury", rater_kind="jury")
    long = pd.concat([clin.assign(rater_kind="clinician"), jury], ignore_index=True)
    return long.rename(columns={"instance_id": "item_id", "dataset_name": "benchmark"})


@pytest.fixture(scope="module")
def medhelm_table() -> pd.DataFrame:
    return agreement_table(medhelm_long(), protocol="medhelm", benchmarks=PAPER_POOL)


def row(
    table: pd.DataFrame,
    comparison: str,
    benchmark: str = "pooled",
    criterion: str = "composite",
    method: str = "ICC3k",
    ci_method: str = "F",
) -> pd.Series:
    hit = table[
        (table["comparison"] == comparison)
        & (table["benchmark"] == benchmark)
        & (table["criterion"] == criterion)
        & (table["method"] == method)
        & (table["ci_method"] == ci_method)
    ]
    assert len(hit) == 1, hit
    return hit.iloc[0]


def test_medhelm_protocol_reproduces_paper_jury_icc(medhelm_table: pd.DataFrame) -> None:
    jury = row(medhelm_table, "jury-clinician")
    assert round(jury["estimate"], 3) == 0.474
    assert (round(jury["ci_low"], 2), round(jury["ci_high"], 2)) == (0.10, 0.69)
    assert jury["n_items"] == 56 and jury["n_available"] == 56
    assert jury["form"].startswith("ICC(C,k): consistency") and "z-scored" in jury["form"]
    # Koo & Li's bands were not written for 2r / (1 + r) of two z-scored sides: no reading is printed.
    assert jury["reading"] == "" and jury["reading_ci"] == ""
    # With two z-scored raters ICC(3,k) = 2r / (1 + r): 0.474 is r = 0.31.
    assert jury["estimate"] == pytest.approx(2 * jury["pearson_r"] / (1 + jury["pearson_r"]), abs=1e-12)


def test_medhelm_protocol_z_scores_the_mean_clinician_composite_not_each_clinician() -> None:
    # The order that reproduces 0.474, as in the paper's script: composite of raw criteria per rating,
    # mean over the item's clinicians, then z-score that mean and the jury composite as two raters.
    df = pd.read_csv(RATINGS) if RATINGS.exists() else pytest.skip("no ratings")
    df = df[df["dataset_name"].isin(PAPER_POOL)].assign(overall=lambda d: d[CRITERIA].mean(axis=1))
    human = df.groupby("instance_id")["overall"].mean()
    jury = df.groupby("instance_id")[[f"llm_{c}" for c in CRITERIA]].first().mean(axis=1)
    long = pd.concat(
        [
            pd.DataFrame({"item": human.index, "rater": "human", "score": zscore_within(human)}),
            pd.DataFrame({"item": jury.index, "rater": "jury", "score": zscore_within(jury)}),
        ]
    )
    ref = pg.intraclass_corr(long, "item", "rater", "score")
    ref_icc = float(ref.set_index(ref["Type"].map(PINGOUIN_NAMES)).loc["ICC3k", "ICC"])
    ours = agreement_table(medhelm_long(), benchmarks=PAPER_POOL, criteria=CRITERIA)
    assert row(ours, "jury-clinician")["estimate"] == pytest.approx(ref_icc, abs=1e-9)
    # z-scoring each clinician before averaging gives another figure, which is why the order matters.
    per_clinician = df.assign(z=df.groupby("rater_id")["overall"].transform(lambda s: (s - s.mean()) / s.std()))
    other = (
        icc_matrix(
            np.column_stack([zscore_within(per_clinician.groupby("instance_id")["z"].mean()), zscore_within(jury)])
        )
        .set_index("type")
        .loc["ICC3k", "icc"]
    )
    assert abs(other - ref_icc) > 0.03


def test_medhelm_protocol_spearman_and_kappa_match_the_papers_script(medhelm_table: pd.DataFrame) -> None:
    df = pd.read_csv(RATINGS)
    df = df[df["dataset_name"].isin(PAPER_POOL)]
    human = df.assign(o=df[CRITERIA].mean(axis=1)).groupby("instance_id")["o"].mean()
    jury = df.groupby("instance_id")[[f"llm_{c}" for c in CRITERIA]].first().mean(axis=1)
    got = row(medhelm_table, "jury-clinician")
    # Means such as (4 + 4 + 5) / 3 computed in different orders differ by an ulp, which splits real ties
    # (14 distinct clinician means where there are 10): the paper's script gets 0.085 from that float noise.
    # Ranks must treat equal means as ties, which gives 0.106.
    assert stats.spearmanr(human, jury).statistic == pytest.approx(0.08535, abs=1e-5)
    tie_aware = stats.spearmanr(human.round(9), jury.round(9)).statistic
    assert got["spearman_rho"] == pytest.approx(tie_aware, abs=1e-12) and tie_aware == pytest.approx(0.10602, abs=1e-5)
    metrics = pytest.importorskip("sklearn.metrics")
    # The means are put on the scale halves away from zero (4.5 to 5), not half to even as the script did.
    kappa = metrics.cohen_kappa_score(
        round_half_away(human).astype(int), round_half_away(jury).astype(int), weights="quadratic",
        labels=[1, 2, 3, 4, 5]
    )
    assert got["kappa_qw"] == pytest.approx(kappa, abs=1e-12)
    script = metrics.cohen_kappa_score(
        human.round().astype(int), jury.round().astype(int), weights="quadratic", labels=[1, 2, 3, 4, 5]
    )
    assert script != pytest.approx(kappa, abs=1e-6)  # the rule matters on these data


def test_clinician_baseline_uses_the_pair_sharing_the_most_items(medhelm_table: pd.DataFrame) -> None:
    base = row(medhelm_table, "clinician-clinician")
    assert base["raters_used"] == ("clinician_03", "clinician_07")
    assert base["n_items"] == 10 and base["n_raters"] == 2
    assert "clinician_03 and clinician_07, 10 shared items" in base["note"]
    # The paper reports 0.43 without publishing how; on its released ratings this pair gives 0.641.
    df = pd.read_csv(RATINGS)
    df = df[df["dataset_name"].isin(PAPER_POOL) & df["rater_id"].isin(base["raters_used"])]
    df = df.assign(o=df[CRITERIA].mean(axis=1))
    df = df.assign(z=df.groupby("rater_id")["o"].transform(lambda s: (s - s.mean()) / s.std()))
    ref = pg.intraclass_corr(df, "instance_id", "rater_id", "z", nan_policy="omit")
    ref_icc = float(ref.set_index(ref["Type"].map(PINGOUIN_NAMES)).loc["ICC3k", "ICC"])
    assert base["estimate"] == pytest.approx(ref_icc, abs=1e-9)
    assert round(base["estimate"], 3) == 0.641


def test_clinician_baseline_with_a_constant_clinician_is_nan_with_a_note(medhelm_table: pd.DataFrame) -> None:
    # In medi_qa the best-overlapping pair includes clinician_08, who gave every item the same composite.
    base = row(medhelm_table, "clinician-clinician", benchmark="medi_qa")
    assert np.isnan(base["estimate"])
    assert "same score to every item" in base["note"] and base["n_items"] == 7


def test_agreement_table_has_every_benchmark_criterion_and_pooled(medhelm_table: pd.DataFrame) -> None:
    assert list(medhelm_table.columns) == list(TABLE_COLUMNS)
    assert set(medhelm_table["benchmark"]) == {"aci_bench", "medi_qa", "pooled"}
    assert list(dict.fromkeys(medhelm_table["criterion"])) == ["composite", *CRITERIA]
    assert set(medhelm_table["comparison"]) == {
        "clinician-clinician",
        "all clinicians",
        "clinician ceiling",
        "jury-clinician",
    }
    # Per scope: the pair, ICC(1) and ICC(1,k0) over every clinician, the ceiling, the jury.
    assert len(medhelm_table) == 3 * 4 * 5
    jury = row(medhelm_table, "jury-clinician")
    assert jury["n_ratings"] == 56 * 3 + df_ratings_in_pool() * 3
    assert jury["raters_used"][-1] == "jury" and len(jury["items_used"]) == 56


def df_ratings_in_pool() -> int:
    df = pd.read_csv(RATINGS)
    return int(df["dataset_name"].isin(PAPER_POOL).sum())


def test_full_protocol_adds_the_two_way_forms_and_all_clinician_designs() -> None:
    table = agreement_table(
        medhelm_long(), protocol="full", benchmarks=PAPER_POOL, criteria=["accuracy"], n_resamples=400, loco=True
    )
    pooled = table[(table["benchmark"] == "pooled") & (table["criterion"] == "composite")]
    jury = pooled[pooled["comparison"] == "jury-clinician"].set_index("method")
    # Consistency on z-scores with F, absolute agreement on the raw scale with the fixed-rater GCI.
    assert set(jury.index) == set(PAIR_FORMS)
    assert jury.loc["ICC3k", "ci_method"] == "F" and jury.loc["ICC2", "ci_method"] == "GCI (raters fixed)"
    assert jury.loc["ICC2", "reading"] != "" and jury.loc["ICC3k", "reading"] == ""
    # Absolute agreement sees the raw scale: the same figure as the two raw columns give.
    df = pd.read_csv(RATINGS)
    df = df[df["dataset_name"].isin(PAPER_POOL)]
    human = df.assign(o=df[["accuracy"]].mean(axis=1)).groupby("instance_id")["o"].mean()
    raw = np.column_stack([human, df.groupby("instance_id")["llm_accuracy"].first().loc[human.index]])
    assert jury.loc["ICC2", "estimate"] == pytest.approx(
        icc_matrix(raw).set_index("type").loc["ICC2", "icc"], abs=1e-12
    )
    # On accuracy alone the estimate is just below 0, where the model's ICC cannot be; the note says so.
    estimate = jury.loc["ICC2", "estimate"]
    assert estimate < 0 and jury.loc["ICC2", "ci_low"] == 0 < jury.loc["ICC2", "ci_high"]
    assert "below 0" in jury.loc["ICC2", "note"]
    pair = pooled[pooled["comparison"] == "clinician-clinician"].set_index("method")
    assert pair.loc["ICC2", "ci_method"] == "GCI (raters random)" and "two raters drawn at random" in pair.loc[
        "ICC2", "note"
    ]
    assert "bootstrap-bca" not in set(pooled["ci_method"])  # bootstrap intervals only on request
    clin = pooled[pooled["comparison"] == "all clinicians"].set_index("method")
    assert {"ICC1_unbalanced", "ICC1k_unbalanced", "alpha_interval", "alpha_ordinal"} <= set(clin.index)
    df = pd.read_csv(RATINGS)
    df = df[df["dataset_name"].isin(PAPER_POOL)]
    twice = df.groupby("instance_id").size()
    assert clin.loc["alpha_interval", "n_items"] == int((twice >= 2).sum())
    assert clin.loc["alpha_interval", "n_ratings"] == int(twice[twice >= 2].sum())
    assert clin.loc["alpha_interval", "reading"] == ""
    loco = pooled[pooled["comparison"].str.startswith("clinician:")]
    assert len(loco) == df["rater_id"].nunique()


def test_bootstrap_intervals_come_only_on_request_and_only_for_consistency_forms() -> None:
    table = agreement_table(synthetic_long(), protocol="full", bootstrap="bca", n_resamples=200)
    boot = table[table["ci_method"] == "bootstrap-bca"]
    assert set(boot["method"]) == {"ICC3", "ICC3k"}
    assert table.loc[table["ci_method"] == "F", "method"].isin(["ICC3", "ICC3k", "ICC1_unbalanced",
                                                                 "ICC1k_unbalanced"]).all()


def test_the_clinicians_agreement_from_every_clinician_sits_beside_the_one_pair(medhelm_table) -> None:
    pooled = medhelm_table[(medhelm_table["benchmark"] == "pooled") & (medhelm_table["criterion"] == "composite")]
    by = pooled.set_index(["comparison", "method"])
    pair = by.loc[("clinician-clinician", "ICC3k")]
    one_way = by.loc[("all clinicians", "ICC1_unbalanced")]
    ceiling = by.loc[("clinician ceiling", "ICC3k")]
    # The one pair shares 10 of the 50 items that two clinicians rated: the headline says so.
    assert (pair["n_items"], pair["n_available"]) == (10, 50)
    # ICC(1) over every clinician: the same as the one-way ICC of all their composites, with an F interval.
    df = pd.read_csv(RATINGS)
    df = df[df["dataset_name"].isin(PAPER_POOL)].assign(score=lambda d: d[CRITERIA].mean(axis=1))
    ref = icc1_unbalanced(df.rename(columns={"instance_id": "item_id"})).set_index("type").loc["ICC1"]
    assert one_way["estimate"] == pytest.approx(ref["icc"], abs=1e-12) and one_way["estimate"] < 0
    assert one_way["ci_low"] < one_way["estimate"] < one_way["ci_high"] and one_way["reading"] == "poor"
    assert one_way["n_items"] == one_way["n_available"] == 50
    # The ceiling is a median over clinicians, with their range: never printed as a confidence interval.
    assert ceiling["ci_method"] == "range over clinicians" and "not a confidence interval" in ceiling["note"]
    assert ceiling["ci_low"] <= ceiling["estimate"] <= ceiling["ci_high"] and ceiling["reading"] == ""


def synthetic_long(n_items: int = 20, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_items):
        truth = rng.normal()
        item, bench = f"i{i:02d}", "aci_bench" if i % 2 else "medi_qa"
        for rater, kind in [("c1", "clinician"), ("c2", "clinician"), ("jury", "jury"), ("gpt-4o", "judge")]:
            for c in CRITERIA:
                rows.append((item, rater, kind, c, float(np.clip(np.rint(3 + truth + rng.normal()), 1, 5)), bench))
        rows.append((item, "rougeL", "metric", "rougeL", float(1 / (1 + np.exp(-truth - rng.normal()))), bench))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "criterion", "score", "benchmark"])


def test_metrics_and_judges_sit_beside_the_clinicians() -> None:
    long = synthetic_long()
    table = agreement_table(long)
    assert set(table["comparison"]) == {
        "clinician-clinician",
        "all clinicians",
        "clinician ceiling",
        "jury-clinician",
        "judge:gpt-4o-clinician",
        "rougeL-clinician",
    }
    metric = table[table["comparison"] == "rougeL-clinician"]
    # One score per item, set against the clinicians' composite and each criterion.
    assert set(metric["criterion"]) == {"composite", *CRITERIA}
    assert metric["kappa_qw"].isna().all()
    got = row(table, "rougeL-clinician")
    clin = long[long["rater_kind"] == "clinician"]
    mean_clin = clin.groupby(["item_id", "rater_id"])["score"].mean().groupby("item_id").mean()
    rouge = long[long["rater_id"] == "rougeL"].set_index("item_id")["score"].loc[mean_clin.index]
    expected = icc_matrix(np.column_stack([zscore_within(mean_clin), zscore_within(rouge)]))
    assert got["estimate"] == pytest.approx(expected.set_index("type").loc["ICC3k", "icc"], abs=1e-12)
    assert got["n_ratings"] == 20 * 2 * 3 + 20
    assert not np.isnan(row(table, "judge:gpt-4o-clinician")["kappa_qw"])


def test_small_samples_give_nan_with_a_note_not_an_error() -> None:
    long = synthetic_long(n_items=4)  # two items per benchmark
    table = agreement_table(long, protocol="full", n_resamples=100)
    per_bench = table[table["benchmark"] == "aci_bench"]
    assert per_bench["estimate"].isna().all()
    assert per_bench["note"].str.contains("fewer than 3").all()
    pooled = row(table, "jury-clinician")
    assert pooled["n_items"] == 4 and not np.isnan(pooled["estimate"])


def test_medhelm_protocol_runs_fast_enough_for_a_page() -> None:
    import time

    start = time.perf_counter()
    agreement_table(medhelm_long(), protocol="full", n_resamples=2000)
    assert time.perf_counter() - start < 10
