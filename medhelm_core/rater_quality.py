"""Rater quality while a study runs: which submissions came in too fast to be a careful reading.

Pure functions over the rating-history frame (one row per submission, revisions included, as
:func:`medhelm_core.study_data.rating_history_frame` gives it, with ``elapsed_seconds``: the time from
showing the item to pressing Submit). A fast submission is a flag for a researcher to look at, not an
exclusion: a clinician may well know an item at a glance.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from medhelm_core.errors import MedhelmError

#: Default speed threshold. Reading a clinical output (often with its input and reference) and scoring
#: three criteria takes most readers well over 20 s; a study with one-line answers can lower it and
#: one with long notes (aci_bench) raise it, through ``threshold_seconds``.
DEFAULT_SPEED_THRESHOLD_SECONDS = 20.0
HISTORY_COLUMNS: tuple[str, ...] = ("rater_id", "item_id", "revision", "elapsed_seconds", "submitted_at")
SPEED_SUMMARY_COLUMNS: tuple[str, ...] = (
    "rater_id",
    "n",
    "n_timed",
    "n_fast",
    "share_fast",
    "median_seconds",
    "threshold_seconds",
)


class RaterQualityInputError(MedhelmError, ValueError):
    """A rating history or threshold that the rater-quality checks cannot use, with what is wrong."""


def _threshold(threshold_seconds: float) -> float:
    try:
        value = float(threshold_seconds)
    except (TypeError, ValueError):
        message = f"speed threshold must be a number of seconds, got {threshold_seconds!r}"
        raise RaterQualityInputError(message) from None
    if not math.isfinite(value) or value <= 0:
        raise RaterQualityInputError(f"speed threshold must be a positive number of seconds, got {threshold_seconds!r}")
    return value


def _history(history: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(history, pd.DataFrame):
        raise RaterQualityInputError(f"rating history must be a pandas DataFrame, got {type(history).__name__}")
    missing = [c for c in HISTORY_COLUMNS if c not in history.columns]
    if missing:
        raise RaterQualityInputError(
            f"rating history lacks column(s) {', '.join(missing)}; it needs {', '.join(HISTORY_COLUMNS)}"
        )
    out = history.copy()
    elapsed = pd.to_numeric(out["elapsed_seconds"], errors="coerce")
    bad = elapsed.notna() & ((elapsed < 0) | ~np.isfinite(elapsed.to_numpy(dtype=float, na_value=np.nan)))
    # A text or negative time is a bug upstream, not a missing timer; say so rather than skip it.
    bad |= elapsed.isna() & out["elapsed_seconds"].notna()
    if bad.any():
        first = out.loc[bad].iloc[0]
        raise RaterQualityInputError(
            f"elapsed_seconds is not a non-negative number in {int(bad.sum())} submission(s), first by "
            f"{str(first['rater_id'])!r} on item {first['item_id']} (value {first['elapsed_seconds']})"
        )
    out["elapsed_seconds"] = elapsed.astype(float)
    return out


def speed_flags(history: pd.DataFrame, threshold_seconds: float = DEFAULT_SPEED_THRESHOLD_SECONDS) -> pd.DataFrame:
    """Flag each submission made faster than the study's threshold.

    Parameters
    ----------
    history : pandas.DataFrame
        One row per submission with ``rater_id``, ``item_id``, ``revision``, ``elapsed_seconds`` (NaN
        when the time was not recorded) and ``submitted_at``; other columns are kept.
    threshold_seconds : float
        A submission strictly faster than this is fast (default
        :data:`DEFAULT_SPEED_THRESHOLD_SECONDS`, 20 s; pass the study's own value).

    Returns
    -------
    pandas.DataFrame
        The history in its own order with ``timed`` (a time was recorded) and ``fast`` (timed and
        faster than the threshold; an untimed submission is never fast) added.

    Raises
    ------
    RaterQualityInputError
        When a column is missing, a time is negative or not a number, or the threshold is not positive.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.rater_quality import speed_flags
    >>> h = pd.DataFrame({"rater_id": ["c1", "c1", "c2"], "item_id": [1, 2, 1], "revision": [1, 1, 1],
    ...                   "elapsed_seconds": [5.0, 90.0, None], "submitted_at": ["t1", "t2", "t3"]})
    >>> speed_flags(h, threshold_seconds=20)["fast"].tolist()
    [True, False, False]
    """
    threshold = _threshold(threshold_seconds)
    out = _history(history)
    out["timed"] = out["elapsed_seconds"].notna()
    out["fast"] = out["timed"] & (out["elapsed_seconds"] < threshold)
    return out


def speed_summary(
    history: pd.DataFrame,
    threshold_seconds: float = DEFAULT_SPEED_THRESHOLD_SECONDS,
    *,
    first_submissions_only: bool = False,
) -> pd.DataFrame:
    """Per clinician: how many submissions, how many were fast, and the median time.

    Parameters
    ----------
    history : pandas.DataFrame
        As for :func:`speed_flags`.
    threshold_seconds : float
        As for :func:`speed_flags`.
    first_submissions_only : bool
        Count only revision 1 of each rating: a revision that changes one score is legitimately quick.

    Returns
    -------
    pandas.DataFrame
        One row per ``rater_id`` (sorted): ``n`` (submissions), ``n_timed`` (with a recorded time),
        ``n_fast``, ``share_fast`` (``n_fast / n_timed``, NaN when nothing was timed),
        ``median_seconds`` (over timed submissions) and ``threshold_seconds``.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.rater_quality import speed_summary
    >>> h = pd.DataFrame({"rater_id": ["c1", "c1", "c2"], "item_id": [1, 2, 1], "revision": [1, 1, 1],
    ...                   "elapsed_seconds": [5.0, 90.0, 40.0], "submitted_at": ["t1", "t2", "t3"]})
    >>> row = speed_summary(h).set_index("rater_id").loc["c1"]
    >>> int(row["n_fast"]), float(row["share_fast"])
    (1, 0.5)
    """
    flags = speed_flags(history, threshold_seconds)
    if first_submissions_only:
        flags = flags[pd.to_numeric(flags["revision"], errors="coerce") == 1]
    if flags.empty:
        return pd.DataFrame(columns=list(SPEED_SUMMARY_COLUMNS))
    grouped = flags.groupby("rater_id", sort=True)
    summary = pd.DataFrame(
        {
            "n": grouped.size(),
            "n_timed": grouped["timed"].sum().astype(int),
            "n_fast": grouped["fast"].sum().astype(int),
            "median_seconds": grouped["elapsed_seconds"].median(),
        }
    ).reset_index()
    summary["share_fast"] = (summary["n_fast"] / summary["n_timed"].where(summary["n_timed"] > 0)).astype(float)
    summary["threshold_seconds"] = _threshold(threshold_seconds)
    return summary[list(SPEED_SUMMARY_COLUMNS)]
