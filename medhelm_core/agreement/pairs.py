"""Agreement between two "raters" over the items both scored: the building block of every comparison.

A comparison in MedHELM's protocol is always a pair: the mean clinician against the jury (or a judge, or
a metric), or the two clinicians who share the most items. The forms are computed where they mean what
they say:

* consistency, ICC(C,1) and ICC(C,k) (``ICC3``, ``ICC3k``), on each side z-scored within itself, as
  MedHELM's protocol asks (so a metric on 0-1 and clinicians on 1-5 can be set side by side), with the
  exact F interval;
* absolute agreement, ICC(A,1) and ICC(A,k) (``ICC2``, ``ICC2k``), on the raw scale (z-scoring would
  remove exactly the leniency absolute agreement is there to see), only when both sides are on the rating
  scale, with the generalized confidence interval of :mod:`medhelm_core.agreement.intervals` for raters
  drawn at random (two clinicians) or fixed (the jury beside the mean clinician);
* the one-way forms are not for a pair (two raters on the same items are a two-way design): see
  :func:`~medhelm_core.agreement.icc1_unbalanced` for every clinician at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from medhelm_core.agreement.bootstrap import bootstrap_records, check_bootstrap
from medhelm_core.agreement.contract import MIN_ITEMS
from medhelm_core.agreement.icc import check_icc_types, icc_records
from medhelm_core.agreement.intervals import CI_METHODS, TWO_RANDOM_RATERS, absolute_agreement_interval, check_raters
from medhelm_core.agreement.kappa import weighted_kappa
from medhelm_core.agreement.special import pearson, spearman
from medhelm_core.errors import AgreementInputError

#: the forms a pair reports: consistency on z-scores, absolute agreement on the raw scale
PAIR_FORMS: tuple[str, ...] = ("ICC3", "ICC3k", "ICC2", "ICC2k")
CONSISTENCY_FORMS: tuple[str, ...] = ("ICC3", "ICC3k")
ABSOLUTE_FORMS: tuple[str, ...] = ("ICC2", "ICC2k")
NOT_ON_SCALE = "absolute agreement needs both sides on the rating scale (a metric is not); see ICC(C,k)"
PAIR_COLUMNS: tuple[str, ...] = (
    "method",
    "estimate",
    "ci_low",
    "ci_high",
    "ci_method",
    "n_items",
    "pearson_r",
    "spearman_rho",
    "kappa_qw",
    "note",
    "items_used",
)


def zscore_within(values: ArrayLike) -> NDArray[np.float64]:
    """z-score one rater's scores (sample standard deviation); all NaN when the rater never varies.

    Parameters
    ----------
    values : array_like
        One rater's scores.

    Returns
    -------
    ndarray
        ``(values - mean) / std`` with ``ddof=1``, as pandas computes it in MedHELM's script.

    Examples
    --------
    >>> from medhelm_core.agreement.pairs import zscore_within
    >>> zscore_within([1, 2, 3]).tolist()
    [-1.0, 0.0, 1.0]
    """
    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return np.full(arr.shape, np.nan)
    sd = arr.std(ddof=1)
    if not sd > 0:
        return np.full(arr.shape, np.nan)
    return (arr - arr.mean()) / sd


def most_shared_pair(items_by_rater: pd.DataFrame) -> tuple[str, str, int, int] | None:
    """The two raters who share the most items, as MedHELM picks its clinician baseline.

    Ties go to the first pair in sorted rater order (what MedHELM's ``argmax`` over a sorted index does).

    Parameters
    ----------
    items_by_rater : pandas.DataFrame
        Columns ``rater_id`` and ``item_id``, one row per rating.

    Returns
    -------
    tuple or None
        ``(rater_a, rater_b, n_shared, n_tied_pairs)`` where ``n_tied_pairs`` counts the other pairs that
        share as many items; None when no two raters share an item.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.pairs import most_shared_pair
    >>> d = pd.DataFrame({"rater_id": ["a", "b", "a", "b", "c"], "item_id": ["1", "1", "2", "2", "2"]})
    >>> most_shared_pair(d)
    ('a', 'b', 2, 0)
    """
    # An indicator matrix from factorised codes: the same sorted rater order as a crosstab, without the
    # crosstab's cost (it dominated the Agreement page on a 20,000-item study).
    rater_codes, raters = pd.factorize(items_by_rater["rater_id"], sort=True)
    item_codes, items = pd.factorize(items_by_rater["item_id"], sort=True)
    best = shared_pair_codes(rater_codes, len(raters), item_codes, len(items))
    if best is None:
        return None
    i, j, shared, ties = best
    return str(raters[i]), str(raters[j]), shared, ties


def shared_pair_codes(
    rater_codes: NDArray[np.intp], n_raters: int, item_codes: NDArray[np.intp], n_items: int
) -> tuple[int, int, int, int] | None:
    """:func:`most_shared_pair` on integer codes (raters coded in sorted order): ``(i, j, n_shared, n_tied)``."""
    if n_raters < 2:
        return None
    # A sparse raters x items indicator (a rater's repeated rows count once): its product with itself
    # counts the shared items of every pair in milliseconds, where a dense one took a tenth of a second.
    m = sparse.csr_matrix(
        (np.ones(len(rater_codes), dtype=np.int64), (rater_codes, item_codes)), shape=(n_raters, n_items)
    )
    m.sum_duplicates()
    m.data[:] = 1
    overlap = (m @ m.T).toarray()
    # A rater shares all their items with themselves; only pairs count.
    overlap[np.tril_indices_from(overlap)] = 0
    best = int(overlap.max())
    if best == 0:
        return None
    i, j = np.unravel_index(int(overlap.argmax()), overlap.shape)
    ties = int((overlap == best).sum()) - 1
    return int(i), int(j), best, ties


def _correlation(kind: str, x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    if x.size < MIN_ITEMS or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    if kind == "pearson":
        return pearson(x, y)
    # Ranks must see tied means as ties; z-scoring leaves them a few ulps apart, so round first.
    return spearman(np.round(x, 9), np.round(y, 9))


def check_pair_forms(icc_types: Sequence[str]) -> None:
    """Refuse the one-way forms for a pair (and unknown forms), saying where they belong.

    Examples
    --------
    >>> from medhelm_core.agreement.pairs import check_pair_forms
    >>> check_pair_forms(["ICC3k", "ICC2"])
    """
    check_icc_types(icc_types)
    one_way = [t for t in icc_types if t not in PAIR_FORMS]
    if one_way:
        raise AgreementInputError(
            f"{', '.join(one_way)}: two raters who score the same items are a two-way design; the one-way ICC is "
            "for raters that differ by item (icc1_unbalanced over every clinician)"
        )


def pair_agreement(
    a: pd.Series,
    b: pd.Series,
    *,
    icc_types: Sequence[str] = ("ICC3k",),
    standardize: bool = True,
    raters: str = "fixed",
    bootstrap: str | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    kappa_a: pd.Series | None = None,
    kappa_b: pd.Series | None = None,
    kappa_labels: Sequence[int] = (1, 2, 3, 4, 5),
    same_scale: bool = True,
) -> pd.DataFrame:
    """ICCs, Pearson r, Spearman's rho and weighted kappa between two raters' scores per item.

    For the consistency forms each side is z-scored over all of its own scores given (as MedHELM does,
    before items missing on the other side are dropped); the absolute-agreement forms use the raw scores.
    The ICCs use the items both scored.

    Parameters
    ----------
    a, b : pandas.Series
        Scores indexed by item id.
    icc_types : sequence of {"ICC3", "ICC3k", "ICC2", "ICC2k"}
        ICC forms to report: consistency (F interval) and absolute agreement (generalized interval).
    standardize : bool
        z-score each side within itself for the consistency forms.
    raters : {"fixed", "random"}
        The absolute-agreement interval's design: ``fixed`` for raters of interest (a jury beside the mean
        clinician), ``random`` for raters that stand for others (two clinicians).
    bootstrap : {"bca", "percentile"} or None
        Also report the consistency forms with a bootstrap interval over items (it under-covers below
        about 100 items; see :mod:`medhelm_core.agreement.intervals`).
    n_resamples, seed : int
        Bootstrap size, and the seed of the bootstrap and of the generalized interval.
    confidence : float
        Confidence level of the intervals.
    kappa_a, kappa_b : pandas.Series, optional
        Raw scores on the rating scale for the quadratic-weighted kappa; no kappa when absent.
    kappa_labels : sequence of int
        The rating scale of the kappa.
    same_scale : bool
        Both sides are on one scale, so absolute agreement means something (False for a metric).

    Returns
    -------
    pandas.DataFrame
        One row per form and interval method, columns ``method``, ``estimate``, ``ci_low``, ``ci_high``,
        ``ci_method`` (``F``, ``GCI (raters fixed)``, ``GCI (raters random)`` or ``bootstrap-...``),
        ``n_items``, ``pearson_r``, ``spearman_rho``, ``kappa_qw``, ``note``, ``items_used``.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import pair_agreement
    >>> a = pd.Series([1.0, 2, 3, 4, 5], index=list("vwxyz"))
    >>> b = pd.Series([1.5, 2, 2.5, 4, 4], index=list("vwxyz"))
    >>> row = pair_agreement(a, b).iloc[0]
    >>> row["method"], int(row["n_items"]), round(float(row["estimate"]), 3)
    ('ICC3k', 5, 0.98)
    """
    if bootstrap is not None:
        check_bootstrap(bootstrap)
    check_pair_forms(icc_types)
    check_raters(raters)
    raw = pd.concat([a, b], axis=1, keys=["a", "b"], join="inner").sort_index()
    sides = []
    for side in (a, b):
        values = side.to_numpy(dtype=float)
        sides.append(pd.Series(zscore_within(values) if standardize else values, index=side.index))
    joined = pd.concat(sides, axis=1, keys=["a", "b"], join="inner").sort_index()
    kappa_pairs = None
    if kappa_a is not None and kappa_b is not None:
        kj = pd.concat([kappa_a, kappa_b], axis=1, join="inner").dropna().to_numpy(dtype=float)
        kappa_pairs = (kj[:, 0], kj[:, 1])
    records = pair_records(
        joined["a"].to_numpy(),
        joined["b"].to_numpy(),
        tuple(str(i) for i in joined.index.tolist()),
        kappa_pairs,
        raw=(raw["a"].to_numpy(dtype=float), raw["b"].to_numpy(dtype=float)) if same_scale else None,
        raters=raters,
        icc_types=icc_types,
        bootstrap=bootstrap,
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        kappa_labels=kappa_labels,
    )
    return pd.DataFrame(records, columns=list(PAIR_COLUMNS))


def _absolute_rows(
    raw: tuple[NDArray[np.float64], NDArray[np.float64]] | None,
    forms: Sequence[str],
    raters: str,
    confidence: float,
    seed: int,
) -> dict[str, dict[str, object]]:
    """ICC(A,1) and ICC(A,k) on the raw scale with their generalized interval, or NaN with the reason."""
    if raw is None:
        return {t: {"estimate": np.nan, "ci_low": np.nan, "ci_high": np.nan, "note": NOT_ON_SCALE} for t in forms}
    matrix = np.column_stack(raw)
    records = {rec["type"]: rec for rec in icc_records(matrix, confidence)}
    out: dict[str, dict[str, object]] = {}
    defined = [t for t in forms if not np.isnan(float(records[t]["icc"]))]
    bounds = absolute_agreement_interval(matrix, raters, confidence, seed=seed) if defined else {}
    for t in forms:
        rec = records[t]
        estimate = float(rec["icc"])  # type: ignore[arg-type]
        low, high = bounds.get(t, (np.nan, np.nan))
        notes = [str(rec["note"])] if rec["note"] else []
        if t in bounds and raters == "random" and matrix.shape[1] == 2:
            notes.append(TWO_RANDOM_RATERS)
        if t in bounds and estimate < low:
            notes.append("the estimate is below 0, where the model's ICC cannot be: read the interval")
        out[t] = {"estimate": estimate, "ci_low": low, "ci_high": high, "note": "; ".join(notes)}
    return out


def pair_records(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    items: tuple[str, ...],
    kappa_pairs: tuple[NDArray[np.float64], NDArray[np.float64]] | None,
    *,
    icc_types: Sequence[str],
    bootstrap: str | None,
    n_resamples: int,
    seed: int,
    confidence: float,
    kappa_labels: Sequence[int],
    raw: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
    raters: str = "fixed",
) -> list[dict[str, object]]:
    """:func:`pair_agreement`'s rows from the two sides already aligned on the shared ``items`` (sorted).

    ``x`` and ``y`` are the (z-scored) scores of the shared items in the order of ``items``, NaN where a
    constant side left them undefined; ``raw`` the same items' raw scores (None when the two sides are not
    on one scale, which leaves absolute agreement undefined); ``kappa_pairs`` the raw scores of the kappa
    (any order), or None. Callers that align many pairs at once (the summary table) come in here and skip
    the index work.
    """
    matrix = np.column_stack([x, y])
    matrix = matrix[~np.isnan(matrix).any(axis=1)]
    x, y = matrix[:, 0], matrix[:, 1]
    r, rho = _correlation("pearson", x, y), _correlation("spearman", x, y)
    kappa = float("nan")
    if kappa_pairs is not None and len(kappa_pairs[0]) >= MIN_ITEMS:
        kappa = weighted_kappa(kappa_pairs[0], kappa_pairs[1], labels=kappa_labels)
    note = ""
    if len(items) >= MIN_ITEMS and len(matrix) < len(items):
        note = "a rater gave the same score to every item, so its z-scores are undefined"
    # The shared items count as used even when a constant rater leaves the statistics undefined.
    common = {"n_items": len(items), "pearson_r": r, "spearman_rho": rho, "kappa_qw": kappa, "items_used": items}
    consistency = [t for t in icc_types if t in CONSISTENCY_FORMS]
    absolute = [t for t in icc_types if t in ABSOLUTE_FORMS]
    f_rows = {rec["type"]: rec for rec in icc_records(matrix, confidence)}
    found: dict[str, dict[str, object]] = {
        t: {"estimate": f_rows[t]["icc"], "ci_low": f_rows[t]["ci_low"], "ci_high": f_rows[t]["ci_high"],
            "ci_method": "F", "note": note or f_rows[t]["note"]}
        for t in consistency
    }
    if absolute:
        few = len(items) < MIN_ITEMS
        for t, rec in _absolute_rows(None if few else raw, absolute, raters, confidence, seed).items():
            found[t] = {**rec, "ci_method": CI_METHODS[raters]}
            if few:
                found[t]["note"] = f_rows[t]["note"]
    rows = [{"method": t, **found[t], **common} for t in icc_types]
    if bootstrap is not None and consistency:
        boot = bootstrap_records(matrix, consistency, n_resamples, bootstrap, confidence, seed)
        rows += [
            {
                "method": rec["type"],
                "estimate": rec["estimate"],
                "ci_low": rec["ci_low"],
                "ci_high": rec["ci_high"],
                "ci_method": rec["ci_method"],
                "note": note or rec["note"],
                **common,
            }
            for rec in boot
        ]
    return rows
