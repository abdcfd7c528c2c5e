"""Degenerate data gives NaN with a reason or a clear error: never a crash, never a silent 1.0."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from medhelm_core.agreement import agreement_table, bootstrap_icc, icc_table, validate_long
from medhelm_core.errors import AgreementInputError

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")
CLINICIANS_AND_JURY = [("c1", "clinician"), ("c2", "clinician"), ("jury", "jury")]


def study_long(
    n_items: int,
    raters: list[tuple[str, str]] = CLINICIANS_AND_JURY,
    score: Callable[[int, str, str], float] = lambda i, r, c: float(1 + (i * len(r) + len(c)) % 5),
) -> pd.DataFrame:
    rows = [
        (f"i{i}", rater, kind, c, score(i, rater, c), "medi_qa")
        for i in range(n_items)
        for rater, kind in raters
        for c in ("accuracy", "clarity")
    ]
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "criterion", "score", "benchmark"])


def long_icc(x: np.ndarray) -> pd.DataFrame:
    n, k = x.shape
    return pd.DataFrame(
        {
            "item_id": np.repeat([f"i{i}" for i in range(n)], k),
            "rater_id": np.tile([f"r{j}" for j in range(k)], n),
            "score": x.ravel(),
        }
    )


def assert_nan_with_reasons(table: pd.DataFrame, value: str = "estimate") -> None:
    nan = table[value].isna()
    assert nan.any()
    assert (table.loc[nan, "note"].str.len() > 0).all(), table.loc[nan & (table["note"] == "")]
    assert not (table[value] == 1.0).any()


@pytest.mark.parametrize("protocol", ["medhelm", "full"])
@pytest.mark.parametrize(
    ("case", "long"),
    [
        ("one item", study_long(1)),
        ("two items", study_long(2)),
        ("zero variance", study_long(8, score=lambda i, r, c: 3.0)),
        ("raters differ but items do not", study_long(8, score=lambda i, r, c: float(len(r) % 5 + 1))),
    ],
)
def test_degenerate_studies_give_nan_with_a_reason(case: str, long: pd.DataFrame, protocol: str) -> None:
    table = agreement_table(long, protocol=protocol, n_resamples=100)
    assert table["estimate"].isna().all(), case
    assert_nan_with_reasons(table)


def test_a_study_with_one_clinician_has_no_clinician_baseline_but_a_jury_figure() -> None:
    long = study_long(8, raters=[("c1", "clinician"), ("jury", "jury")])
    table = agreement_table(long, protocol="full", n_resamples=100)
    clin = table[table["comparison"] == "clinician-clinician"]
    assert clin["estimate"].isna().all()
    assert clin["note"].str.contains("no two clinicians share an item|fewer than 3 items rated at least twice").all()
    assert table.loc[table["comparison"] == "jury-clinician", "estimate"].notna().any()


@pytest.mark.parametrize(
    ("x", "reason"),
    [
        (np.arange(6.0).reshape(6, 1), "fewer than 2 raters"),
        (np.array([[1.0, 2.0]]), "fewer than 3 items"),
        (np.full((6, 3), 4.0), "no variance between items"),
        (np.tile([[1.0, 3.0, 5.0]], (6, 1)), "no variance between items"),
    ],
    ids=["one rater", "one item", "zero variance", "constant items"],
)
def test_degenerate_matrices_give_nan_with_a_reason_in_icc_and_bootstrap(x: np.ndarray, reason: str) -> None:
    table = icc_table(long_icc(x))
    assert table["icc"].isna().all() and table["note"].str.contains(reason).all()
    boot = bootstrap_icc(x, n_resamples=100)
    assert boot[["estimate", "ci_low", "ci_high"]].isna().all().all() and boot["note"].str.contains(reason).all()


def test_when_no_item_has_every_rater_the_icc_is_nan_with_a_reason() -> None:
    # Each rater scored different items: listwise deletion leaves nothing, as in pingouin.
    long = pd.DataFrame({"item_id": ["a", "b", "c", "d"], "rater_id": ["x", "x", "y", "y"], "score": [1, 2, 3, 4]})
    table = icc_table(long)
    assert table["icc"].isna().all() and (table["n_items"] == 0).all()
    assert table["note"].str.contains("fewer than 3 items \\(n=0\\)").all()


def test_all_missing_scores_are_a_clear_error() -> None:
    long = study_long(5).assign(score=np.nan)
    with pytest.raises(AgreementInputError, match="missing or not a finite number in 30 row"):
        validate_long(long)
    with pytest.raises(AgreementInputError, match="missing or non-numeric"):
        icc_table(long_icc(np.full((5, 2), np.nan)))


def test_duplicate_item_rater_rows_are_an_error_that_names_them() -> None:
    long = long_icc(np.arange(12.0).reshape(6, 2))
    twice = pd.concat([long, long[(long["item_id"] == "i3") & (long["rater_id"] == "r1")]])
    for compute in (icc_table, bootstrap_icc):
        with pytest.raises(AgreementInputError, match="rater 'r1' scores item 'i3' more than once"):
            compute(twice)
    study = study_long(6)
    with pytest.raises(AgreementInputError, match="item 'i1', rater 'jury', criterion 'clarity'"):
        agreement_table(pd.concat([study, study.iloc[[11]]]))


@pytest.mark.parametrize("seed", range(4))
def test_undefined_bounds_are_nan_with_a_note_never_a_huge_number(seed: int) -> None:
    # Small studies with coarse scores: where the F bounds of ICC(2) used to reach -2.7e9 and ICC(2,k) 1e16.
    rng = np.random.default_rng(seed)
    long = study_long(4 + seed, score=lambda i, r, c: float(rng.integers(1, 6)))
    table = agreement_table(long, protocol="full", n_resamples=50)
    values = table[["estimate", "ci_low", "ci_high"]].to_numpy(dtype=float)
    assert (np.abs(values[np.isfinite(values)]) < 1e3).all()
    bounded = table[table["ci_method"].isin(["F", "GCI (raters fixed)", "GCI (raters random)"])]
    missing = bounded[bounded["estimate"].notna() & bounded[["ci_low", "ci_high"]].isna().any(axis=1)]
    assert (missing["note"].str.len() > 0).all(), missing
