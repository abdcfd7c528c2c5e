"""Agreement that uses every overlapping clinician, not one pair: designs where raters vary by item.

MedHELM gave each item to two of 17 clinicians, so a two-way ICC over "the clinicians" drops almost
everything. The statistics here accept any number of ratings per item: the one-way ICC(1) with the
adjusted group size k0, Krippendorff's alpha, and each clinician against the mean of the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse

from medhelm_core.agreement.contract import (
    COMPOSITE,
    MIN_ITEMS,
    checked_scores,
    rater_scores,
    shared_ids,
    validate_long,
)
from medhelm_core.agreement.icc import (
    f_intervals,
    icc_from_sums_of_squares,
    undefined_note,
    weighted_sums_of_squares,
)
from medhelm_core.agreement.pairs import zscore_within
from medhelm_core.agreement.special import average_ranks, f_quantile, f_survival

Float = NDArray[np.float64]
Codes = NDArray[np.intp]

ALPHA_LEVELS: tuple[str, ...] = ("interval", "ordinal")


@dataclass(frozen=True)
class CodedScores:
    """One score per (item, rater), the ids coded once: ``item`` and ``rater`` are codes into ``item_names`` and
    ``rater_names``, both in sorted id order (interned strings). A benchmark scope codes its ids once
    (:class:`~medhelm_core.agreement.scopes.ScopeScores`) and the clinicians' one-way ICC and leave-one-out figures
    reuse them, instead of each hashing the same 40,000 id strings again."""

    item: Codes
    rater: Codes
    score: Float
    n_ratings: NDArray[np.int64]
    item_names: NDArray[np.object_]
    rater_names: NDArray[np.object_]

    @classmethod
    def of(cls, frame: pd.DataFrame, targets: str = "item_id", raters: str = "rater_id", ratings: str = "score",
           n_ratings: str | None = None) -> CodedScores:
        """Code a frame's ids (as strings, in sorted order); ``n_ratings`` names the column of ratings behind each
        score (default one each)."""
        item, items = pd.factorize(frame[targets].astype(str), sort=True)
        rater, names = pd.factorize(frame[raters].astype(str), sort=True)
        behind = (frame[n_ratings].to_numpy(dtype=np.int64) if n_ratings is not None
                  else np.ones(len(frame), dtype=np.int64))
        return cls(item, rater, frame[ratings].to_numpy(dtype=float), behind, shared_ids(pd.Index(items)),
                   shared_ids(pd.Index(names)))

    def compacted(self) -> CodedScores:
        """The same scores with codes only for the items and raters that have a score (in the same order)."""
        items, item = np.unique(self.item, return_inverse=True)
        raters, rater = np.unique(self.rater, return_inverse=True)
        return CodedScores(item.astype(np.intp), rater.astype(np.intp), self.score, self.n_ratings,
                           self.item_names[items], self.rater_names[raters])

    def rows(self, keep: NDArray[np.bool_]) -> CodedScores:
        """The scores where ``keep`` is true, with the same codes."""
        return CodedScores(self.item[keep], self.rater[keep], self.score[keep], self.n_ratings[keep],
                           self.item_names, self.rater_names)


def icc1_unbalanced(
    data: pd.DataFrame,
    targets: str = "item_id",
    raters: str = "rater_id",
    ratings: str = "score",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One-way random ICC(1) and ICC(1,k0) when items have different numbers of ratings.

    Uses the unbalanced one-way ANOVA: MSB and MSW from all ratings of the items rated at least twice,
    and the adjusted group size k0 = (N - sum(k_i^2) / N) / (n - 1) in place of k (Shrout & Fleiss
    1979; Donner 1986). Items rated once are left out: they carry no information on agreement. On a
    balanced design this equals pingouin's ``ICC(1,1)`` and ``ICC(1,k)``.

    Parameters
    ----------
    data : pandas.DataFrame
        Long table, one row per (target, rater).
    targets, raters, ratings : str
        Column names of the items, the raters and the scores.
    confidence : float
        Confidence level of the F-based interval (approximate when unbalanced).

    Returns
    -------
    pandas.DataFrame
        Two rows, ``type`` ICC1 and ICC1k, with ``icc``, ``F``, ``df1``, ``df2``, ``pval``, ``ci_low``,
        ``ci_high``, ``k0``, ``n_items``, ``n_ratings``, ``n_raters``, ``items_used`` and ``raters_used``
        (sorted tuples) and ``note``.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import icc1_unbalanced
    >>> d = pd.DataFrame({"item_id": list("aabbbccdd"), "rater_id": list("xyxyzyzxz"),
    ...                   "score": [1, 2, 4, 5, 4, 2, 3, 5, 4]})
    >>> icc1_unbalanced(d).loc[0, "k0"].round(3)
    np.float64(2.222)
    """
    return icc1_from_codes(CodedScores.of(checked_scores(data, targets, raters, ratings), targets, raters, ratings),
                           confidence)


def icc1_from_codes(scores: CodedScores, confidence: float = 0.95) -> pd.DataFrame:
    """:func:`icc1_unbalanced` on scores already coded (one per item and rater)."""
    sizes = np.bincount(scores.item, minlength=len(scores.item_names))
    kept = scores.rows(sizes[scores.item] >= 2)
    items = tuple(kept.item_names[np.flatnonzero(sizes >= 2)].tolist())
    used_raters = tuple(kept.rater_names[np.unique(kept.rater)].tolist())
    n, big_n = len(items), len(kept.score)
    base = {
        "n_items": n,
        "n_ratings": big_n,
        "n_raters": len(used_raters),
        "items_used": items,
        "raters_used": used_raters,
    }

    def table(values: dict[str, float], note: str) -> pd.DataFrame:
        rows = []
        for t in ("ICC1", "ICC1k"):
            rows.append(
                {
                    "type": t,
                    "icc": values.get(t, np.nan),
                    "F": values.get("F", np.nan),
                    "df1": values.get("df1", np.nan),
                    "df2": values.get("df2", np.nan),
                    "pval": values.get("pval", np.nan),
                    "ci_low": values.get(t + "_low", np.nan),
                    "ci_high": values.get(t + "_high", np.nan),
                    "k0": values.get("k0", np.nan),
                    **base,
                    "note": note,
                }
            )
        return pd.DataFrame(rows)

    if n < MIN_ITEMS:
        return table({}, f"fewer than {MIN_ITEMS} items rated at least twice (n={n})")
    score = pd.Series(kept.score)
    groups = score.groupby(kept.item, sort=True)  # integer codes in sorted id order: the groups of the ids
    k_i = groups.size().to_numpy(dtype=float)
    means = groups.mean().to_numpy()
    grand = score.mean()
    ssb = float((k_i * (means - grand) ** 2).sum())
    ssw = float(((score - groups.transform("mean")) ** 2).sum())
    df1, df2 = n - 1, big_n - n
    msb, msw = ssb / df1, ssw / df2
    k0 = (big_n - (k_i**2).sum() / big_n) / df1
    if msb <= 0 or msw <= 0:
        note = "no variance between items" if msb <= 0 else "every item has identical ratings"
        return table({"k0": k0}, note)
    f_val = msb / msw
    a = 1 - confidence
    f_l = f_val / f_quantile(1 - a / 2, df1, df2)
    f_u = f_val * f_quantile(1 - a / 2, df2, df1)
    values = {
        "ICC1": (msb - msw) / (msb + (k0 - 1) * msw),
        "ICC1k": (msb - msw) / msb,
        "F": f_val,
        "df1": df1,
        "df2": df2,
        "pval": float(f_survival(f_val, df1, df2)),
        "k0": k0,
        "ICC1_low": (f_l - 1) / (f_l + k0 - 1),
        "ICC1_high": (f_u - 1) / (f_u + k0 - 1),
        "ICC1k_low": 1 - 1 / f_l,
        "ICC1k_high": 1 - 1 / f_u,
    }
    return table(values, "")


def krippendorff_alpha(
    data: pd.DataFrame,
    units: str = "item_id",
    raters: str = "rater_id",
    ratings: str = "score",
    levels: Sequence[str] = ALPHA_LEVELS,
) -> pd.DataFrame:
    """Krippendorff's alpha over all raters, any number of ratings per item (the ``krippendorff`` package).

    Parameters
    ----------
    data : pandas.DataFrame
        Long table, one row per (unit, rater).
    units, raters, ratings : str
        Column names of the items, the raters and the scores.
    levels : sequence of {"interval", "ordinal", "nominal", "ratio"}
        Levels of measurement to report; ordinal ranks the distinct observed values.

    Returns
    -------
    pandas.DataFrame
        One row per level with ``method`` (``alpha_interval`` ...), ``estimate``, ``n_items`` (items with
        two or more ratings, the only ones alpha uses), ``n_ratings``, ``n_raters``, ``items_used``,
        ``raters_used`` and ``note``.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import krippendorff_alpha
    >>> d = pd.DataFrame({"item_id": list("aabbccdd"), "rater_id": list("xyxyxyxy"),
    ...                   "score": [1, 1, 3, 3, 5, 4, 2, 2]})
    >>> krippendorff_alpha(d, levels=["interval"]).loc[0, "estimate"].round(3)
    np.float64(0.937)
    """
    d = checked_scores(data, units, raters, ratings)
    d = d[d.groupby(units)[ratings].transform("size") >= 2]
    items = tuple(sorted(d[units].astype(str).unique()))
    used_raters = tuple(sorted(d[raters].astype(str).unique()))
    base = {
        "n_items": len(items),
        "n_ratings": len(d),
        "n_raters": len(used_raters),
        "items_used": items,
        "raters_used": used_raters,
    }
    rows = []
    for level in levels:
        note, value = "", np.nan
        if len(items) < MIN_ITEMS:
            note = f"fewer than {MIN_ITEMS} items rated at least twice (n={len(items)})"
        elif d[ratings].nunique() < 2:
            note = "every rating has the same value"
        else:
            matrix = d.pivot(index=raters, columns=units, values=ratings).to_numpy(dtype=float)
            value = float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level))
        rows.append({"method": f"alpha_{level}", "estimate": value, **base, "note": note})
    return pd.DataFrame(rows)


def _pair_figures(
    pairs: list[tuple[dict[str, object], Float, Float]], standardize: bool, confidence: float
) -> None:
    """Fill each clinician's row with Pearson's r, Spearman's rho and ICC(3,k) with its F interval for their pair
    (their scores, the others' mean), all clinicians at once: the pairs are stacked and each is one block of a
    single weighted two-way ANOVA (:func:`~medhelm_core.agreement.icc.weighted_sums_of_squares`), so the F
    quantiles are one vectorised call instead of fifty, and the correlations segment sums."""
    if not pairs:
        return
    sizes = np.array([x.size for _, x, _ in pairs])
    starts = np.concatenate([[0], np.cumsum(sizes)])
    blocks = sparse.csr_matrix((np.ones(starts[-1]), np.arange(starts[-1]), starts))
    segment = np.repeat(np.arange(sizes.size), sizes)  # each stacked value's block
    x = np.concatenate([p[1] for p in pairs])
    y = np.concatenate([p[2] for p in pairs])
    ranks = [_segment_ranks(values, segment, starts) for values in (x, y)]
    varies = np.array([np.ptp(p[1]) > 0 and np.ptp(p[2]) > 0 for p in pairs])  # else no correlation is defined
    pearson = np.where(varies, _segment_correlation(blocks, segment, x, y), np.nan)
    spearman = np.where(varies, _segment_correlation(blocks, segment, *ranks), np.nan)
    if standardize:
        x = np.concatenate([zscore_within(p[1]) for p in pairs])
        y = np.concatenate([zscore_within(p[2]) for p in pairs])
    ss = weighted_sums_of_squares(np.column_stack([x, y]), blocks)
    icc = icc_from_sums_of_squares(ss)["ICC3k"]
    low, high = f_intervals(ss, confidence)["ICC3k"]
    for n, (row, _, _) in enumerate(pairs):
        row["pearson_r"], row["spearman_rho"] = float(pearson[n]), float(spearman[n])
        if np.isnan(icc[n]):
            row["note"] = "no variance between items"
            continue
        row.update(icc3k=float(icc[n]), ci_low=float(low[n]), ci_high=float(high[n]),
                   note=undefined_note(float(icc[n]), float(low[n]), float(high[n])))


def _segment_ranks(values: Float, segment: NDArray[np.intp], starts: NDArray[np.intp]) -> Float:
    """Each block's values ranked within the block (ties get their average rank), in one ranking: the blocks are
    ranked as one sequence keyed by (block, value), and each block's first rank (at ``starts``) is taken back
    to 1."""
    _, codes = np.unique(values, return_inverse=True)
    ranked = average_ranks(segment * (int(codes.max()) + 1) + codes)
    return ranked - starts[segment]


def _segment_correlation(blocks: sparse.csr_matrix, segment: NDArray[np.intp], x: Float, y: Float) -> Float:
    """Pearson's r within each block of ``x`` and ``y`` (two-pass: centred on each block's mean)."""
    sizes = np.bincount(segment)
    dx = x - (blocks @ x / sizes)[segment]
    dy = y - (blocks @ y / sizes)[segment]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (blocks @ (dx * dy)) / np.sqrt((blocks @ (dx * dx)) * (blocks @ (dy * dy)))
    return np.clip(r, -1.0, 1.0)


def leave_one_clinician_out(
    long: pd.DataFrame,
    criterion: str = COMPOSITE,
    criteria: Sequence[str] | None = None,
    standardize: bool = True,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Each clinician against the mean of the other clinicians on the items they share.

    Parameters
    ----------
    long : pandas.DataFrame
        Ratings in the long contract (see :mod:`medhelm_core.agreement`); only clinicians are used.
    criterion : str
        A criterion, or ``"composite"`` (mean of ``criteria``).
    criteria : sequence of str, optional
        Criteria of the composite (default: all the clinicians used).
    standardize : bool
        z-score the clinician's and the others' mean scores over the shared items before the ICC, as
        MedHELM's protocol does (Pearson and Spearman do not depend on it).
    confidence : float
        Confidence level of the F interval of ICC(3,k).

    Returns
    -------
    pandas.DataFrame
        One row per clinician: ``clinician``, ``icc3k``, ``ci_low``, ``ci_high``, ``pearson_r``,
        ``spearman_rho``, ``n_items`` (shared items), ``n_ratings`` (all ratings on them), ``n_others``,
        ``items_used``, ``others_used``, ``note``.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import leave_one_clinician_out
    >>> rows = [(i, r, s) for i, r, s in [("a", "c1", 1), ("a", "c2", 2), ("b", "c1", 3), ("b", "c2", 4),
    ...         ("c", "c1", 5), ("c", "c3", 5), ("d", "c2", 2), ("d", "c3", 1)]]
    >>> long = pd.DataFrame(rows, columns=["item_id", "rater_id", "score"]).assign(
    ...     rater_kind="clinician", criterion="accuracy", benchmark="medi_qa")
    >>> leave_one_clinician_out(long, "accuracy").set_index("clinician").loc["c1", "n_items"]
    np.int64(3)
    """
    scores = rater_scores(validate_long(long), criterion, criteria)
    return loco_from_scores(scores, standardize, confidence)


def loco_from_scores(scores: pd.DataFrame, standardize: bool = True, confidence: float = 0.95) -> pd.DataFrame:
    """:func:`leave_one_clinician_out` on per-(item, rater) scores already reduced to one criterion.

    Parameters
    ----------
    scores : pandas.DataFrame
        As returned by :func:`medhelm_core.agreement.rater_scores`; non-clinicians are ignored.
    standardize : bool
        z-score both sides over the shared items before the ICC.
    confidence : float
        Confidence level of the F interval of ICC(3,k).

    Returns
    -------
    pandas.DataFrame
        As :func:`leave_one_clinician_out`.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.incomplete import loco_from_scores
    >>> s = pd.DataFrame({"item_id": list("aabb"), "rater_id": ["c1", "c2"] * 2,
    ...                   "rater_kind": "clinician", "score": [1.0, 2, 3, 4], "n_ratings": 1})
    >>> loco_from_scores(s).loc[0, "note"]
    'fewer than 3 shared items (n=2)'
    """
    clin = scores[scores["rater_kind"] == "clinician"]
    return loco_from_codes(CodedScores.of(clin, n_ratings="n_ratings"), standardize, confidence)


def loco_from_codes(scores: CodedScores, standardize: bool = True, confidence: float = 0.95) -> pd.DataFrame:
    """:func:`loco_from_scores` on the clinicians' scores already coded (one per item and clinician)."""
    scores = scores.compacted()
    # Everything from the ratings themselves (a few per item), never an items x clinicians matrix: at 100,000 items
    # and 50 clinicians that matrix had 5 million cells and was scanned once per clinician.
    item_codes, rater_codes, score = scores.item, scores.rater, scores.score
    n_items, n_raters = len(scores.item_names), len(scores.rater_names)
    count = np.bincount(item_codes, minlength=n_items)  # clinicians per item
    with np.errstate(divide="ignore", invalid="ignore"):  # items rated once are never used
        others_mean = (np.bincount(item_codes, weights=score, minlength=n_items)[item_codes] - score) / (
            count[item_codes] - 1)
    # Each clinician's ratings of items someone else rated too, in clinician then item order: one slice each.
    order = np.lexsort((item_codes, rater_codes))
    order = order[count[item_codes[order]] > 1]
    owner, items = rater_codes[order], item_codes[order]
    starts = np.searchsorted(owner, np.arange(n_raters + 1))
    # Who else rated the items each clinician shares, and how many ratings those items hold: sparse products.
    shares = sparse.csr_matrix((np.ones(order.size), (owner, items)), shape=(n_raters, n_items))
    rates = sparse.csr_matrix((np.ones(item_codes.size), (item_codes, rater_codes)), shape=(n_items, n_raters))
    others_rated = (shares @ rates).toarray() > 0
    on_item = np.bincount(item_codes, weights=scores.n_ratings.astype(float), minlength=n_items)
    n_ratings = np.bincount(owner, weights=on_item[items], minlength=n_raters)
    item_ids = scores.item_names
    raters = pd.Index(scores.rater_names)
    rows, pairs = [], []
    for j in sorted(range(n_raters), key=lambda c: raters[c]):
        rater, part = raters[j], order[starts[j]:starts[j + 1]]
        x, y = score[part], others_mean[part]
        others = others_rated[j].copy()
        others[j] = False
        others_used = tuple(sorted(raters[others]))
        row = {
            "clinician": rater,
            "icc3k": np.nan,
            "ci_low": np.nan,
            "ci_high": np.nan,
            "pearson_r": np.nan,
            "spearman_rho": np.nan,
            "n_items": int(x.size),
            "n_ratings": int(n_ratings[j]),
            "n_others": len(others_used),
            "items_used": tuple(item_ids[items[starts[j]:starts[j + 1]]].tolist()),
            "others_used": others_used,
            "note": "",
        }
        rows.append(row)
        if x.size < MIN_ITEMS:
            row["note"] = f"fewer than {MIN_ITEMS} shared items (n={x.size})"
            continue
        if standardize and not (np.ptp(x) > 0 and np.ptp(y) > 0):
            row["note"] = "constant scores on the shared items"
        else:
            pairs.append((row, x, y))
    _pair_figures(pairs, standardize, confidence)
    cols = [
        "clinician",
        "icc3k",
        "ci_low",
        "ci_high",
        "pearson_r",
        "spearman_rho",
        "n_items",
        "n_ratings",
        "n_others",
        "items_used",
        "others_used",
        "note",
    ]
    # Tuples go in as ready-made object columns: pandas' inference over fifty 20,000-id tuples took 0.1 s.
    frame = {c: [row[c] for row in rows] for c in cols}
    for c in ("items_used", "others_used"):
        column = np.empty(len(rows), dtype=object)
        for n, value in enumerate(frame[c]):
            column[n] = value
        frame[c] = column
    return pd.DataFrame(frame, columns=cols)
