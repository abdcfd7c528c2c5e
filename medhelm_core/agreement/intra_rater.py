"""Intra-rater agreement: how closely a clinician repeats their own scores on an item shown to them again.

Test-retest (see :mod:`medhelm_core.rating.retest`) shows a share of a clinician's rated items to them a second
time, later and unannounced. Each repeat gives a pair (first score, repeat score) per criterion. Koo & Li
(2016) recommend for intra-rater reliability the two-way model with absolute agreement for a single
rating, ICC(A,1) (pingouin's ``ICC2``; the random and the mixed model give the same number): the two
occasions are the "raters", and a clinician who drifts upwards loses agreement, not just correlation.
Beside it: the share of exact repeats, the share within one point, the mean absolute difference, and the
quadratic-weighted kappa, which stay readable when a clinician has only a handful of repeats.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from medhelm_core.agreement.contract import COMPOSITE, MIN_ITEMS, require_columns
from medhelm_core.agreement.icc import icc_records
from medhelm_core.agreement.intervals import absolute_agreement_interval
from medhelm_core.agreement.kappa import weighted_kappa
from medhelm_core.errors import AgreementInputError

PAIR_INPUT_COLUMNS: tuple[str, ...] = ("rater_id", "item_id", "criterion", "first", "repeat")
ALL_CLINICIANS = "all clinicians"
INTRA_COLUMNS: tuple[str, ...] = (
    "clinician",
    "criterion",
    "n_pairs",
    "exact",
    "within_one",
    "mean_abs_diff",
    "icc_a1",
    "ci_low",
    "ci_high",
    "kappa_qw",
    "note",
)


def _checked(pairs: pd.DataFrame) -> pd.DataFrame:
    require_columns(pairs, PAIR_INPUT_COLUMNS, "retest pairs")
    out = pairs[list(PAIR_INPUT_COLUMNS)].copy()
    for col in ("first", "repeat"):
        out[col] = pd.to_numeric(out[col], errors="coerce")
    bad = out[["first", "repeat"]].isna().any(axis=1)
    if bad.any():
        row = out[bad].iloc[0]
        raise AgreementInputError(
            f"retest pair of {row['rater_id']!r} on item {row['item_id']} ({row['criterion']}) lacks a numeric score"
        )
    if out.duplicated(["rater_id", "item_id", "criterion"]).any():
        raise AgreementInputError("a (rater, item, criterion) appears twice in the retest pairs")
    return out.astype({"rater_id": str, "item_id": str, "criterion": str})


def _with_composite(pairs: pd.DataFrame, criteria: Sequence[str]) -> pd.DataFrame:
    """Add the composite (mean of the criteria) where every criterion was scored on both occasions."""
    scored = pairs[pairs["criterion"].isin(list(criteria))]
    grouped = scored.groupby(["rater_id", "item_id"])
    full = grouped["criterion"].transform("nunique") == len(criteria)
    comp = scored[full].groupby(["rater_id", "item_id"], as_index=False)[["first", "repeat"]].mean()
    return pd.concat([pairs, comp.assign(criterion=COMPOSITE)], ignore_index=True)


def _summary(first: np.ndarray, repeat: np.ndarray, labels: Sequence[int], integral: bool) -> dict[str, object]:
    n = int(first.size)
    diff = np.abs(first - repeat)
    row: dict[str, object] = {
        "n_pairs": n,
        "exact": float(np.mean(diff < 1e-9)) if n else np.nan,
        "within_one": float(np.mean(diff <= 1 + 1e-9)) if n else np.nan,
        "mean_abs_diff": float(diff.mean()) if n else np.nan,
        "icc_a1": np.nan,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "kappa_qw": np.nan,
        "note": "",
    }
    if n < MIN_ITEMS:
        row["note"] = f"fewer than {MIN_ITEMS} repeats (n={n})"
        return row
    pair = np.column_stack([first, repeat])
    icc = next(r for r in icc_records(pair) if r["type"] == "ICC2")
    row.update(icc_a1=icc["icc"], note=str(icc["note"]))
    if not np.isnan(float(icc["icc"])):  # type: ignore[arg-type]
        # The two occasions are these two occasions (fixed raters): the generalized interval covers 94-96%
        # where McGraw & Wong's F interval, which treats a drift between occasions as random, covers 100%.
        low, high = absolute_agreement_interval(pair, "fixed")["ICC2"]
        row.update(ci_low=low, ci_high=high)
    if integral:
        row["kappa_qw"] = weighted_kappa(first, repeat, labels=labels)
    return row


def intra_rater_agreement(
    pairs: pd.DataFrame,
    criteria: Sequence[str] | None = None,
    labels: Sequence[int] = (1, 2, 3, 4, 5),
) -> pd.DataFrame:
    """Each clinician's agreement with themselves, per criterion and on the composite, and all pooled.

    Parameters
    ----------
    pairs : pandas.DataFrame
        One row per clinician, item and criterion with ``rater_id``, ``item_id``, ``criterion``,
        ``first`` (the score given first) and ``repeat`` (the score given when the item came back).
    criteria : sequence of str, optional
        The rubric's criteria in its order; the composite is their mean where all were scored both
        times (default: the criteria in the pairs, in order of appearance).
    labels : sequence of int
        The rating scale, for the weighted kappa (the composite, a mean, gets no kappa).

    Returns
    -------
    pandas.DataFrame
        Columns ``INTRA_COLUMNS``: ``clinician`` (and ``"all clinicians"`` pooling every pair),
        ``criterion`` (``composite`` first), ``n_pairs``, ``exact`` and ``within_one`` (shares of pairs),
        ``mean_abs_diff``, ``icc_a1`` with its generalized interval (occasions fixed) ``ci_low``/``ci_high``,
        ``kappa_qw`` and
        ``note`` (why a figure is missing).

    Raises
    ------
    AgreementInputError
        When a column is missing, a score is not a number or a pair appears twice.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.intra_rater import intra_rater_agreement
    >>> pairs = pd.DataFrame({"rater_id": ["c1"] * 4, "item_id": ["1", "2", "3", "4"],
    ...                       "criterion": ["accuracy"] * 4, "first": [5, 3, 4, 2], "repeat": [5, 3, 3, 2]})
    >>> row = intra_rater_agreement(pairs).query("clinician == 'c1' and criterion == 'accuracy'").iloc[0]
    >>> int(row["n_pairs"]), float(row["exact"]), round(float(row["icc_a1"]), 3)
    (4, 0.75, 0.923)
    """
    data = _checked(pairs)
    order = list(criteria) if criteria is not None else list(dict.fromkeys(data["criterion"]))
    if data.empty:
        return pd.DataFrame(columns=list(INTRA_COLUMNS))
    data = _with_composite(data, order)
    rows: list[dict[str, object]] = []
    groups = [(c, data[data["rater_id"] == c]) for c in sorted(data["rater_id"].unique())]
    groups.append((ALL_CLINICIANS, data))
    for clinician, part in groups:
        for criterion in [COMPOSITE, *order]:
            sub = part[part["criterion"] == criterion]
            first, repeat = sub["first"].to_numpy(dtype=float), sub["repeat"].to_numpy(dtype=float)
            stats = _summary(first, repeat, labels, integral=criterion != COMPOSITE)
            rows.append({"clinician": clinician, "criterion": criterion, **stats})
    return pd.DataFrame(rows, columns=list(INTRA_COLUMNS))
