"""Agreement over all clinicians when each item has its own set of raters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from scipy import stats

from medhelm_core.agreement import icc1_unbalanced, krippendorff_alpha, leave_one_clinician_out
from medhelm_core.agreement.icc import PINGOUIN_NAMES, icc_matrix
from medhelm_core.agreement.pairs import zscore_within
from medhelm_core.errors import AgreementInputError

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", example C: 4 observers, 12 units,
# missing values; published alphas: interval 0.849, ordinal 0.815.
KRIPPENDORFF_EXAMPLE = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def krippendorff_long() -> pd.DataFrame:
    rows = [
        (f"u{u:02d}", f"obs{o}", v)
        for o, line in enumerate(KRIPPENDORFF_EXAMPLE)
        for u, v in enumerate(line)
        if v is not None
    ]
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "score"])


def unbalanced_ratings(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(30):
        truth = rng.normal()
        raters = rng.choice(8, size=int(rng.integers(1, 5)), replace=False)
        rows += [(f"i{i:02d}", f"c{r}", round(3 + truth + rng.normal(scale=0.7), 2)) for r in raters]
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "score"])


def test_one_way_icc_equals_pingouin_on_balanced_data() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(20, 1)) + rng.normal(size=(20, 3))
    long = pd.DataFrame(
        {
            "item_id": np.repeat([f"i{i:02d}" for i in range(20)], 3),
            "rater_id": np.tile(["a", "b", "c"], 20),
            "score": x.ravel(),
        }
    )
    ours = icc1_unbalanced(long).set_index("type")
    ref = pg.intraclass_corr(long, "item_id", "rater_id", "score")
    ref = ref.set_index(ref["Type"].map(PINGOUIN_NAMES))
    ci_col = "CI95" if "CI95" in ref.columns else "CI95%"
    assert ours.loc["ICC1", "k0"] == pytest.approx(3.0)
    for ours_t, ref_t in [("ICC1", "ICC1"), ("ICC1k", "ICC1k")]:
        assert ours.loc[ours_t, "icc"] == pytest.approx(ref.loc[ref_t, "ICC"], abs=1e-9)
        assert ours.loc[ours_t, "ci_low"] == pytest.approx(ref.loc[ref_t, ci_col][0], abs=0.005 + 1e-9)
        assert ours.loc[ours_t, "ci_high"] == pytest.approx(ref.loc[ref_t, ci_col][1], abs=0.005 + 1e-9)
    assert ours.loc["ICC1", "icc"] == pytest.approx(icc_matrix(x).set_index("type").loc["ICC1", "icc"], abs=1e-12)


def test_one_way_icc_uses_the_unbalanced_anova_with_adjusted_group_size() -> None:
    long = unbalanced_ratings()
    out = icc1_unbalanced(long).set_index("type")
    groups = [g["score"].to_numpy() for _, g in long.groupby("item_id") if len(g) >= 2]
    n, big_n = len(groups), sum(len(g) for g in groups)
    grand = np.concatenate(groups).mean()
    msb = sum(len(g) * (g.mean() - grand) ** 2 for g in groups) / (n - 1)
    msw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (big_n - n)
    k0 = (big_n - sum(len(g) ** 2 for g in groups) / big_n) / (n - 1)
    assert out.loc["ICC1", "k0"] == pytest.approx(k0, abs=1e-12)
    assert out.loc["ICC1", "icc"] == pytest.approx((msb - msw) / (msb + (k0 - 1) * msw), abs=1e-12)
    assert out.loc["ICC1k", "icc"] == pytest.approx((msb - msw) / msb, abs=1e-12)
    # The F test is the one-way ANOVA's.
    assert out.loc["ICC1", "F"] == pytest.approx(stats.f_oneway(*groups).statistic, rel=1e-10)
    assert out.loc["ICC1", "ci_low"] < out.loc["ICC1", "icc"] < out.loc["ICC1", "ci_high"]


def test_one_way_icc_says_which_items_and_raters_it_used() -> None:
    long = unbalanced_ratings()
    out = icc1_unbalanced(long).iloc[0]
    sizes = long.groupby("item_id").size()
    assert out["items_used"] == tuple(sorted(sizes.index[sizes >= 2]))
    assert out["n_items"] == len(out["items_used"])
    assert out["n_ratings"] == int(sizes[sizes >= 2].sum())
    assert out["raters_used"] == tuple(sorted(long[long["item_id"].isin(out["items_used"])]["rater_id"].unique()))


def test_one_way_icc_with_fewer_than_three_items_is_nan_with_a_note() -> None:
    long = pd.DataFrame(
        {
            "item_id": ["a", "a", "b", "b", "c"],
            "rater_id": ["x", "y", "x", "y", "x"],
            "score": [1.0, 2.0, 3.0, 3.0, 5.0],
        }
    )
    out = icc1_unbalanced(long)
    assert out["icc"].isna().all()
    assert out["note"].str.contains("fewer than 3 items").all()


@pytest.mark.parametrize(("level", "published"), [("interval", 0.849), ("ordinal", 0.815)])
def test_krippendorff_alpha_reproduces_krippendorffs_published_example(level: str, published: float) -> None:
    out = krippendorff_alpha(krippendorff_long(), levels=[level]).iloc[0]
    assert out["method"] == f"alpha_{level}"
    assert round(out["estimate"], 3) == published
    # The unit with a single value is not pairable and is reported as unused.
    assert out["n_items"] == 11 and "u11" not in out["items_used"]
    assert out["raters_used"] == ("obs0", "obs1", "obs2", "obs3")


def test_krippendorff_alpha_with_too_few_items_is_nan_with_a_note() -> None:
    out = krippendorff_alpha(krippendorff_long().query("item_id in ['u00', 'u01']"))
    assert out["estimate"].isna().all()
    assert out["note"].str.contains("fewer than 3 items").all()


def clinician_long() -> pd.DataFrame:
    scores = {  # item: {clinician: accuracy}
        "i1": {"c1": 1, "c2": 2, "c3": 1},
        "i2": {"c1": 3, "c2": 3},
        "i3": {"c1": 5, "c3": 4, "c4": 5},
        "i4": {"c1": 2, "c4": 3},
        "i5": {"c2": 4, "c3": 5},
        "i6": {"c1": 4},
        "i7": {"c2": 2, "c4": 1},
    }
    rows = [(item, rater, float(s)) for item, by in scores.items() for rater, s in by.items()]
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "score"]).assign(
        rater_kind="clinician", criterion="accuracy", benchmark="medi_qa"
    )


def test_leave_one_clinician_out_compares_each_clinician_with_the_mean_of_the_others() -> None:
    out = leave_one_clinician_out(clinician_long(), "accuracy").set_index("clinician")
    c1 = out.loc["c1"]
    # c1 shares i1..i4 with others; i6 has no one else.
    assert c1["items_used"] == ("i1", "i2", "i3", "i4") and c1["n_items"] == 4
    assert c1["others_used"] == ("c2", "c3", "c4")
    own = np.array([1, 3, 5, 2.0])
    rest = np.array([1.5, 3, 4.5, 3.0])
    assert c1["pearson_r"] == pytest.approx(stats.pearsonr(own, rest).statistic, abs=1e-12)
    assert c1["spearman_rho"] == pytest.approx(stats.spearmanr(own, rest).statistic, abs=1e-12)
    expected = icc_matrix(np.column_stack([zscore_within(own), zscore_within(rest)])).set_index("type")
    assert c1["icc3k"] == pytest.approx(expected.loc["ICC3k", "icc"], abs=1e-12)
    assert c1["n_ratings"] == 4 + 6  # its own 4 and the others' 2 + 1 + 2 + 1
    assert list(out.index) == ["c1", "c2", "c3", "c4"]


def test_leave_one_clinician_out_with_too_few_shared_items_is_nan_with_a_note() -> None:
    out = leave_one_clinician_out(clinician_long(), "accuracy").set_index("clinician")
    assert out.loc["c3", "n_items"] == 3
    assert out.loc["c4", "n_items"] == 3
    two = leave_one_clinician_out(clinician_long().query("item_id in ['i1', 'i2']"), "accuracy")
    assert two["icc3k"].isna().all() and two["note"].str.contains("fewer than 3 shared items").all()


def test_incomplete_designs_validate_their_input() -> None:
    with pytest.raises(AgreementInputError, match="lacks column"):
        icc1_unbalanced(pd.DataFrame({"item_id": ["a"], "score": [1.0]}))
    with pytest.raises(AgreementInputError, match="rater_kind"):
        leave_one_clinician_out(clinician_long().drop(columns="rater_kind"), "accuracy")


@pytest.mark.parametrize("standardize", [True, False])
def test_every_clinician_against_the_others_equals_pingouin_and_scipy_pair_by_pair(standardize: bool) -> None:
    # Twelve clinicians, 2 or 3 per item, 1-5 scores with many ties; c00 always gives 3 (constant), c01 rates
    # only two shared items. The batched figures must equal each pair computed on its own.
    rng = np.random.default_rng(7)
    rows = []
    for i in range(150):
        truth = rng.uniform(1, 5)
        for c in rng.choice(12, size=rng.integers(2, 4), replace=False):
            if c == 1 and i > 1:
                continue
            score = 3.0 if c == 0 else float(np.clip(round(truth + rng.normal(0, 0.8)), 1, 5))
            rows.append((f"i{i:03d}", f"c{c:02d}", score))
    long = pd.DataFrame(rows, columns=["item_id", "rater_id", "score"]).assign(
        rater_kind="clinician", criterion="accuracy", benchmark="b")
    out = leave_one_clinician_out(long, "accuracy", standardize=standardize).set_index("clinician")
    wide = long.pivot(index="item_id", columns="rater_id", values="score")
    for rater, row in out.iterrows():
        shared = wide[rater].notna() & (wide.notna().sum(axis=1) > 1)
        own = wide.loc[shared, rater].to_numpy()
        rest = wide.loc[shared].drop(columns=rater).mean(axis=1).to_numpy()
        assert row["items_used"] == tuple(sorted(wide.index[shared])) and row["n_items"] == own.size
        if own.size < 3:
            assert np.isnan(row["icc3k"]) and "fewer than 3" in row["note"]
            continue
        if np.ptp(own) == 0:  # c00: no correlation; z-scores undefined
            assert np.isnan(row["pearson_r"]) and np.isnan(row["spearman_rho"])
            if standardize:
                assert np.isnan(row["icc3k"]) and row["note"] == "constant scores on the shared items"
                continue
        else:
            assert row["pearson_r"] == pytest.approx(stats.pearsonr(own, rest).statistic, abs=1e-12)
            assert row["spearman_rho"] == pytest.approx(stats.spearmanr(own, rest).statistic, abs=1e-12)
        a, b = (zscore_within(own), zscore_within(rest)) if standardize else (own, rest)
        pair = pd.DataFrame({"item": np.tile(np.arange(own.size), 2), "rater": np.repeat(["x", "y"], own.size),
                             "score": np.concatenate([a, b])})
        ref = pg.intraclass_corr(pair, targets="item", raters="rater", ratings="score")
        ref = ref.assign(Type=ref["Type"].map(PINGOUIN_NAMES)).set_index("Type")
        assert row["icc3k"] == pytest.approx(ref.loc["ICC3k", "ICC"], abs=1e-9)
        ci = ref.loc["ICC3k", "CI95" if "CI95" in ref.columns else "CI95%"]  # pingouin rounds it to 2 places
        assert [row["ci_low"], row["ci_high"]] == pytest.approx(list(ci), abs=0.006)
        one = icc_matrix(np.column_stack([a, b])).set_index("type").loc["ICC3k"]  # the pair on its own
        assert [row["ci_low"], row["ci_high"]] == pytest.approx([one["ci_low"], one["ci_high"]], abs=1e-9)
    assert out["icc3k"].notna().sum() >= 9
