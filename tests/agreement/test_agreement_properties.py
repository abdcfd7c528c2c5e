"""Properties every ICC must have, whatever the data: checked on generated data with hypothesis."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from medhelm_core.agreement import bootstrap_icc, icc_table
from medhelm_core.agreement.icc import ICC_TYPES, icc_matrix

COLUMNS = ["icc", "F", "ci_low", "ci_high"]
FAST = settings(max_examples=60, deadline=None)


@st.composite
def rated_matrices(draw: st.DrawFn, scale: str = "any") -> np.ndarray:
    """Items x raters score matrices: Likert integers 1-5, or scores to two decimals (as a metric gives)."""
    n = draw(st.integers(3, 12))
    k = draw(st.integers(2, 5))
    likert = scale == "likert" or (scale == "any" and draw(st.booleans()))
    elements = st.integers(1, 5) if likert else st.floats(0, 10, allow_nan=False).map(lambda v: round(v, 2))
    return draw(arrays(np.float64, (n, k), elements=elements))


def long_table(x: np.ndarray, items: list[str], raters: list[str]) -> pd.DataFrame:
    n, k = x.shape
    return pd.DataFrame(
        {
            "item_id": [items[i] for i in range(n) for _ in range(k)],
            "rater_id": [raters[j] for _ in range(n) for j in range(k)],
            "score": x.ravel(),
        }
    )


def assert_same_iccs(a: pd.DataFrame, b: pd.DataFrame) -> None:
    a, b = a.set_index("type").loc[list(ICC_TYPES)], b.set_index("type").loc[list(ICC_TYPES)]
    for col in COLUMNS:
        left, right = a[col].to_numpy(float), b[col].to_numpy(float)
        if col == "F":
            # Perfect agreement leaves only rounding noise in the error term: F is "huge", not a number.
            left, right = np.minimum(left, 1e9), np.minimum(right, 1e9)
        np.testing.assert_allclose(left, right, rtol=1e-9, atol=1e-9)
    assert a["note"].tolist() == b["note"].tolist()


@FAST
@given(x=rated_matrices(), data=st.data())
def test_every_icc_form_ignores_rater_labels_rater_order_and_item_order(x: np.ndarray, data: st.DataObject) -> None:
    n, k = x.shape
    rows = data.draw(st.permutations(range(n)), label="item order")
    cols = data.draw(st.permutations(range(k)), label="rater order")
    names = data.draw(st.lists(st.text("abcxyz_0123", min_size=1, max_size=6), min_size=k, max_size=k, unique=True))
    base = icc_table(long_table(x, [f"i{i:02d}" for i in range(n)], [f"r{j}" for j in range(k)]))
    # Raters renamed (so their sorted order changes too), raters and items shuffled, rows shuffled.
    relabelled = long_table(x[np.ix_(rows, cols)], [f"i{i:02d}" for i in rows], [names[j] for j in cols])
    shuffled = relabelled.sample(frac=1.0, random_state=data.draw(st.integers(0, 2**16)))
    assert_same_iccs(base, icc_table(shuffled))
    assert_same_iccs(icc_matrix(x), icc_matrix(x[np.ix_(rows, cols)]))


@FAST
@given(truth=arrays(np.float64, st.integers(3, 15), elements=st.integers(1, 5)), k=st.integers(2, 6))
def test_identical_raters_agree_perfectly_in_every_form(truth: np.ndarray, k: int) -> None:
    x = np.tile(truth[:, None], (1, k))
    table = icc_matrix(x).set_index("type")
    if np.ptp(truth) == 0:
        # No variance between items: undefined, never a silent 1.0.
        assert table["icc"].isna().all() and (table["note"] == "no variance between items").all()
        return
    np.testing.assert_allclose(table["icc"], 1.0, atol=1e-12)
    for form in ("ICC1", "ICC3", "ICC1k", "ICC3k"):
        assert table.loc[form, "ci_high"] == pytest.approx(1.0, abs=1e-12)


@FAST
@given(x=rated_matrices(), shift=st.floats(-3, 3), stretch=st.floats(0.1, 10))
def test_every_icc_form_ignores_a_common_change_of_scale(x: np.ndarray, shift: float, stretch: float) -> None:
    # Moving every score to another scale (1-5 to 0-1, say) cannot change how much raters agree.
    assert_same_iccs(icc_matrix(x), icc_matrix(shift + stretch * x))


@FAST
@given(x=rated_matrices(), offsets=st.lists(st.integers(-2, 2), min_size=5, max_size=5))
def test_consistency_forms_ignore_a_rater_who_is_uniformly_harsher(x: np.ndarray, offsets: list[int]) -> None:
    # ICC(3,1) and ICC(3,k) measure consistency: a constant per-rater bias leaves them unchanged.
    shifted = x + np.asarray(offsets[: x.shape[1]], dtype=float)
    a, b = icc_matrix(x).set_index("type"), icc_matrix(shifted).set_index("type")
    np.testing.assert_allclose(a.loc[["ICC3", "ICC3k"], "icc"], b.loc[["ICC3", "ICC3k"], "icc"], atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(x=rated_matrices(), seed=st.integers(0, 2**32 - 1), method=st.sampled_from(["bca", "percentile"]))
def test_bootstrap_is_deterministic_for_a_seed_whatever_the_row_order(x: np.ndarray, seed: int, method: str) -> None:
    n, k = x.shape
    long = long_table(x, [f"i{i:02d}" for i in range(n)], [f"r{j}" for j in range(k)])
    first = bootstrap_icc(long, n_resamples=200, method=method, seed=seed)
    again = bootstrap_icc(long.iloc[::-1], n_resamples=200, method=method, seed=seed)
    pd.testing.assert_frame_equal(first, again)


@settings(max_examples=25, deadline=None)
@given(truth=arrays(np.float64, st.integers(4, 15), elements=st.integers(1, 50), unique=True), k=st.integers(2, 4))
def test_bootstrap_of_identical_raters_is_one_throughout(truth: np.ndarray, k: int) -> None:
    out = bootstrap_icc(np.tile(truth[:, None], (1, k)), icc_types=["ICC3k"], n_resamples=200, method="percentile")
    row = out.iloc[0]
    assert row["estimate"] == pytest.approx(1.0, abs=1e-12)
    assert row["ci_low"] == pytest.approx(1.0, abs=1e-12) and row["ci_high"] == pytest.approx(1.0, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=6), st.integers(-50, 50)), min_size=1, max_size=60))
def test_the_ids_used_are_sorted_as_python_sorts_them_and_interned(ids):
    import sys

    from medhelm_core.agreement.incomplete import CodedScores

    for column in (pd.Series(ids, dtype=object), pd.Series([str(i) for i in ids], dtype="str")):
        frame = pd.DataFrame({"item_id": column, "rater_id": column, "score": 1.0})
        coded = CodedScores.of(frame)
        expected = tuple(sorted({str(i) for i in ids}))
        assert tuple(coded.item_names.tolist()) == expected and tuple(coded.rater_names.tolist()) == expected
        assert all(i is sys.intern(i) for i in coded.item_names)
        assert [coded.item_names[c] for c in coded.item] == [str(i) for i in ids]  # each code names its own id
