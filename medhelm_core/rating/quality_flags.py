"""Rater quality while a study runs: which submissions came in too fast to be a careful reading.

Pure functions over the rating-history frame (one row per submission, revisions included, as
:func:`medhelm_core.frames.rating_history_frame` gives it, with ``elapsed_seconds``: the time from
showing the item to pressing Submit). A fast submission is a flag for a researcher to look at, not an
exclusion: a clinician may well know an item at a glance.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from medhelm_core.errors import RaterQualityInputError

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


def check_speed_threshold(seconds: object) -> float:
    """``seconds`` as a speed threshold (a positive, finite number of seconds), or :class:`RaterQualityInputError`.

    The one check of a threshold, whether a study's setting is being changed
    (:func:`medhelm_core.studies.update_settings`) or the flags are being computed, so both refuse the same
    values with the same message.

    Examples
    --------
    >>> check_speed_threshold("45")
    45.0
    """
    try:
        value = float(seconds)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise RaterQualityInputError(f"the speed threshold must be a number of seconds, not {seconds!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise RaterQualityInputError(f"the speed threshold must be a positive number of seconds, not {seconds!r}")
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
    >>> from medhelm_core.rating.quality_flags import speed_flags
    >>> h = pd.DataFrame({"rater_id": ["c1", "c1", "c2"], "item_id": [1, 2, 1], "revision": [1, 1, 1],
    ...                   "elapsed_seconds": [5.0, 90.0, None], "submitted_at": ["t1", "t2", "t3"]})
    >>> speed_flags(h, threshold_seconds=20)["fast"].tolist()
    [True, False, False]
    """
    threshold = check_speed_threshold(threshold_seconds)
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
    >>> from medhelm_core.rating.quality_flags import speed_summary
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
    summary["threshold_seconds"] = check_speed_threshold(threshold_seconds)
    return summary[list(SPEED_SUMMARY_COLUMNS)]


GOLD_ACCURACY_COLUMNS: tuple[str, ...] = (
    "rater_id",
    "criterion",
    "n_items",
    "n_scores",
    "n_within",
    "accuracy",
    "mean_miss",
)
ALL_CRITERIA = "all criteria"


def gold_accuracy(ratings: pd.DataFrame, ranges: pd.DataFrame, *, by_criterion: bool = False) -> pd.DataFrame:
    """Each clinician's accuracy on the gold items: the share of their scores within the expected range.

    Parameters
    ----------
    ratings : pandas.DataFrame
        Current clinician scores with ``rater_id``, ``item_id``, ``criterion`` and ``score``.
    ranges : pandas.DataFrame
        Gold ranges with ``item_id``, ``criterion``, ``low`` and ``high`` (inclusive).
    by_criterion : bool
        Also one row per clinician and criterion, beside the row over all criteria.

    Returns
    -------
    pandas.DataFrame
        One row per clinician who scored a gold criterion (and per criterion when asked), with
        ``criterion`` (``"all criteria"`` for the overall row), ``n_items`` (gold items scored),
        ``n_scores`` (gold criteria scored), ``n_within``, ``accuracy`` (``n_within / n_scores``) and
        ``mean_miss``: the mean distance in points outside the range (0 when within), which tells a
        near miss from a score at the other end of the scale.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.rating.quality_flags import gold_accuracy
    >>> ranges = pd.DataFrame({"item_id": [1, 1], "criterion": ["accuracy", "clarity"], "low": [4, 1],
    ...                        "high": [5, 2]})
    >>> ratings = pd.DataFrame({"rater_id": ["c1", "c1", "c2", "c2"], "item_id": [1, 1, 1, 1],
    ...                         "criterion": ["accuracy", "clarity", "accuracy", "clarity"], "score": [5, 4, 2, 2]})
    >>> gold_accuracy(ratings, ranges)[["rater_id", "accuracy", "mean_miss"]].values.tolist()
    [['c1', 0.5, 1.0], ['c2', 0.5, 1.0]]
    """
    for name, frame, needed in (
        ("ratings", ratings, ("rater_id", "item_id", "criterion", "score")),
        ("gold ranges", ranges, ("item_id", "criterion", "low", "high")),
    ):
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise RaterQualityInputError(f"{name} lack column(s) {', '.join(missing)}")
    keys = ["item_id", "criterion"]
    left = ratings.astype({"item_id": str, "criterion": str})
    right = ranges[[*keys, "low", "high"]].astype({"item_id": str, "criterion": str})
    scored = left.merge(right, on=keys, how="inner")
    if scored.empty:
        return pd.DataFrame(columns=list(GOLD_ACCURACY_COLUMNS))
    score = scored["score"].astype(float)
    miss = (scored["low"] - score).clip(lower=0) + (score - scored["high"]).clip(lower=0)
    scored = scored.assign(within=miss == 0, miss=miss)
    groupings = [(["rater_id"], ALL_CRITERIA)]
    if by_criterion:
        groupings.append((["rater_id", "criterion"], None))
    parts = []
    for keys_, label in groupings:
        grouped = scored.groupby(keys_)
        part = pd.DataFrame(
            {
                "n_items": grouped["item_id"].nunique(),
                "n_scores": grouped.size(),
                "n_within": grouped["within"].sum().astype(int),
                "mean_miss": grouped["miss"].mean(),
            }
        ).reset_index()
        if label is not None:
            part["criterion"] = label
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    out["accuracy"] = out["n_within"] / out["n_scores"]
    out["order"] = (out["criterion"] != ALL_CRITERIA).astype(int)
    out = out.sort_values(["rater_id", "order", "criterion"]).reset_index(drop=True)
    return out[list(GOLD_ACCURACY_COLUMNS)]
