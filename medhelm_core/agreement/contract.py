"""The long table the agreement engine reads, checked once at the boundary.

Every public function of :mod:`medhelm_core.agreement` that takes ratings takes this table; it is
validated here and trusted inside, so that a bad upload fails with one message naming the column or the
value at fault instead of a numpy error three calls deep. The engine's other input checks live here too
(:func:`require_columns` for any input table, :func:`checked_scores` for the statistics that take their
own column names, :func:`scale_codes` and :func:`on_scale` for scores on the rating scale), so each rule
is written once.

A table is checked once, not once per figure: the dashboard's scores feed the agreement table, the views and
two extra tables, and checking 2,000,000 rows (a 100,000-item study) takes half a second each time. A frame
returned by :func:`trust_long` (or derived from trusted frames by :func:`trusted_rows` and
:func:`trusted_concat`) is passed through :func:`validate_long` as it is. Its owner promises never to change
it; the dashboard's frames are shared between sessions and read-only already.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from medhelm_core.errors import AgreementInputError

REQUIRED_COLUMNS: tuple[str, ...] = ("item_id", "rater_id", "rater_kind", "criterion", "score", "benchmark")
RATER_KINDS: tuple[str, ...] = ("clinician", "jury", "judge", "metric")
COMPOSITE = "composite"
# Fewer items than this leave the two-way ANOVA with no error degrees of freedom worth the name.
MIN_ITEMS = 3
#: ``sys.intern`` over an object array
_INTERN = np.frompyfunc(sys.intern, 1, 1)
#: the frames checked once and not again, by id (an entry goes with its frame)
_TRUSTED: weakref.WeakValueDictionary[int, pd.DataFrame] = weakref.WeakValueDictionary()


def require_columns(frame: object, columns: Sequence[str], what: str = "data", *, hint: str = "") -> pd.DataFrame:
    """Refuse anything but a DataFrame holding ``columns``; ``what`` names the table in the message.

    The one place every input table of the engine is first checked, so a missing column reads the same
    whichever statistic was asked for.

    Parameters
    ----------
    frame : object
        What the caller passed.
    columns : sequence of str
        The columns it must have.
    what : str
        The table's name in the message (``"ratings table"``, ``"juries"``).
    hint : str
        Appended to the missing-column message (e.g. what the table needs).

    Returns
    -------
    pandas.DataFrame
        ``frame`` itself.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.contract import require_columns
    >>> require_columns(pd.DataFrame({"item_id": ["a"]}), ["item_id"]).shape
    (1, 1)
    """
    if not isinstance(frame, pd.DataFrame):
        raise AgreementInputError(f"{what} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        verb = "lack" if what.endswith("s") else "lacks"
        raise AgreementInputError(f"{what} {verb} column(s) {', '.join(missing)}{hint}")
    return frame


def checked_scores(data: pd.DataFrame, targets: str, raters: str, ratings: str) -> pd.DataFrame:
    """The (target, rater, score) columns of a long table, each pair once and every score a finite number.

    The check of the statistics that take their own column names (:func:`icc_table`, Gwet's AC,
    Krippendorff's alpha, the one-way ICC); the long contract's own check is :func:`validate_long`.

    Returns a copy of the three columns with numeric scores.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.contract import checked_scores
    >>> d = pd.DataFrame({"i": ["a", "b"], "r": ["x", "x"], "s": ["1", "2.5"]})
    >>> checked_scores(d, "i", "r", "s")["s"].tolist()
    [1.0, 2.5]
    """
    require_columns(data, (targets, raters, ratings))
    if data.duplicated([targets, raters]).any():
        first = data.loc[data.duplicated([targets, raters])].iloc[0]
        raise AgreementInputError(
            f"rater {first[raters]!r} scores item {first[targets]!r} more than once; keep one score per item and rater"
        )
    out = data[[targets, raters, ratings]].copy()
    out[ratings] = pd.to_numeric(out[ratings], errors="coerce")
    if not np.isfinite(out[ratings].to_numpy(dtype=float)).all():
        raise AgreementInputError(f"column {ratings} has missing or non-numeric scores")
    return out


def scale_codes(values: ArrayLike, labels: Sequence[float]) -> tuple[NDArray[np.intp], int]:
    """Scores rounded to the nearest level of the rating scale, as level codes 0..m-1.

    Integer scores (each criterion) are their own level. Means (a composite, a mean clinician, a jury mean)
    fall between levels and are rounded half away from zero (:data:`ROUNDING_RULE`): 1.5 -> 2, 3.5 -> 4,
    4.5 -> 5, the same rule at every level, where numpy's and pandas' half-to-even rounding (MedHELM's
    script) sends 4.5 down to 4 and 3.5 up to 4. A score that rounds off the scale is refused.

    Parameters
    ----------
    values : array_like
        Scores.
    labels : sequence of number
        The rating scale.

    Returns
    -------
    codes : ndarray of int
        The level of each score, 0 for the lowest.
    m : int
        The number of levels.

    Examples
    --------
    >>> from medhelm_core.agreement.contract import scale_codes
    >>> codes, m = scale_codes([1, 2.6, 4.5], (1, 2, 3, 4, 5))
    >>> codes.tolist(), m
    ([0, 2, 4], 5)
    """
    levels = np.unique(np.asarray(list(labels), dtype=float))
    x = round_half_away(values)
    off = np.setdiff1d(x, levels)
    if off.size:
        raise AgreementInputError(f"score(s) {off.tolist()} lie outside the rating scale {list(labels)}")
    return np.searchsorted(levels, x), int(levels.size)


#: how scores between levels are put on the rating scale, in words for notes and reports
ROUNDING_RULE = "means rounded to the nearest level, halves away from zero (1.5 to 2, 4.5 to 5)"


def round_half_away(values: ArrayLike) -> NDArray[np.float64]:
    """Round to the nearest integer, halves away from zero (a symmetric rule, unlike numpy's half to even).

    Means are first rounded to 9 decimals, so that a half computed as 4.4999999999 counts as a half.

    Examples
    --------
    >>> from medhelm_core.agreement.contract import round_half_away
    >>> round_half_away([1.5, 2.5, 3.5, 4.5, 13 / 6 + 14 / 6 - 0.5, -1.5]).tolist()
    [2.0, 3.0, 4.0, 5.0, 4.0, -2.0]
    """
    x = np.round(np.asarray(values, dtype=float), 9)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def on_scale(values: ArrayLike, labels: Sequence[float]) -> bool:
    """True when every score lies on the rating scale (within half a point), as the kappa needs.

    Examples
    --------
    >>> from medhelm_core.agreement.contract import on_scale
    >>> on_scale([1.0, 5.4], (1, 2, 3, 4, 5)), on_scale([0.2], (1, 2, 3, 4, 5))
    (True, False)
    """
    arr = np.asarray(values, dtype=float)
    return bool(((arr >= min(labels) - 0.5) & (arr <= max(labels) + 0.5)).all())


def shared_ids(ids: pd.Index | pd.Series | Sequence[str]) -> NDArray[np.object_]:
    """Item or rater ids as an object array of interned strings.

    A table's ``items_used`` tuples (a few hundred, up to 20,000 ids each) were made of fresh string objects
    every time ids were read back from pandas' Arrow strings: 100 MB of copies of the same ids for one
    20,000-item study. Interned, every tuple points at one string per id.
    """
    # Arrow-backed ids are turned into Python strings in one call: iterating them one by one cost 60 ms at 20,000.
    values = (ids.to_numpy(dtype=object) if isinstance(ids, pd.Index | pd.Series)
              else np.array([*ids, None], dtype=object)[:-1])
    try:  # interned by numpy's loop, 7x faster than a comprehension (an update interns 250,000 ids at 20,000 items)
        return _INTERN(values) if len(values) else values
    except TypeError:  # an id that is no string (a caller's own int ids): kept as it is
        return np.array([sys.intern(i) if type(i) is str else i for i in values] + [None], dtype=object)[:-1]


def _first(values: pd.Series | pd.Index, limit: int = 3) -> str:
    shown = [repr(v) for v in list(values)[:limit]]
    more = f" and {len(values) - limit} more" if len(values) > limit else ""
    return ", ".join(shown) + more


def validate_long(long: pd.DataFrame) -> pd.DataFrame:
    """Check a long ratings table against the contract and return a clean copy.

    Parameters
    ----------
    long : pandas.DataFrame
        One row per (item, rater, criterion) with the columns ``item_id``, ``rater_id``, ``rater_kind``
        (``clinician``, ``jury``, ``judge`` or ``metric``), ``criterion``, ``score`` (finite number) and
        ``benchmark``; an optional ``model`` column is kept.

    Returns
    -------
    pandas.DataFrame
        A copy with string ids and float scores; a trusted frame (:func:`trust_long`) as it is.

    Raises
    ------
    AgreementInputError
        When a column is missing, a value is empty or unknown, a score is not a finite number, an
        (item, rater, criterion) appears twice, an item sits in two benchmarks, a rater has two kinds,
        or a metric gives more than one score per item.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import validate_long
    >>> long = pd.DataFrame({"item_id": ["i1"], "rater_id": ["c1"], "rater_kind": ["clinician"],
    ...                      "criterion": ["accuracy"], "score": [4], "benchmark": ["medi_qa"]})
    >>> validate_long(long)["score"].dtype
    dtype('float64')
    """
    if is_trusted(long):
        return long
    require_columns(long, REQUIRED_COLUMNS, "ratings table", hint=f"; it needs {', '.join(REQUIRED_COLUMNS)}")
    keep = list(REQUIRED_COLUMNS) + (["model"] if "model" in long.columns else [])
    out = long[keep].copy()
    for col in ("item_id", "rater_id", "rater_kind", "criterion", "benchmark"):
        blank = out[col].isna() | (out[col].astype(str).str.strip() == "")
        if blank.any():
            raise AgreementInputError(
                f"column {col} is empty in {int(blank.sum())} row(s) (first at row {blank.idxmax()!r})"
            )
        out[col] = out[col].astype(str)
    bad_kind = ~out["rater_kind"].isin(RATER_KINDS)
    if bad_kind.any():
        raise AgreementInputError(
            f"rater_kind has unknown value(s) {_first(out.loc[bad_kind, 'rater_kind'].unique())}; "
            f"use one of {', '.join(RATER_KINDS)}"
        )
    score = pd.to_numeric(out["score"], errors="coerce")
    bad = score.isna() | ~np.isfinite(score.to_numpy(dtype=float, na_value=np.nan))
    if bad.any():
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        first = out.iloc[pos]
        value = long["score"].iloc[pos]
        shown = repr(value) if isinstance(value, str) else str(value)
        raise AgreementInputError(
            f"score is missing or not a finite number in {int(bad.sum())} row(s), first for item "
            f"{first['item_id']!r}, rater {first['rater_id']!r}, criterion {first['criterion']!r} "
            f"(value {shown}); drop rows without a score before computing agreement"
        )
    out["score"] = score.astype(float)
    dup = out.duplicated(["item_id", "rater_id", "criterion"], keep=False)
    if dup.any():
        first = out.loc[dup].iloc[0]
        # pingouin would silently average these; a second rating is a revision or an import error.
        raise AgreementInputError(
            f"{int(dup.sum())} rows repeat an (item_id, rater_id, criterion), first item {first['item_id']!r}, "
            f"rater {first['rater_id']!r}, criterion {first['criterion']!r}; keep one rating each (the latest revision)"
        )
    n_bench = out.groupby("item_id")["benchmark"].nunique()
    if (n_bench > 1).any():
        raise AgreementInputError(f"item(s) {_first(n_bench.index[n_bench > 1])} belong to more than one benchmark")
    _check_one_kind(out)
    metric = out[out["rater_kind"] == "metric"]
    per_item = metric.groupby(["rater_id", "item_id"]).size()
    if (per_item > 1).any():
        rater, item = per_item.index[per_item > 1][0]
        raise AgreementInputError(
            f"metric {rater!r} has {int(per_item.max())} scores for item {item!r}; a metric gives one score per item"
        )
    return out.reset_index(drop=True)


def _check_one_kind(long: pd.DataFrame) -> None:
    n_kind = long.groupby("rater_id")["rater_kind"].nunique()
    if (n_kind > 1).any():
        raise AgreementInputError(f"rater(s) {_first(n_kind.index[n_kind > 1])} appear with more than one rater_kind")


def _trusted(frame: pd.DataFrame) -> pd.DataFrame:
    _TRUSTED[id(frame)] = frame
    return frame


def is_trusted(long: object) -> bool:
    """True for a frame :func:`validate_long` passes as it is (see :func:`trust_long`)."""
    return _TRUSTED.get(id(long)) is long


def trust_long(long: pd.DataFrame) -> pd.DataFrame:
    """:func:`validate_long` of ``long``, remembered: the returned frame passes :func:`validate_long` again without
    being checked. The caller must never change it (in place); a changed copy is checked as any other frame.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.contract import trust_long, validate_long
    >>> long = trust_long(pd.DataFrame({"item_id": ["i1"], "rater_id": ["c1"], "rater_kind": ["clinician"],
    ...                                 "criterion": ["accuracy"], "score": [4], "benchmark": ["medi_qa"]}))
    >>> validate_long(long) is long
    True
    """
    return _trusted(validate_long(long))


def trusted_rows(long: pd.DataFrame, rows: Sequence[int] | NDArray[np.intp]) -> pd.DataFrame:
    """The rows at positions ``rows`` of ``long`` (a subset, in any order), index reset: trusted when ``long`` is,
    since every rule of the contract holds for any subset of a table that keeps it."""
    out = long.take(np.asarray(rows, dtype=np.intp)).reset_index(drop=True)
    return _trusted(out) if is_trusted(long) else out


def trusted_concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Trusted frames over disjoint items as one trusted frame (index reset), checking only the rules that can
    break between them: an item in two of them, a rater with one kind in one and another kind in another.

    Raises
    ------
    ValueError
        When a frame is not trusted (:func:`trust_long` it first).
    AgreementInputError
        When an item is in two of the frames or a rater has two kinds.
    """
    if not all(is_trusted(f) for f in frames):
        raise ValueError("trusted_concat joins frames returned by trust_long, trusted_rows or trusted_concat")
    seen: set[str] = set()
    for frame in frames:
        items = set(frame["item_id"].unique().tolist())  # tolist: in one call, not an Arrow scalar at a time
        both = items & seen
        if both:
            raise AgreementInputError(f"item(s) {_first(sorted(both))} appear in two of the tables joined")
        seen |= items
    out = pd.concat(list(frames), ignore_index=True)
    _check_one_kind(out)
    return _trusted(out)


def rater_scores(long: pd.DataFrame, criterion: str, criteria: Sequence[str] | None = None) -> pd.DataFrame:
    """Scores per (item, rater) for one criterion or the composite, from a validated table.

    The composite is the mean of ``criteria`` (default: the criteria the clinicians used) per rater and
    item, kept only where the rater scored all of them, so that a composite never silently rests on fewer
    criteria. A metric's single score stands for every criterion and for the composite.

    Parameters
    ----------
    long : pandas.DataFrame
        A table returned by :func:`validate_long`.
    criterion : str
        A criterion name, or ``"composite"``.
    criteria : sequence of str, optional
        The criteria averaged into the composite.

    Returns
    -------
    pandas.DataFrame
        Columns ``item_id``, ``rater_id``, ``rater_kind``, ``benchmark``, ``score``, ``n_ratings`` (the
        number of rows of ``long`` behind the score).

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import rater_scores, validate_long
    >>> long = validate_long(pd.DataFrame({
    ...     "item_id": ["i1", "i1"], "rater_id": ["c1", "c1"], "rater_kind": ["clinician"] * 2,
    ...     "criterion": ["accuracy", "clarity"], "score": [4, 2], "benchmark": ["medi_qa"] * 2}))
    >>> float(rater_scores(long, "composite")["score"].iloc[0])
    3.0
    """
    keys = ["item_id", "rater_id", "rater_kind", "benchmark"]
    # Filter only the columns used: taking rows of every string column of a 400,000-row table is the slow part.
    is_metric = (long["rater_kind"] == "metric").to_numpy()
    metric = long.loc[is_metric, keys + ["score"]].assign(n_ratings=1)
    rated = long.loc[~is_metric, [*keys, "criterion", "score"]]
    if criterion != COMPOSITE:
        own = rated[rated["criterion"] == criterion][keys + ["score"]].assign(n_ratings=1)
        return pd.concat([own, metric], ignore_index=True)
    if criteria is None:
        criteria = sorted(rated.loc[rated["rater_kind"] == "clinician", "criterion"].unique())
    part = rated[rated["criterion"].isin(list(criteria))]
    grouped = part.groupby(keys, sort=True)["score"].agg(["mean", "size"]).reset_index()
    complete = grouped[grouped["size"] == len(criteria)]
    composite = complete.rename(columns={"mean": "score", "size": "n_ratings"})[keys + ["score", "n_ratings"]]
    return pd.concat([composite, metric], ignore_index=True)
