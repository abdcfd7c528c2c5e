"""Speed flags: a rating submitted faster than the study's threshold is flagged, per submission and per clinician."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medhelm_core.errors import MedhelmError, RaterQualityInputError
from medhelm_core.rating.quality_flags import (
    DEFAULT_SPEED_THRESHOLD_SECONDS,
    SPEED_SUMMARY_COLUMNS,
    speed_flags,
    speed_summary,
)


def history() -> pd.DataFrame:
    rows = [
        ("c1", 1, 1, 5.0),
        ("c1", 2, 1, 19.9),
        ("c1", 2, 2, 3.0),  # a quick revision of item 2
        ("c1", 3, 1, 20.0),  # exactly at the threshold: not fast
        ("c2", 1, 1, 60.0),
        ("c2", 2, 1, None),  # submitted before timing was recorded
        ("c3", 1, 1, None),
    ]
    frame = pd.DataFrame(rows, columns=["rater_id", "item_id", "revision", "elapsed_seconds"])
    return frame.assign(submitted_at=[f"2025-01-01T10:0{i}:00" for i in range(len(frame))], comment="")


def test_submissions_faster_than_the_threshold_are_flagged() -> None:
    flags = speed_flags(history())
    assert DEFAULT_SPEED_THRESHOLD_SECONDS == 20.0
    assert flags["fast"].tolist() == [True, True, True, False, False, False, False]
    assert flags["timed"].tolist() == [True, True, True, True, True, False, False]
    assert "comment" in flags.columns and len(flags) == len(history())


def test_a_study_can_set_its_own_threshold() -> None:
    assert speed_flags(history(), threshold_seconds=4)["fast"].tolist() == [False, False, True] + [False] * 4
    assert speed_flags(history(), threshold_seconds=90)["fast"].sum() == 5


def test_per_clinician_summary_counts_fast_and_timed_submissions() -> None:
    summary = speed_summary(history()).set_index("rater_id")
    assert list(summary.reset_index().columns) == list(SPEED_SUMMARY_COLUMNS)
    assert summary.loc["c1", ["n", "n_timed", "n_fast"]].tolist() == [4, 4, 3]
    assert summary.loc["c1", "share_fast"] == pytest.approx(0.75)
    assert summary.loc["c1", "median_seconds"] == pytest.approx(np.median([5.0, 19.9, 3.0, 20.0]))
    assert summary.loc["c2", ["n", "n_timed", "n_fast"]].tolist() == [2, 1, 0]
    assert summary.loc["c2", "share_fast"] == 0.0
    # Nothing timed: the share is unknown, not zero.
    assert np.isnan(summary.loc["c3", "share_fast"]) and np.isnan(summary.loc["c3", "median_seconds"])
    assert (summary["threshold_seconds"] == 20.0).all()


def test_quick_revisions_can_be_left_out_of_the_summary() -> None:
    summary = speed_summary(history(), first_submissions_only=True).set_index("rater_id")
    assert summary.loc["c1", ["n", "n_fast"]].tolist() == [3, 2]


def test_empty_history_gives_an_empty_summary() -> None:
    summary = speed_summary(history().iloc[:0])
    assert summary.empty and list(summary.columns) == list(SPEED_SUMMARY_COLUMNS)


@pytest.mark.parametrize("threshold", [0, -5, float("nan"), float("inf"), "fast"])
def test_a_threshold_that_is_not_a_positive_number_is_refused(threshold: object) -> None:
    with pytest.raises(RaterQualityInputError, match="speed threshold"):
        speed_flags(history(), threshold_seconds=threshold)  # type: ignore[arg-type]


def test_bad_history_names_the_column_or_the_submission_at_fault() -> None:
    with pytest.raises(RaterQualityInputError, match="elapsed_seconds"):
        speed_flags(history().drop(columns="elapsed_seconds"))
    negative = history()
    negative.loc[4, "elapsed_seconds"] = -1.0
    with pytest.raises(RaterQualityInputError, match="'c2' on item 1 "):
        speed_flags(negative)
    text = history().astype({"elapsed_seconds": object})
    text.loc[0, "elapsed_seconds"] = "soon"
    with pytest.raises(MedhelmError, match="not a non-negative number"):
        speed_flags(text)
