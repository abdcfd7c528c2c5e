"""A benchmark scope's per-(item, rater) scores for one criterion, coded once for all of its comparisons.

:func:`~medhelm_core.agreement.agreement_table` compares every jury, judge and metric with the mean
clinician, and the clinicians with each other, in every benchmark scope and criterion: about a hundred
pairs on a 20,000-item study. Done with pandas indexes of item-id strings, the lookups behind each pair
(joins, ``isin``, ``.loc``) cost far more than the statistics. Here item and rater ids are factorised once
per scope, in sorted order, so a rater is a slice of integer arrays, two raters' shared items are a sorted
intersection of codes, and item order (which fixes every sum, so every figure to the last bit) is the same
sorted id order the pandas route used.

A pair is aligned here; :func:`~medhelm_core.agreement.pairs.pair_records` computes its figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from medhelm_core.agreement.pairs import pair_records, shared_pair_codes, zscore_within

Codes = NDArray[np.intp]
Floats = NDArray[np.float64]


def on_scale(values: Floats, labels: Sequence[int]) -> bool:
    """True when every score lies on the rating scale (within half a point), as the kappa needs."""
    return bool(((values >= min(labels) - 0.5) & (values <= max(labels) + 0.5)).all())


@dataclass(frozen=True)
class Side:
    """One rater's scores in a scope: item codes in the scope's row order, scores, ratings behind each."""

    items: Codes
    scores: Floats
    n_ratings: NDArray[np.int64]


@dataclass(frozen=True)
class Pair:
    """A pair's figures (:func:`pair_records`' rows) and where the shared items sit on each side."""

    records: list[dict[str, object]]
    shared: Codes
    in_a: Codes
    in_b: Codes


class ScopeScores:
    """The output of :func:`~medhelm_core.agreement.rater_scores` for one benchmark scope and criterion, coded.

    Built per scope, as the pandas route computed it: a grouped mean's last bit depends on the whole frame
    it is taken over (pandas sums a group one way when the frame is sorted by the group keys and another
    way when it is not), so a scope's figures come from that scope's own frame.
    """

    def __init__(self, scores: pd.DataFrame) -> None:
        self.frame = scores
        self.item, items = pd.factorize(scores["item_id"], sort=True)
        self.item_names = items.to_numpy(dtype=object)
        self.rater, raters = pd.factorize(scores["rater_id"], sort=True)
        self.rater_names = raters.to_numpy(dtype=object)
        self.kind = scores["rater_kind"].to_numpy(dtype=object)
        self.score = scores["score"].to_numpy(dtype=float)
        self.n_ratings = scores["n_ratings"].to_numpy(dtype=np.int64)
        self.clin_rows = np.flatnonzero(self.kind == "clinician")
        self.other_rows = np.flatnonzero(self.kind != "clinician")
        # clin.groupby("item_id")["score"].mean() on integer codes: the same groups, in the same order, over
        # the same rows (so the same way of summing), without hashing 20,000 id strings.
        means = pd.Series(self.score[self.clin_rows]).groupby(self.item[self.clin_rows], sort=True).mean()
        mean_items = means.index.to_numpy(dtype=np.intp)
        clin_ratings = np.zeros(len(items), dtype=np.int64)
        np.add.at(clin_ratings, self.item[self.clin_rows], self.n_ratings[self.clin_rows])
        self.mean_clinician = Side(mean_items, means.to_numpy(dtype=float), clin_ratings[mean_items])

    @property
    def clinicians(self) -> pd.DataFrame:
        """The clinicians' rows as a frame (for the designs that use every clinician)."""
        return self.frame.iloc[self.clin_rows]

    def side(self, rater: int) -> Side:
        """One rater's scores in this scope, in row order (which fixes the z-score's sums)."""
        rows = np.flatnonzero(self.rater == rater)
        return Side(self.item[rows], self.score[rows], self.n_ratings[rows])

    def most_shared_pair(self) -> tuple[int, int, int, int] | None:
        """The two clinicians (rater codes) sharing the most items, with the count and the number of ties."""
        raters, rater_codes = np.unique(self.rater[self.clin_rows], return_inverse=True)
        items, item_codes = np.unique(self.item[self.clin_rows], return_inverse=True)
        best = shared_pair_codes(rater_codes, len(raters), item_codes, len(items))
        if best is None:
            return None
        i, j, shared, ties = best
        return int(raters[i]), int(raters[j]), shared, ties

    def others(self) -> list[tuple[int, str]]:
        """The jury, judges and metrics of this scope as (rater code, kind), in the table's order."""
        codes, first = np.unique(self.rater[self.other_rows], return_index=True)
        order = {"jury": 0, "judge": 1, "metric": 2}
        kinds = self.kind[self.other_rows[first]]
        return sorted(zip(codes.tolist(), kinds.tolist(), strict=True),
                      key=lambda rk: (order.get(rk[1], len(order)), self.rater_names[rk[0]]))

    def clinicians_on(self, items: Codes) -> tuple[str, ...]:
        """The clinicians who rated any of ``items`` in this scope, sorted."""
        rows = self.clin_rows[np.isin(self.item[self.clin_rows], items)]
        return tuple(self.rater_names[np.unique(self.rater[rows])].tolist())

    def pair(self, a: Side, b: Side, *, kappa: bool, a_z: Floats | None = None, **kwargs: object) -> Pair:
        """:func:`pair_records` for two sides: each z-scored over all its own scores, then the shared items.

        ``a_z`` passes side ``a`` already z-scored (the mean clinician is set against every other rater).
        """
        za = zscore_within(a.scores) if a_z is None else a_z
        zb = zscore_within(b.scores)
        shared, in_a, in_b = np.intersect1d(a.items, b.items, assume_unique=True, return_indices=True)
        items = tuple(self.item_names[shared].tolist())
        kappa_pairs = (a.scores[in_a], b.scores[in_b]) if kappa else None
        records = pair_records(za[in_a], zb[in_b], items, kappa_pairs, **kwargs)  # type: ignore[arg-type]
        return Pair(records, shared, in_a, in_b)
