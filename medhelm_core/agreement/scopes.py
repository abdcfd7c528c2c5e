"""Benchmark scopes: which benchmarks and criteria a table covers, and a scope's scores coded once.

Every table of the engine is computed per scope: one block per benchmark and one ``pooled`` over all the
benchmarks chosen (:func:`benchmark_scopes`), on the criteria the clinicians rated
(:func:`clinician_criteria`).

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

from collections.abc import Callable, Hashable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from medhelm_core.agreement.contract import COMPOSITE, rater_scores, shared_ids
from medhelm_core.agreement.incomplete import CodedScores
from medhelm_core.agreement.pairs import pair_records, shared_pair_codes, zscore_within
from medhelm_core.errors import AgreementInputError

Codes = NDArray[np.intp]
Floats = NDArray[np.float64]
POOLED = "pooled"


def chosen_benchmarks(data: pd.DataFrame, benchmarks: Sequence[str] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The rows of the chosen benchmarks and their names: all, sorted, when None; else as asked, each known.

    Parameters
    ----------
    data : pandas.DataFrame
        A table with a ``benchmark`` column.
    benchmarks : sequence of str, optional
        The benchmarks to keep (default all).

    Returns
    -------
    rows : pandas.DataFrame
        The rows of those benchmarks.
    names : list of str
        The benchmarks, sorted when all, else in the order asked without repeats.

    Raises
    ------
    AgreementInputError
        When an asked benchmark has no rows.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.scopes import chosen_benchmarks
    >>> d = pd.DataFrame({"benchmark": ["medi_qa", "aci_bench", "medi_qa"]})
    >>> chosen_benchmarks(d)[1], len(chosen_benchmarks(d, ["medi_qa"])[0])
    (['aci_bench', 'medi_qa'], 2)
    """
    known = sorted(data["benchmark"].unique())
    if benchmarks is None:
        return data, known
    unknown = [b for b in benchmarks if b not in known]
    if unknown:
        raise AgreementInputError(f"benchmark(s) {', '.join(unknown)} have no ratings; known: {', '.join(known)}")
    chosen = list(dict.fromkeys(benchmarks))
    return data[data["benchmark"].isin(chosen)], chosen


def benchmark_scopes(data: pd.DataFrame, benchmarks: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    """One scope per benchmark, in the order given, then ``pooled`` over all of ``data``.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.scopes import benchmark_scopes
    >>> d = pd.DataFrame({"benchmark": ["medi_qa", "aci_bench", "medi_qa"]})
    >>> [(name, len(rows)) for name, rows in benchmark_scopes(d, ["aci_bench", "medi_qa"])]
    [('aci_bench', 1), ('medi_qa', 2), ('pooled', 3)]
    """
    return [(b, data[data["benchmark"] == b]) for b in benchmarks] + [(POOLED, data)]


def criterion_scopes(
    data: pd.DataFrame, benchmarks: Sequence[str], rubric: Sequence[str]
) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """Every benchmark scope (then ``pooled``) and criterion (``composite`` first) with its scores per item and rater.

    Parameters
    ----------
    data : pandas.DataFrame
        A validated long table, already cut to the chosen benchmarks.
    benchmarks : sequence of str
        The benchmarks, in the order of the table.
    rubric : sequence of str
        The criteria, in the rubric's order; the composite is their mean.

    Yields
    ------
    tuple of (str, str, pandas.DataFrame)
        The benchmark (or ``pooled``), the criterion and :func:`~medhelm_core.agreement.rater_scores` of that
        scope, each scope's scores computed from its own rows (which fixes their sums to the last bit).

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement.scopes import criterion_scopes
    >>> d = pd.DataFrame({"item_id": ["i1", "i2"], "rater_id": ["c1"] * 2, "rater_kind": ["clinician"] * 2,
    ...                   "criterion": ["accuracy"] * 2, "score": [4.0, 3.0], "benchmark": ["a", "b"]})
    >>> [(b, c, len(s)) for b, c, s in criterion_scopes(d, ["a", "b"], ["accuracy"])][:3]
    [('a', 'composite', 1), ('a', 'accuracy', 1), ('b', 'composite', 1)]
    """
    for bench, part in benchmark_scopes(data, benchmarks):
        for criterion in [COMPOSITE, *rubric]:
            yield bench, criterion, rater_scores(part, criterion, rubric)


def reused_rows(
    cache: MutableMapping[Hashable, list[dict[str, object]]] | None,
    versions: Mapping[str, Hashable] | None,
    bench: str,
    key: Hashable,
    compute: Callable[[], list[dict[str, object]]],
) -> list[dict[str, object]]:
    """One scope's rows: taken from ``cache`` when the scope has a version in ``versions`` and rows were kept
    under it and ``key`` (what else they depend on: the criterion, the settings, the benchmarks pooled), else
    computed (and kept when the scope has a version). How a table recomputes only the scopes a change touched."""
    version = versions.get(bench) if versions is not None else None
    if cache is None or version is None:
        return compute()
    found = cache.get((key, version))
    if found is None:
        found = cache[(key, version)] = compute()
    return found


def clinician_criteria(clin: pd.DataFrame, criteria: Sequence[str] | None = None) -> list[str]:
    """The criteria to report: those the clinicians rated, in their rubric's order (accuracy, completeness,
    clarity; not alphabetical), or the requested ones, each of which the clinicians must have rated."""
    rubric = list(clin["criterion"].unique())  # in order of first appearance
    if criteria is None:
        return rubric
    unknown = [c for c in criteria if c not in rubric]
    if unknown:
        raise AgreementInputError(
            f"criterion/criteria {', '.join(unknown)} not rated by clinicians; known: {', '.join(rubric)}"
        )
    return list(dict.fromkeys(criteria))


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
        self.item_names = shared_ids(items)
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

    def clinician_codes(self) -> CodedScores:
        """The clinicians' scores with this scope's codes (for the one-way ICC and each clinician against the
        others, which would otherwise code the same ids again)."""
        rows = self.clin_rows
        return CodedScores(self.item[rows], self.rater[rows], self.score[rows], self.n_ratings[rows],
                           self.item_names, self.rater_names)

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

    def pair(
        self,
        a: Side,
        b: Side,
        *,
        kappa: bool,
        absolute: bool = False,
        raters: str = "fixed",
        a_z: Floats | None = None,
        **kwargs: object,
    ) -> Pair:
        """:func:`pair_records` for two sides: each z-scored over all its own scores, then the shared items.

        ``a_z`` passes side ``a`` already z-scored (the mean clinician is set against every other rater);
        ``absolute`` says both sides are on the rating scale, so absolute agreement is computed on the raw
        scores (with ``raters`` ``fixed`` or ``random`` for its interval).
        """
        za = zscore_within(a.scores) if a_z is None else a_z
        zb = zscore_within(b.scores)
        shared, in_a, in_b = np.intersect1d(a.items, b.items, assume_unique=True, return_indices=True)
        items = tuple(self.item_names[shared].tolist())
        kappa_pairs = (a.scores[in_a], b.scores[in_b]) if kappa else None
        raw = (a.scores[in_a], b.scores[in_b]) if absolute else None
        records = pair_records(za[in_a], zb[in_b], items, kappa_pairs, raw=raw, raters=raters,
                               **kwargs)  # type: ignore[arg-type]
        return Pair(records, shared, in_a, in_b)
