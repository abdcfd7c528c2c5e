"""The long ratings table is checked once, at the boundary, with messages that name what is wrong."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from medhelm_core.agreement import agreement_table, koo_li_reading, rater_scores, validate_long
from medhelm_core.agreement.contract import is_trusted, trust_long, trusted_concat, trusted_rows
from medhelm_core.agreement.interpret import koo_li_interval_reading
from medhelm_core.errors import AgreementInputError, MedhelmError


def good_long() -> pd.DataFrame:
    rows = []
    for i in range(6):
        for rater, kind in [("c1", "clinician"), ("c2", "clinician"), ("jury", "jury")]:
            for c, offset in [("accuracy", 0), ("clarity", 1)]:
                rows.append((f"i{i}", rater, kind, c, float(1 + (i + offset + len(rater)) % 5), "medi_qa"))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "criterion", "score", "benchmark"])


def test_agreement_input_error_is_a_value_error_and_a_medhelm_error() -> None:
    assert issubclass(AgreementInputError, ValueError)
    assert issubclass(AgreementInputError, MedhelmError)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.drop(columns=["benchmark"]), "lacks column.*benchmark"),
        (lambda d: d.drop(columns=["score", "rater_kind"]), "rater_kind, score"),
        (lambda d: d.assign(rater_kind=d["rater_kind"].replace("jury", "llm")), "rater_kind has unknown value.*'llm'"),
        (lambda d: d.assign(score=d["score"].astype(object).where(d.index != 3, "four")), "finite number.*'four'"),
        (lambda d: d.assign(score=d["score"].where(d.index != 2, np.nan)), "missing or not a finite number"),
        (lambda d: d.assign(score=d["score"].where(d.index != 2, np.inf)), "not a finite number"),
        (lambda d: d.assign(item_id=d["item_id"].where(d.index != 0, "")), "item_id is empty"),
        (lambda d: pd.concat([d, d.iloc[[0]]]), "repeat an \\(item_id, rater_id, criterion\\).*'i0'"),
        (lambda d: d.assign(benchmark=d["benchmark"].where(d.index != 0, "aci_bench")), "more than one benchmark"),
        (lambda d: d.assign(rater_kind=d["rater_kind"].where(d.index != 0, "judge")), "more than one rater_kind"),
    ],
)
def test_ratings_table_is_validated_at_the_boundary(
    mutate: Callable[[pd.DataFrame], pd.DataFrame], message: str
) -> None:
    with pytest.raises(AgreementInputError, match=message):
        validate_long(mutate(good_long()))


def test_a_metric_gives_one_score_per_item() -> None:
    metric = pd.DataFrame(
        {
            "item_id": ["i0", "i0"],
            "rater_id": ["rougeL"] * 2,
            "rater_kind": ["metric"] * 2,
            "criterion": ["rougeL", "rouge1"],
            "score": [0.3, 0.4],
            "benchmark": ["medi_qa"] * 2,
        }
    )
    with pytest.raises(AgreementInputError, match="one score per item"):
        validate_long(pd.concat([good_long(), metric]))


def test_validation_keeps_the_optional_model_column_and_returns_clean_types() -> None:
    out = validate_long(good_long().assign(model="gpt-4o", extra=1, score=lambda d: d["score"].astype(int)))
    assert "model" in out.columns and "extra" not in out.columns
    assert out["score"].dtype == np.float64


def test_composite_needs_every_criterion_of_the_rater() -> None:
    long = validate_long(good_long())
    long = long[~((long["item_id"] == "i0") & (long["rater_id"] == "c1") & (long["criterion"] == "clarity"))]
    comp = rater_scores(long, "composite")
    assert not ((comp["item_id"] == "i0") & (comp["rater_id"] == "c1")).any()
    assert (comp["n_ratings"] == 2).all()


def test_agreement_table_names_unknown_benchmarks_criteria_and_protocols() -> None:
    with pytest.raises(AgreementInputError, match="benchmark\\(s\\) mtsamples have no ratings"):
        agreement_table(good_long(), benchmarks=["mtsamples"])
    with pytest.raises(AgreementInputError, match="completeness not rated by clinicians"):
        agreement_table(good_long(), criteria=["completeness"])
    with pytest.raises(AgreementInputError, match="protocol 'helm' unknown"):
        agreement_table(good_long(), protocol="helm")
    with pytest.raises(AgreementInputError, match="no clinician ratings"):
        agreement_table(good_long().query("rater_kind != 'clinician'"))


@pytest.mark.parametrize(
    ("icc", "reading"),
    [
        (-0.2, "poor"),
        (0.499, "poor"),
        (0.5, "moderate"),
        (0.749, "moderate"),
        (0.75, "good"),
        (0.9, "good"),
        (0.901, "excellent"),
        (float("nan"), ""),
    ],
)
def test_koo_li_reading_follows_the_2016_bands(icc: float, reading: str) -> None:
    assert koo_li_reading(icc) == reading


def test_koo_li_reading_of_an_interval_names_the_bands_it_spans() -> None:
    assert koo_li_interval_reading(0.10, 0.69) == "poor to moderate"
    assert koo_li_interval_reading(0.8, 0.85) == "good"
    assert koo_li_interval_reading(float("nan"), 0.5) == ""


# -- trusted frames: checked once ---------------------------------------------------------------------------------


def test_a_trusted_frame_is_checked_once_and_what_is_derived_from_it_stays_trusted():
    trusted = trust_long(good_long())
    assert is_trusted(trusted) and validate_long(trusted) is trusted
    assert not is_trusted(good_long()) and validate_long(good_long()) is not good_long()
    pd.testing.assert_frame_equal(trusted, validate_long(good_long()))  # what validate_long would return
    rows = trusted_rows(trusted, np.arange(len(trusted))[::-2])
    assert is_trusted(rows) and list(rows.index) == list(range(len(rows)))
    assert rows["score"].tolist() == trusted["score"].iloc[::-2].tolist()
    # a copy, even an unchanged one, and the rows of an untrusted frame are checked as any other frame
    assert not is_trusted(trusted.copy()) and not is_trusted(trusted_rows(good_long(), [0, 1]))
    other = trust_long(good_long().assign(item_id=lambda d: "j" + d["item_id"], benchmark="aci_bench"))
    both = trusted_concat([trusted, other])
    assert is_trusted(both) and len(both) == 2 * len(trusted)
    pd.testing.assert_frame_equal(both, validate_long(pd.concat([good_long(), other], ignore_index=True)))


def test_joining_trusted_frames_checks_what_can_break_between_them():
    trusted = trust_long(good_long())
    with pytest.raises(AgreementInputError, match="item\\(s\\) 'i0', 'i1', 'i2' and 3 more appear in two"):
        trusted_concat([trusted, trust_long(good_long().assign(benchmark="aci_bench"))])
    judge = trust_long(good_long().assign(item_id=lambda d: "j" + d["item_id"],
                                          rater_kind=lambda d: d["rater_kind"].replace("jury", "judge")))
    with pytest.raises(AgreementInputError, match="rater\\(s\\) 'jury' appear with more than one rater_kind"):
        trusted_concat([trusted, judge])
    with pytest.raises(ValueError, match="trust_long"):
        trusted_concat([trusted, good_long()])


def test_shared_ids_are_interned_strings_and_other_ids_are_kept_as_they_are():
    import sys

    from medhelm_core.agreement.contract import shared_ids

    made = ["".join(["item", str(n)]) for n in range(3)]  # new string objects, not yet interned
    found = shared_ids(pd.Index(made))
    assert found.dtype == object and found.tolist() == made
    assert all(i is sys.intern(i) for i in found)
    assert shared_ids([]).dtype == object and len(shared_ids([])) == 0
    assert shared_ids(["x", 3]).tolist() == ["x", 3] and shared_ids(pd.Index([1, 2])).tolist() == [1, 2]
