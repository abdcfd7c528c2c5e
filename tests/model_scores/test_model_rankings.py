"""Model means, paired differences and rankings: equal to hand computations, to scipy, and to a plain pandas loop
over the same resampled instances."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from medhelm_core.agreement.bootstrap import bootstrap_interval, resample_counts
from medhelm_core.model_scores import (
    item_scores,
    kendall_tau_b,
    model_differences,
    model_means,
    model_rankings,
    resample_means,
    win_rates,
)
from medhelm_core.model_scores.scores import percentile_intervals


def table_study(means: dict[str, dict[str, list[float]]], source: str = "jury") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Items and long scores from {benchmark: {model: scores on instances 0, 1, ...}}, one criterion."""
    items, long = [], []
    for bench, by_model in means.items():
        for model, values in by_model.items():
            for i, v in enumerate(values):
                item = f"{bench}-{model}-{i}"
                items.append((item, bench, f"{bench}-{i}", model))
                long.append((item, source, "clinician" if source == "c1" else "jury", "accuracy", v))
    return (pd.DataFrame(items, columns=["item_id", "benchmark", "instance_id", "model"]),
            pd.DataFrame(long, columns=["item_id", "rater_id", "rater_kind", "criterion", "score"]))


def test_tau_b_and_win_rates_equal_hand_computation_on_a_small_table():
    # Four models on two benchmarks; the clinicians' and the jury's means per benchmark (one instance each).
    clin = {"b1": {"A": [4.0], "B": [3.0], "C": [2.0], "D": [1.0]},
            "b2": {"A": [4.0], "B": [4.0], "C": [1.0], "D": [2.0]}}
    jury = {"b1": {"A": [3.0], "B": [4.0], "C": [2.0], "D": [1.0]},
            "b2": {"A": [4.0], "B": [3.0], "C": [2.0], "D": [1.0]}}
    items, c_long = table_study(clin, "c1")
    _, j_long = table_study(jury, "jury")
    r = resample_means(item_scores(pd.concat([c_long, j_long]), items), items, n_resamples=50)
    rankings = model_rankings(r)
    # Pooled means: clinicians A 4, B 3.5, C 1.5, D 1.5; jury A 3.5, B 3.5, C 2, D 1.
    # Pairs (6): AB: clin A>B, jury tie; AC: conc; AD: conc; BC: conc; BD: conc; CD: clin tie, jury C>D.
    # concordant 4, discordant 0; pairs untied in clinicians 5, in the jury 5: tau-b = 4 / sqrt(5 * 5) = 0.8.
    tau = rankings.tau.set_index(["source", "criterion"]).loc[("jury", "accuracy"), "tau_b"]
    assert tau == pytest.approx(0.8, abs=1e-12)
    # HELM win rates by clinicians: b1 A 1, B 2/3, C 1/3, D 0; b2 A (2 + 0.5)/3, B the same, C 0, D 1/3.
    wins = rankings.win_rates.query("source == 'clinicians' and criterion == 'accuracy'").set_index("model")["win_rate"]
    expected = {"A": (1 + 2.5 / 3) / 2, "B": (2 / 3 + 2.5 / 3) / 2, "C": (1 / 3 + 0) / 2, "D": (0 + 1 / 3) / 2}
    assert wins.to_dict() == pytest.approx(expected, abs=1e-12)
    # The same from the table of means alone.
    table = pd.DataFrame([(m, b, v[0]) for b, by in clin.items() for m, v in by.items()],
                         columns=["model", "benchmark", "mean"])
    assert win_rates(table).set_index("model")["win_rate"].to_dict() == pytest.approx(expected, abs=1e-12)


def test_the_vectorised_tau_b_equals_scipy_on_every_resample_ties_included():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, (400, 7)).astype(float)  # many ties
    y = x + rng.integers(-2, 3, (400, 7))
    ours = kendall_tau_b(x, y)
    theirs = np.array([stats.kendalltau(a, b).statistic for a, b in zip(x, y, strict=True)])
    assert np.allclose(ours, theirs, equal_nan=True, atol=1e-12)
    assert np.isnan(kendall_tau_b(np.ones(4), np.arange(4.0)))  # a constant order has no tau


def test_the_reported_tau_is_scipys_on_the_pooled_means():
    rng = np.random.default_rng(5)
    clin = {"b": {f"m{k}": list(3 + 0.2 * k + rng.normal(0, 0.8, 30)) for k in range(6)}}
    jury = {"b": {f"m{k}": list(3 + 0.1 * k + rng.normal(0, 0.8, 30)) for k in range(6)}}
    items, c_long = table_study(clin, "c1")
    _, j_long = table_study(jury, "jury")
    r = resample_means(item_scores(pd.concat([c_long, j_long]), items), items, n_resamples=300, seed=2)
    means = model_means(r).query("benchmark == 'pooled' and criterion == 'accuracy'")
    pivot = means.pivot(index="model", columns="source", values="mean")
    tau = model_rankings(r).tau.query("criterion == 'accuracy'").iloc[0]
    assert tau["tau_b"] == pytest.approx(stats.kendalltau(pivot["clinicians"], pivot["jury"]).statistic, abs=1e-12)
    assert tau["ci_low"] <= tau["tau_b"] <= tau["ci_high"]


def test_bootstrap_means_equal_a_pandas_loop_over_the_same_resampled_instances():
    # Two benchmarks, three models sharing instances, clinicians on some items only (the pooled mean weighs
    # each scored item by its cell's items per scored item).
    rng = np.random.default_rng(11)
    rows, long = [], []
    for bench, n in (("b1", 7), ("b2", 5)):
        for i in range(n):
            hard = rng.normal()
            for m in ("m1", "m2", "m3"):
                item = f"{bench}{i}{m}"
                rows.append((item, bench, f"i{i}", m))
                long.append((item, "jury", "jury", "accuracy", 3 + hard + rng.normal(0, .3)))
                if rng.random() < 0.6:
                    long.append((item, "c1", "clinician", "accuracy", 3 + hard + rng.normal(0, .5)))
    items = pd.DataFrame(rows, columns=["item_id", "benchmark", "instance_id", "model"])
    scores = item_scores(pd.DataFrame(long, columns=["item_id", "rater_id", "rater_kind", "criterion", "score"]),
                         items)
    r = resample_means(scores, items, n_resamples=40, seed=7)
    gen = np.random.default_rng(7)
    counts = {b: np.concatenate(list(resample_counts(items[items.benchmark == b].instance_id.nunique(), 40, gen)))
              for b in ("b1", "b2")}
    frame = scores[scores["criterion"] == "accuracy"].merge(items.groupby(["model", "benchmark"]).size()
                                                            .rename("n_cell").reset_index())
    frame = frame.assign(w=frame["n_cell"] / frame.groupby(["model", "benchmark", "source"])["score"]
                         .transform("size"))
    for b_row in range(40):
        times = pd.concat([pd.DataFrame({"benchmark": b, "instance_id": pd.factorize(
            items[items.benchmark == b].instance_id)[1], "times": counts[b][b_row]}) for b in counts])
        sample = frame.merge(times, on=["benchmark", "instance_id"])
        sample = sample.assign(wt=sample.w * sample.times, wx=sample.w * sample.times * sample.score)
        pooled = sample.groupby(["model", "source"])[["wt", "wx"]].sum()
        for (model, source), row in pooled.iterrows():
            column = r.column(model, "pooled", source, "accuracy")
            assert r.resamples[b_row, column] == pytest.approx(row.wx / row.wt, abs=1e-12)


def test_paired_differences_are_narrower_than_the_models_own_intervals_when_instances_drive_the_scores():
    rng = np.random.default_rng(2)
    hard = rng.normal(0, 1.0, 60)
    jury = {"b": {"m1": list(3.3 + hard + rng.normal(0, .2, 60)), "m2": list(3.0 + hard + rng.normal(0, .2, 60))}}
    items, long = table_study(jury, "jury")
    r = resample_means(item_scores(long, items), items, n_resamples=1000)
    means = model_means(r).query("benchmark == 'pooled' and criterion == 'accuracy'").set_index("model")
    diff = model_differences(r).query("benchmark == 'pooled' and criterion == 'accuracy'").iloc[0]
    assert diff["verdict"] == "m1 higher" and diff["n_paired"] == 60
    assert diff["ci_high"] - diff["ci_low"] < 0.5 * (means.loc["m1", "ci_high"] - means.loc["m1", "ci_low"])


def test_all_intervals_at_once_equal_bootstrap_interval_column_by_column():
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(500, 6))
    draws[3, 2] = np.nan
    estimates = draws.mean(axis=0)
    estimates[5] = np.nan
    low, high, notes = percentile_intervals(estimates, draws)
    for i in range(6):
        one = bootstrap_interval(estimates[i], draws[:, i], method="percentile", undefined="a score")
        assert (low[i], high[i]) == pytest.approx((one.low, one.high), nan_ok=True)
        assert notes[i] == one.note
