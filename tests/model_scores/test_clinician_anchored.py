"""Clinician-anchored scores (PPI++): what ppi_py gives, valid coverage when the jury is biased, a refusal where
the rated items are not a random sample, and how many more ratings."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from medhelm_core.model_scores import clinician_anchored, item_scores, ratings_needed, sampling_status
from medhelm_core.model_scores.anchored import NOT_RANDOM, ppi

ppi_py = ppi()  # imported as the product does: ppi_py would switch every warning off for the whole run


def simulated(n_models: int, n_items: int, n_rated: int, seed: int, bias: float = 0.5, benchmarks: int = 1,
              rated_share: tuple[float, ...] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """``n_models`` models (each a study of its own), clinicians = quality + noise, jury = quality + bias + noise;
    a random ``n_rated`` of each model's items rated (or a share per benchmark). Returns items with the design,
    the long scores, and each model's true mean."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(2.5, 4.0, n_models)
    model = np.repeat(np.arange(n_models), n_items)
    index = np.tile(np.arange(n_items), n_models)
    bench = index % benchmarks
    quality = truth[model] + rng.normal(0, 0.8, model.size)
    if rated_share is None:
        order = rng.random((n_models, n_items)).argsort(axis=1)
        rated = (order < n_rated).ravel()
    else:
        rated = rng.random(model.size) < np.asarray(rated_share)[bench]
    clin = quality + rng.normal(0, 0.4, model.size)
    jury = quality + bias + rng.normal(0, 0.4, model.size)
    design = pd.DataFrame({"item_id": np.arange(model.size), "benchmark": [f"b{b}" for b in bench],
                           "instance_id": [f"i{i}" for i in index], "model": [f"model{m:03d}" for m in model],
                           "rated": rated, "assigned": True})
    long = pd.concat([
        pd.DataFrame({"item_id": design["item_id"], "rater_id": "jury", "rater_kind": "jury", "criterion": "accuracy",
                      "score": jury}),
        pd.DataFrame({"item_id": design["item_id"][rated], "rater_id": "c1", "rater_kind": "clinician",
                      "criterion": "accuracy", "score": clin[rated]}),
    ], ignore_index=True)
    return design, long, truth


def pooled(table: pd.DataFrame, criterion: str = "accuracy") -> pd.DataFrame:
    return table[(table["benchmark"] == "pooled") & (table["criterion"] == criterion)].set_index("model")


def test_the_estimates_are_what_ppi_py_gives_when_called_directly():
    design, long, _ = simulated(1, 300, 60, seed=1)
    scores = item_scores(long, design)
    row = pooled(clinician_anchored(scores, sampling_status(design))).iloc[0]
    rated = design["rated"].to_numpy()
    by_item = long.pivot_table(index="item_id", columns="rater_kind", values="score")
    y, f = by_item.loc[rated, "clinician"].to_numpy(), by_item.loc[rated, "jury"].to_numpy()
    f_u = by_item.loc[~rated, "jury"].to_numpy()
    low, high = ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05)
    assert (row.anchored_low, row.anchored_high) == pytest.approx((low[0], high[0]), abs=1e-12)
    assert row.anchored == pytest.approx(ppi_py.ppi_mean_pointestimate(y, f, f_u)[0], abs=1e-12)
    assert (row.clinician_low, row.clinician_high) == pytest.approx(ppi_py.classical_mean_ci(y, alpha=0.05), abs=1e-12)
    assert (row.jury_low, row.jury_high) == pytest.approx(
        ppi_py.classical_mean_ci(np.r_[f, f_u], alpha=0.05), abs=1e-12)
    # lambda and the effective number of ratings follow from the same fit
    theta = lambda lam: ppi_py.ppi_mean_pointestimate(y, f, f_u, lam=lam)[0]  # noqa: E731
    assert row.anchored == pytest.approx(theta(row.lam), abs=1e-12)
    ratio = ((row.clinician_high - row.clinician_low) / (row.anchored_high - row.anchored_low)) ** 2
    assert row.n_effective == pytest.approx(60 * ratio) and row.n_effective > 60


def test_benchmarks_rated_at_different_rates_are_weighted_back_as_ppi_py_does_with_weights():
    design, long, _ = simulated(1, 400, 0, seed=4, benchmarks=2, rated_share=(0.5, 0.1))
    row = pooled(clinician_anchored(item_scores(long, design), sampling_status(design))).iloc[0]
    by_item = long.pivot_table(index="item_id", columns="rater_kind", values="score").join(
        design.set_index("item_id")[["benchmark", "rated"]])
    lab, unl = by_item[by_item["rated"]], by_item[~by_item["rated"]]
    share = by_item.groupby("benchmark").size() / len(by_item)
    w = (lab["benchmark"].map(share) / lab["benchmark"].map(lab.groupby("benchmark").size() / len(lab))).to_numpy()
    w_u = (unl["benchmark"].map(share) / unl["benchmark"].map(unl.groupby("benchmark").size() / len(unl))).to_numpy()
    y, f, f_u = lab["clinician"].to_numpy(), lab["jury"].to_numpy(), unl["jury"].to_numpy()
    theta = ppi_py.ppi_mean_pointestimate(y, f, f_u, w=w, w_unlabeled=w_u)[0]
    assert row.anchored == pytest.approx(theta, abs=1e-12)
    # the interval: ppi_py on the scores centred on the estimate (its weighted standard error is then that of a
    # weighted mean, not of weighted raw scores)
    low, high = ppi_py.ppi_mean_ci(y - theta, f - theta, f_u - theta, alpha=0.05, w=w, w_unlabeled=w_u)
    assert (row.anchored_low, row.anchored_high) == pytest.approx((low[0] + theta, high[0] + theta), abs=1e-12)
    raw = ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05, w=w, w_unlabeled=w_u)
    assert row.anchored_high - row.anchored_low < raw[1][0] - raw[0][0]


def test_over_200_studies_the_anchored_interval_covers_the_truth_and_the_biased_jury_does_not():
    # 200 simulated studies (one model each) whose jury adds +0.5 to every score; the clinicians rate 250 of 1,000.
    design, long, truth = simulated(200, 1000, 250, seed=20)
    table = pooled(clinician_anchored(item_scores(long, design), sampling_status(design)))
    true_mean = pd.Series(truth, index=[f"model{m:03d}" for m in range(200)])
    covered = ((table["anchored_low"] <= true_mean) & (true_mean <= table["anchored_high"])).mean()
    jury = ((table["jury_low"] <= true_mean) & (true_mean <= table["jury_high"])).mean()
    clinicians = ((table["clinician_low"] <= true_mean) & (true_mean <= table["clinician_high"])).mean()
    assert 0.93 <= covered <= 0.97
    assert jury < 0.2 and 0.9 <= clinicians <= 0.99
    narrower = (table["anchored_high"] - table["anchored_low"]) < (table["clinician_high"] - table["clinician_low"])
    assert narrower.mean() > 0.9  # the jury tracks the clinicians, so it narrows the interval


def test_ratings_that_were_not_drawn_at_random_get_a_refusal_not_an_estimate():
    design, long, _ = simulated(2, 40, 10, seed=3)
    design.loc[design["model"] == "model000", "assigned"] = False  # imported ratings: chosen elsewhere
    status = sampling_status(design)
    assert status.set_index("model").loc["model000", "status"] == NOT_RANDOM
    table = pooled(clinician_anchored(item_scores(long, design), status))
    assert np.isnan(table.loc["model000", "anchored"]) and "not a random sample" in table.loc["model000", "note"]
    assert np.isfinite(table.loc["model001", "anchored"])


def test_every_item_rated_gives_the_clinicians_mean_and_says_the_jury_adds_nothing():
    design, long, _ = simulated(1, 30, 30, seed=5)
    row = pooled(clinician_anchored(item_scores(long, design), sampling_status(design))).iloc[0]
    assert row.anchored == pytest.approx(row.clinician_mean) and row.n_effective == pytest.approx(30)
    assert "the jury adds nothing" in row.note


def test_more_ratings_needed_match_ppi_pys_power_analysis_and_the_closed_form():
    design, long, _ = simulated(1, 2000, 80, seed=6, bias=0.3)
    need = ratings_needed(item_scores(long, design), sampling_status(design), half_width=0.08).iloc[0]
    rated = design["rated"].to_numpy()
    by_item = long.pivot_table(index="item_id", columns="rater_kind", values="score")
    y, f = by_item.loc[rated, "clinician"].to_numpy(), by_item.loc[rated, "jury"].to_numpy()
    n0 = math.ceil((1.959963984540054 * np.std(y, ddof=1) / 0.08) ** 2)
    power = ppi_py.ppi_mean_power(y, f, 1.0, 1e-9, effective_n=n0, n_max=2000)
    rho = power["ppi_corr"]
    assert need.needed_without_jury == n0 and need.more_without_jury == n0 - 80
    assert need.needed_with_jury == power["n"] == round(n0 * 2000 * (1 - rho**2) / (2000 - rho**2 * n0))
    assert need.needed_with_jury < n0 / 2  # a good jury saves most of the ratings


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_jury_that_matches_the_few_rated_items_exactly_gets_a_note_not_a_crash(sign):
    # Three rated items on a line: ppi_py's power analysis refuses a correlation of +/-1.
    design, long, _ = simulated(1, 40, 3, seed=1)
    rated = design.loc[design["rated"], "item_id"]
    clin = long[(long["rater_kind"] == "clinician")].set_index("item_id")["score"]
    exact = long["item_id"].isin(rated) & (long["rater_kind"] == "jury")
    long.loc[exact, "score"] = 3.0 + sign * (long.loc[exact, "item_id"].map(clin) - 3.0) / 2
    need = ratings_needed(item_scores(long, design), sampling_status(design), half_width=0.5).iloc[0]
    assert need.ppi_corr == sign and np.isnan(need.needed_with_jury) and np.isnan(need.more_with_jury)
    assert "follow the clinicians' exactly on these 3 rated items" in need.note
    assert need.needed_without_jury > 0  # the plan without the jury still stands
