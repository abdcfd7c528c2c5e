"""Degenerate studies get a clear message, never a traceback or a NaN printed as a number: one model, a model
no clinician rated, no jury, constant scores, nothing at all."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medhelm_core.errors import NotEnoughRatingsError
from medhelm_core.figures import model_charts
from medhelm_core.figures.model_figures import (
    ModelOptions,
    anchored_display,
    differences_display,
    means_display,
    model_figures,
    needed_display,
    reading,
    tau_display,
    win_rates_display,
)
from medhelm_core.model_scores import item_scores

OPTIONS = ModelOptions(n_resamples=200)


def study(models: list[str], n: int = 12, rated: dict[str, int] | None = None, jury: bool = True,
          constant: bool = False, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    rows, long = [], []
    for m in models:
        for i in range(n):
            item = f"{m}-{i}"
            rows.append((item, "b1" if i % 2 else "b2", f"i{i}", m, i < (rated or {}).get(m, n // 2)))
            for c in ("accuracy", "clarity"):
                value = 4.0 if constant else float(rng.integers(1, 6))
                if jury:
                    long.append((item, "jury", "jury", c, value))
                if rows[-1][-1]:
                    long.append((item, "c1", "clinician", c, 4.0 if constant else float(rng.integers(1, 6))))
    design = pd.DataFrame(rows, columns=["item_id", "benchmark", "instance_id", "model", "rated"]).assign(
        assigned=True, drawn=False)
    scores = item_scores(pd.DataFrame(long, columns=["item_id", "rater_id", "rater_kind", "criterion", "score"]),
                         design, ["accuracy", "clarity"])
    return scores, design


def shown(figs) -> list[pd.DataFrame]:  # noqa: ANN001 - ModelFigures
    return [anchored_display(figs.anchored), means_display(figs.means), differences_display(figs.differences),
            tau_display(figs.rankings.tau), win_rates_display(figs.rankings.win_rates), needed_display(figs.needed)]


def no_nan_printed(figs) -> None:  # noqa: ANN001 - ModelFigures
    for table in shown(figs):
        text = table.to_string()
        assert "nan" not in text.lower().replace("n/a", ""), text
    for sentence in reading(figs):
        assert "nan" not in sentence.lower()


def test_one_model_is_described_but_not_ranked():
    figs = model_figures(*study(["solo"]), OPTIONS)
    assert any("Only one model (solo)" in m for m in figs.messages)
    assert figs.differences.empty and tau_display(figs.rankings.tau).empty
    assert len(anchored_display(figs.anchored)) == 1
    no_nan_printed(figs)
    model_charts.model_score_chart(figs.anchored).to_dict()  # draws


def test_a_model_without_clinician_ratings_is_named_and_left_out_of_the_comparison():
    figs = model_figures(*study(["a", "b", "c"], rated={"a": 6, "b": 6, "c": 0}), OPTIONS)
    assert any("No clinician ratings for c" in m for m in figs.messages)
    row = figs.anchored.query("model == 'c' and benchmark == 'pooled' and criterion == 'composite'").iloc[0]
    assert np.isnan(row["anchored"]) and row["note"] == "no clinician ratings yet"
    assert figs.rankings.tau.query("criterion == 'composite'").iloc[0]["n_models"] == 2
    no_nan_printed(figs)


def test_no_clinician_ratings_at_all_says_there_is_nothing_to_anchor_on():
    figs = model_figures(*study(["a", "b"], rated={"a": 0, "b": 0}), OPTIONS)
    assert figs.messages[0].startswith("No clinician ratings yet")
    assert figs.anchored.empty and figs.rankings.tau.empty
    assert not means_display(figs.means).empty  # the jury's means are still there
    no_nan_printed(figs)


def test_no_jury_says_so_and_keeps_the_clinicians_means():
    figs = model_figures(*study(["a", "b"], jury=False), OPTIONS)
    assert any(m.startswith("No jury scores") for m in figs.messages)
    assert set(figs.means["source"]) == {"clinicians"}
    no_nan_printed(figs)


def test_constant_scores_give_no_interval_and_say_why():
    figs = model_figures(*study(["a", "b"], constant=True), OPTIONS)
    row = figs.anchored.query("model == 'a' and benchmark == 'pooled' and criterion == 'composite'").iloc[0]
    assert np.isnan(row["anchored_low"]) and "same score" in row["note"]
    tau = figs.rankings.tau.query("criterion == 'composite'").iloc[0]
    assert np.isnan(tau["tau_b"]) and "same score" in tau["note"]
    need = figs.needed.query("model == 'a' and criterion == 'composite'").iloc[0]
    assert "same score" in need["note"]
    no_nan_printed(figs)
    assert any("cannot be compared" in s for s in reading(figs))


def test_nothing_to_describe_is_a_clear_error():
    scores, design = study(["a"])
    with pytest.raises(NotEnoughRatingsError, match="no items"):
        model_figures(scores, design.iloc[0:0], OPTIONS)
    with pytest.raises(NotEnoughRatingsError, match="nothing to say"):
        model_figures(scores.iloc[0:0], design, OPTIONS)
