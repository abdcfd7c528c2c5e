"""The pre-registered verdict: the Alternative Annotator Test and the equivalence test, on hand-checked tables,
on simulations with known truth and on MedHELM's own ratings (two clinicians per item)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from medhelm_core.agreement import rater_scores, validate_long
from medhelm_core.agreement.verdict import (
    FAIL,
    NOT_ENOUGH,
    PASS,
    VerdictProtocol,
    alt_test,
    design_sentences,
    equivalence_test,
    verdict_sentences,
    verdict_table,
)
from medhelm_core.errors import AgreementInputError

COLUMNS = ["item_id", "rater_id", "rater_kind", "score"]
# items x (clinician a, b, c, judge f): the hand computation below is read off this table
HAND = [(3, 3, 4, 3), (2, 2, 2, 3), (5, 4, 4, 4), (1, 2, 1, 1), (4, 5, 4, 4), (3, 1, 2, 2)]


def hand_frame() -> pd.DataFrame:
    rows = [(i, r, "clinician", float(s)) for i, row in enumerate(HAND) for r, s in zip("abc", row[:3], strict=True)]
    rows += [(i, "f", "judge", float(row[3])) for i, row in enumerate(HAND)]
    return pd.DataFrame(rows, columns=COLUMNS)


def test_alt_test_figures_equal_a_hand_computation():
    # Leaving each clinician out, -RMSE to the other two, judge vs left-out clinician, ties count for both:
    # a: item 0 tie, 1 clinician, 2 judge, 3 tie, 4 tie, 5 judge (a=3 vs (1,2): 1.58; f=2: 0.71)
    # b: item 0 tie, 1 clinician, 2 tie, 3 judge, 4 judge, 5 judge
    # c: item 0 judge, 1 clinician, 2 tie, 3 tie, 4 tie, 5 tie
    d = {"a": [0, 1, -1, 0, 0, -1], "b": [0, 1, 0, -1, -1, -1], "c": [-1, 1, 0, 0, 0, 0]}
    w_f = {"a": 5 / 6, "b": 5 / 6, "c": 5 / 6}
    eps = 0.2
    p = {}
    for j, diffs in d.items():
        x = np.array(diffs, dtype=float)
        t = (x.mean() - eps) / (x.std(ddof=1) / np.sqrt(len(x)))
        p[j] = stats.t.cdf(t, len(x) - 1)
    # Benjamini-Yekutieli: p_(k) * m * sum(1/i) / k, made monotone from the largest down, capped at 1
    order = sorted(p, key=p.get)
    c_m = 1 + 1 / 2 + 1 / 3
    raw = [p[j] * 3 * c_m / (k + 1) for k, j in enumerate(order)]
    adjusted = {j: min(1.0, min(raw[k:])) for k, j in enumerate(order)}

    res = alt_test(hand_frame(), "f", eps, 0.05, min_items=6, min_clinicians=3, min_shared_items=6)
    table = res.clinicians.set_index("clinician")
    for j in "abc":
        assert table.loc[j, "mean_difference"] == pytest.approx(np.mean(d[j]))
        assert table.loc[j, "rho_judge"] == pytest.approx(w_f[j])
        assert table.loc[j, "p"] == pytest.approx(p[j])
        assert table.loc[j, "p_adjusted"] == pytest.approx(adjusted[j])
    assert res.advantage_probability == pytest.approx(5 / 6)
    rejected = [j for j in "abc" if adjusted[j] <= 0.05]
    assert res.winning_rate == pytest.approx(len(rejected) / 3)
    assert res.verdict == (PASS if len(rejected) / 3 >= 0.5 else FAIL)


def test_alt_test_says_what_to_change_when_the_design_is_too_small():
    res = alt_test(hand_frame(), "f", min_items=50, min_clinicians=3, min_shared_items=30)
    assert res.verdict == NOT_ENOUGH
    assert any("6 items" in r and "50" in r for r in res.reasons)
    assert any("more items that another clinician also rates" in r for r in res.reasons)


def simulate(rng: np.random.Generator, judge_sd: float, n_items: int = 100, n_clin: int = 5) -> pd.DataFrame:
    truth = rng.normal(3.5, 0.9, n_items)
    rows = []
    for c in range(n_clin):
        s = np.clip(np.rint(truth + rng.normal(0, 0.8, n_items)), 1, 5)
        rows += [(i, f"c{c}", "clinician", v) for i, v in enumerate(s)]
    judge = np.clip(np.rint(truth + rng.normal(0, judge_sd, n_items)), 1, 5)
    rows += [(i, "judge", "judge", v) for i, v in enumerate(judge)]
    return pd.DataFrame(rows, columns=COLUMNS)


def test_a_clinician_like_judge_passes_at_the_stated_rate():
    # docs/verdict.md: with 100 items rated by 5 clinicians and epsilon 0.2, a judge that rates like one more
    # clinician passes about 72% of the time (1,400 simulations); a judge twice as noisy almost never does.
    rng = np.random.default_rng(17)
    like = [alt_test(simulate(rng, 0.8), "judge", 0.2, 0.05).verdict == PASS for _ in range(120)]
    noisy = [alt_test(simulate(rng, 1.6), "judge", 0.2, 0.05).verdict == PASS for _ in range(30)]
    assert abs(np.mean(like) - 0.72) < 3 * np.sqrt(0.72 * 0.28 / 120)
    assert np.mean(noisy) < 0.1


def test_equivalence_passes_a_clinician_like_judge_and_fails_a_far_one():
    rng = np.random.default_rng(3)
    like = equivalence_test(simulate(rng, 0.8, n_items=300, n_clin=2), "judge", delta=0.25)
    assert like.verdict == PASS and like.ci_low < 0 < like.ci_high + 0.25
    far = simulate(rng, 0.8, n_items=300, n_clin=2)
    far.loc[far["rater_id"] == "judge", "score"] = np.clip(far.loc[far["rater_id"] == "judge", "score"] + 1.5, 1, 5)
    res = equivalence_test(far, "judge", delta=0.25)
    assert res.verdict == FAIL and res.ci_low > 0.25


def test_protocol_round_trips_and_refuses_bad_values():
    protocol = VerdictProtocol.from_dict({"epsilon": "0.15", "tests": "alt_test", "min_items": "60"})
    assert VerdictProtocol.from_dict(protocol.to_dict()) == protocol
    assert protocol.tests == ("alt_test",) and protocol.min_items == 60
    with pytest.raises(AgreementInputError, match="unknown protocol setting"):
        VerdictProtocol.from_dict({"epsilonn": 0.1})
    with pytest.raises(AgreementInputError, match="epsilon"):
        VerdictProtocol(epsilon=1.5)
    with pytest.raises(AgreementInputError, match="unknown test"):
        VerdictProtocol.from_dict({"tests": "kappa"})


def medhelm_long(path) -> pd.DataFrame:
    """ratings.csv in the long contract: the clinicians, and the recorded jury means (one rater, no judges)."""
    df = pd.read_csv(path)
    criteria = ["accuracy", "completeness", "clarity"]
    keys = ["instance_id", "dataset_name"]
    clin = df.melt(id_vars=[*keys, "rater_id"], value_vars=criteria, var_name="criterion", value_name="score")
    jury = df.drop_duplicates("instance_id").melt(id_vars=keys, value_vars=[f"llm_{c}" for c in criteria],
                                                  var_name="criterion", value_name="score")
    jury = jury.assign(criterion=jury["criterion"].str.removeprefix("llm_"), rater_id="jury", rater_kind="jury")
    long = pd.concat([clin.assign(rater_kind="clinician"), jury], ignore_index=True)
    return long.rename(columns={"instance_id": "item_id", "dataset_name": "benchmark"})


def test_real_medhelm_ratings_get_an_honest_verdict(medhelm_ratings_csv):
    long = medhelm_long(medhelm_ratings_csv)
    protocol = VerdictProtocol()
    table = verdict_table(long, protocol)
    pooled = table[table["benchmark"] == "pooled"].set_index("test")
    # two clinicians per item, each clinician on about ten items: no clinician can be left out and tested
    assert pooled.loc["alt_test", "verdict"] == NOT_ENOUGH
    assert "more items that another clinician also rates" in pooled.loc["alt_test", "reason"]
    # the 58 doubly rated items do support the equivalence test
    assert pooled.loc["equivalence", "n_items"] == 58
    assert pooled.loc["equivalence", "verdict"] in (PASS, FAIL)
    assert set(table["rater_id"]) == {"jury"}  # recorded jury means only: no per-judge verdict to give
    words = " ".join(design_sentences(rater_scores(validate_long(long), "composite"), protocol))
    assert "cannot run the Alternative Annotator Test" in words and "single person" in words
    assert all(s.startswith(tuple(table["benchmark"])) for s in verdict_sentences(table, protocol))
