"""The judge bias panel catches planted biases, with CIs that cover the planted values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medhelm_core.agreement.bias import (
    bias_panel,
    calibration_map,
    judge_pairs,
    leniency,
    model_vendor,
    scale_use,
    self_preference,
    verbosity,
)
from medhelm_core.errors import AgreementInputError

MODELS = ["openai_gpt-4o-2024-05-13", "anthropic/claude-3-7-sonnet-20250219", "meta/llama-3.3-70b-instruct",
          "google_gemini-1.5-pro-001"]
JUDGES = ["openai/gpt-4o-2024-05-13", "anthropic/claude-3-7-sonnet", "meta/llama-3.3-70b-instruct"]


def simulated_scores(seed: int = 5, n_items: int = 400, *, lenient: float = 0.0, self_pref: float = 0.0,
                     per_100_words: float = 0.0) -> tuple[pd.DataFrame, pd.Series]:
    """Two clinicians and three judges per item; the OpenAI judge gets ``self_pref`` on OpenAI outputs, every
    judge ``lenient`` and ``per_100_words`` of output. Scores are left continuous (a criterion mean)."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(3.5, 0.7, n_items)
    model = np.array(MODELS)[rng.integers(0, len(MODELS), n_items)]
    words = rng.integers(50, 600, n_items)
    rows = []
    for c in ("c1", "c2"):
        score = np.clip(truth + rng.normal(0, 0.5, n_items), 1, 5)
        rows += [(i, c, "clinician", "b", m, s) for i, (m, s) in enumerate(zip(model, score, strict=True))]
    for judge in JUDGES:
        planted = lenient + per_100_words * words / 100.0
        if judge.startswith("openai"):
            planted = planted + self_pref * (model_vendor_array(model) == "openai")
        score = truth + planted + rng.normal(0, 0.4, n_items)
        rows += [(i, judge, "judge", "b", m, s) for i, (m, s) in enumerate(zip(model, score, strict=True))]
    frame = pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "benchmark", "model", "score"])
    jury = frame[frame["rater_kind"] == "judge"].groupby(["item_id", "benchmark", "model"])["score"].mean()
    jury = jury.reset_index().assign(rater_id="jury", rater_kind="jury")
    return pd.concat([frame, jury], ignore_index=True), pd.Series(words, index=range(n_items))


def model_vendor_array(models: np.ndarray) -> np.ndarray:
    return np.array([model_vendor(m) for m in models])


def test_vendors_come_from_litellm_and_helm_names():
    assert [model_vendor(m) for m in MODELS] == ["openai", "anthropic", "meta", "google"]
    assert model_vendor("bedrock/anthropic.claude-3-sonnet") == "anthropic"
    assert model_vendor("meta-llama/Llama-3.3-70B-Instruct") == "meta"
    assert model_vendor("in-house-7b", {"in-house-7b": "acme"}) == "acme"
    assert model_vendor("in-house-7b") == ""


def test_a_plus_one_lenient_judge_is_caught_with_a_ci_covering_one():
    scores, _ = simulated_scores(lenient=1.0)
    table = leniency(judge_pairs(scores)).set_index("rater_id")
    for rater in [*JUDGES, "jury"]:
        low, high = table.loc[rater, ["ci_low", "ci_high"]]
        assert low < 1.0 < high and low > 0.5, rater
    fair = leniency(judge_pairs(simulated_scores(seed=6)[0])).set_index("rater_id")
    assert (fair["ci_low"] < 0).all() and (fair["ci_high"] > 0).all()


def test_self_preference_for_one_vendor_is_caught_with_a_ci_covering_the_planted_value():
    scores, _ = simulated_scores(seed=1, self_pref=0.8)
    table = self_preference(judge_pairs(scores)).set_index("rater_id")
    low, high = table.loc["openai/gpt-4o-2024-05-13", ["ci_low", "ci_high"]]
    assert low < 0.8 < high and low > 0.4
    for other in JUDGES[1:]:  # no planted preference: the CI covers zero
        assert table.loc[other, "ci_low"] < 0 < table.loc[other, "ci_high"], other
    assert "jury" not in table.index  # the jury mixes vendors


def test_verbosity_slope_recovers_the_planted_one():
    scores, words = simulated_scores(per_100_words=0.2)
    table = verbosity(judge_pairs(scores), words).set_index("rater_id")
    assert table.loc["jury", "ci_low"] < 0.2 < table.loc["jury", "ci_high"]
    assert table.loc["jury", "ci_low"] > 0.1
    panel = bias_panel(judge_pairs(scores), words)
    assert set(panel["effect"]) == {"leniency", "self_preference", "verbosity"}


def test_the_calibration_map_recovers_a_planted_monotone_distortion():
    rng = np.random.default_rng(11)
    jury = rng.uniform(1, 5, 600)

    def planted(x):  # the jury inflates the middle of the scale: clinicians read 3 where the jury says 4
        return 1 + 4 * ((x - 1) / 4) ** 2

    clinicians = planted(jury) + rng.normal(0, 0.3, jury.size)
    table, fit = calibration_map(jury, clinicians, grid=[1.5, 2.5, 3.5, 4.5], n_boot=100, seed=1)
    assert np.abs(table["expected"] - planted(table["machine"])).max() < 0.15
    truth = planted(table["machine"])
    assert ((table["low"] <= truth + 0.05) & (truth - 0.05 <= table["high"])).all()
    assert fit["cv_rmse"] < fit["raw_rmse"]
    with pytest.raises(AgreementInputError, match="at least"):
        calibration_map(jury[:3], clinicians[:3])


def test_scale_use_shows_a_jury_crowding_at_the_top():
    scores, _ = simulated_scores(lenient=1.0)
    scores["score"] = scores["score"].clip(1, 5)
    table = scale_use(scores).set_index("rater")
    assert table.loc["jury", "top_share"] > table.loc["clinicians", "top_share"] + 0.2
    assert table.loc["clinicians", ["1", "2", "3", "4", "5"]].sum() == pytest.approx(1.0)
