"""Skew-robust agreement beside the ICC: Gwet's AC2 and the quadratic-weighted kappa, with bootstrap intervals.

Clinicians' scores cluster near the top of the scale, where kappa's chance term nearly equals the observed
agreement (the "kappa paradox") and the ICC's between-item variance shrinks. Gwet's AC2 with quadratic
weights (Gwet 2008, 2014; formulas in :mod:`medhelm_core.agreement.gwet`) stays close to the observed
agreement there; the weighted kappa is reported beside it because reviewers expect it.

Both are set beside the ICC for the same comparisons: the two clinicians sharing the most items, and the
mean clinician against the jury and against each judge. Scores are put on the rating scale first by
rounding to the nearest level (halves away from zero, as :func:`weighted_kappa` does): a mean of clinicians, a jury
mean and a composite (the mean of the criteria) all fall between levels.

With exactly two "raters" per item, both coefficients depend on the items only through the 5 x 5 table of
(first, second) score pairs. Resampling n items with replacement is then a multinomial draw of n pairs
from that table's cells with their observed shares, so the bootstrap costs the same for 50 items as for
50,000 (the interval is the same in distribution as one that resamples item indices; it is not the same
draw, so it differs from :func:`weighted_kappa_ci` on a given seed by Monte Carlo noise). The BCa
acceleration comes from the exact leave-one-item-out jackknife, which takes one value per occupied cell.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, MutableMapping, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from medhelm_core.agreement.bootstrap import bootstrap_interval, check_bootstrap
from medhelm_core.agreement.contract import COMPOSITE, MIN_ITEMS, rater_scores, validate_long
from medhelm_core.agreement.gwet import UNDEFINED as AC_UNDEFINED
from medhelm_core.agreement.gwet import chance_corrected, gwet_weights
from medhelm_core.agreement.kappa import UNDEFINED as KAPPA_UNDEFINED
from medhelm_core.agreement.kappa import kappa_from_cells, kappa_weights, paired_codes
from medhelm_core.agreement.pairs import most_shared_pair
from medhelm_core.agreement.protocol import CLINICIAN_PAIR, comparison_name
from medhelm_core.agreement.scopes import POOLED, benchmark_scopes, chosen_benchmarks, clinician_criteria, reused_rows
from medhelm_core.errors import AgreementInputError

Float = NDArray[np.float64]
ROBUST_METHODS: tuple[str, ...] = ("AC2", "kappa_qw")
ROBUST_COLUMNS: tuple[str, ...] = (
    "comparison",
    "benchmark",
    "criterion",
    "method",
    "estimate",
    "ci_low",
    "ci_high",
    "ci_method",
    "observed_agreement",
    "chance_agreement",
    "n_items",
    "note",
)


#: below this many items the bootstrap intervals of AC2 and kappa under-cover (benchmarks/interval_coverage.py)
FEW_ITEMS = 100
FEW_ITEMS_NOTE = (
    f"fewer than {FEW_ITEMS} items: this bootstrap interval covers about 91-93% at 30 items (coverage study), so "
    "it is somewhat too narrow"
)
# What each coefficient needs to be defined, for the notes of its interval.
_UNDEFINED = {"AC2": AC_UNDEFINED, "kappa_qw": KAPPA_UNDEFINED}


def _cells(a: ArrayLike, b: ArrayLike, labels: Sequence[int]) -> tuple[Float, int]:
    """Counts of (a, b) score pairs on the scale, flattened to m*m cells, after rounding to the levels."""
    x, y, m = paired_codes(a, b, labels)
    return np.bincount(x * m + y, minlength=m * m).astype(float), m


def _statistics(cells: Float, m: int, w_ac: Float, w_kappa: Float) -> dict[str, Float]:
    """AC2, its observed and chance agreement, and the weighted kappa of each row of a (B, m*m) cell matrix."""
    total = cells.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = (cells / total[:, None]).reshape(-1, m, m)
        # Two raters per item: p_a is the mean agreement weight of the pairs, pi_k the mean of the two margins.
        pa = np.einsum("bij,ij->b", p, w_ac)
        pi = (p.sum(axis=2) + p.sum(axis=1)) / 2
    ac2, pe = chance_corrected(pa, pi, w_ac)
    return {"AC2": ac2, "kappa_qw": kappa_from_cells(cells, w_kappa), "pa": pa, "pe": pe}


def scale_agreement(
    a: ArrayLike,
    b: ArrayLike,
    labels: Sequence[int] = (1, 2, 3, 4, 5),
    *,
    n_resamples: int = 2000,
    method: str = "bca",
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> pd.DataFrame:
    """Gwet's AC2 (quadratic weights) and the quadratic-weighted kappa of two raters, with bootstrap intervals.

    Parameters
    ----------
    a, b : array_like
        Paired scores, one per item; rounded to the nearest level of ``labels`` first.
    labels : sequence of int
        The rating scale (it fixes the weights and, for AC2, the number of categories).
    n_resamples : int
        Bootstrap resamples of the items (0: no interval).
    method : {"bca", "percentile"}
        Interval method.
    confidence : float
        Confidence level.
    seed : int or numpy.random.Generator
        Seed of the resampling.

    Returns
    -------
    pandas.DataFrame
        Two rows (``method`` ``AC2`` and ``kappa_qw``) with ``estimate``, ``ci_low``, ``ci_high``,
        ``ci_method``, ``observed_agreement`` and ``chance_agreement`` (AC2's p_a and p_e), ``n_items``
        and ``note``. The estimates equal :func:`~medhelm_core.agreement.gwet.gwet_ac` and
        :func:`~medhelm_core.agreement.kappa.weighted_kappa` on the same scores.

    Examples
    --------
    >>> import numpy as np
    >>> from medhelm_core.agreement.robust import scale_agreement
    >>> x = np.array([5, 5, 4, 5, 3, 4, 5, 5, 4, 5])
    >>> y = np.array([5, 4, 4, 5, 4, 4, 5, 5, 5, 5])
    >>> table = scale_agreement(x, y, seed=1).set_index("method")
    >>> round(float(table.loc["AC2", "estimate"]), 4), round(float(table.loc["kappa_qw", "estimate"]), 4)
    (0.9637, 0.5714)
    """
    check_bootstrap(method, confidence, n_resamples)
    cells, m = _cells(a, b, labels)
    n = int(cells.sum())
    w_ac = gwet_weights(labels, "quadratic")
    w_kappa = kappa_weights(m, "quadratic")
    point = {k: float(v[0]) for k, v in _statistics(cells[None, :], m, w_ac, w_kappa).items()}
    rows = []
    for name in ROBUST_METHODS:
        rows.append({"method": name, "estimate": point[name], "ci_low": np.nan, "ci_high": np.nan,
                     "ci_method": f"bootstrap-{method}" if n_resamples else "none",
                     "observed_agreement": point["pa"] if name == "AC2" else np.nan,
                     "chance_agreement": point["pe"] if name == "AC2" else np.nan, "n_items": n, "note": ""})
    if n < MIN_ITEMS:
        for row in rows:
            row.update(estimate=np.nan, note=f"fewer than {MIN_ITEMS} items (n={n})")
        return pd.DataFrame(rows, columns=list(ROBUST_COLUMNS[3:]))
    if n_resamples:
        rng = np.random.default_rng(seed)  # a Generator passes through unchanged
        boot = _statistics(rng.multinomial(n, cells / n, size=int(n_resamples)).astype(float), m, w_ac, w_kappa)
        occupied = np.flatnonzero(cells)
        leave_out = np.repeat(cells[None, :], occupied.size, axis=0)
        leave_out[np.arange(occupied.size), occupied] -= 1
        jack_cells = _statistics(leave_out, m, w_ac, w_kappa)
        for row in rows:
            # Every item in a cell leaves the same table behind: repeat each cell's jackknife value per item.
            jack = np.repeat(jack_cells[row["method"]], cells[occupied].astype(int))
            ci = bootstrap_interval(row["estimate"], boot[row["method"]], jack, method, confidence,
                                    undefined=_UNDEFINED[row["method"]])
            few = FEW_ITEMS_NOTE if n < FEW_ITEMS and np.isfinite(ci.low) else ""
            row.update(ci_low=ci.low, ci_high=ci.high, note="; ".join(p for p in (ci.note, few) if p))
    return pd.DataFrame(rows, columns=list(ROBUST_COLUMNS[3:]))


def robust_table(
    long: pd.DataFrame,
    benchmarks: Sequence[str] | None = None,
    criteria: Sequence[str] | None = None,
    *,
    labels: Sequence[int] = (1, 2, 3, 4, 5),
    n_resamples: int = 2000,
    method: str = "bca",
    confidence: float = 0.95,
    seed: int = 0,
    scope_versions: Mapping[str, Hashable] | None = None,
    scope_cache: MutableMapping[Hashable, list[dict[str, object]]] | None = None,
) -> pd.DataFrame:
    """AC2 and weighted kappa for the clinician pair and for the jury and each judge against the clinicians.

    ``scope_versions`` and ``scope_cache``: recompute only the scopes whose data changed, as
    :func:`~medhelm_core.agreement.agreement_table` does.

    The comparisons and scopes follow :func:`~medhelm_core.agreement.agreement_table`: one block per
    benchmark and one ``pooled``; the composite and every criterion; the clinician pair is the one sharing
    the most items; the jury and judges face the mean of the clinicians who rated the item. Metrics are left
    out (their scores are not on the rating scale).

    Parameters
    ----------
    long : pandas.DataFrame
        Ratings in the long contract of :mod:`medhelm_core.agreement`.
    benchmarks, criteria : sequence of str, optional
        Restrict to these benchmarks (pooled over them) and criteria.
    labels : sequence of int
        The rating scale.
    n_resamples, method, confidence, seed
        As for :func:`scale_agreement`.

    Returns
    -------
    pandas.DataFrame
        Columns ``ROBUST_COLUMNS``, two rows (AC2, kappa_qw) per comparison, benchmark and criterion.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from medhelm_core.agreement.robust import robust_table
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.choice([3, 4, 5], 40, p=[0.2, 0.3, 0.5])
    >>> rows = [(f"i{i}", r, k, "accuracy", float(np.clip(truth[i] + rng.integers(-1, 2), 1, 5)))
    ...         for i in range(40) for r, k in [("c1", "clinician"), ("c2", "clinician"), ("jury", "jury")]]
    >>> long = pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "criterion", "score"])
    >>> table = robust_table(long.assign(benchmark="medi_qa"))
    >>> sorted(set(table["comparison"])), sorted(set(table["method"]))
    (['clinician-clinician', 'jury-clinician'], ['AC2', 'kappa_qw'])
    """
    data = validate_long(long)
    # An empty selection means all benchmarks here (the dashboard passes what the user ticked).
    data, known = chosen_benchmarks(data[data["rater_kind"] != "metric"], benchmarks or None)
    clin = data[data["rater_kind"] == "clinician"]
    if clin.empty:
        raise AgreementInputError("there are no clinician ratings to compare with")
    rubric = clinician_criteria(clin, criteria)
    n_jury = int(data.loc[data["rater_kind"] == "jury", "rater_id"].nunique())
    rows: list[dict[str, object]] = []
    kwargs = {"labels": labels, "n_resamples": n_resamples, "method": method, "confidence": confidence, "seed": seed}
    settings = (tuple(rubric), n_jury, tuple(labels), n_resamples, method, confidence, seed)
    for bench, part in benchmark_scopes(data, known):
        for criterion in [COMPOSITE, *rubric]:
            def compute(part: pd.DataFrame = part, criterion: str = criterion, bench: str = bench) -> list:
                return _robust_scope_rows(bench, criterion, rater_scores(part, criterion, rubric), n_jury, kwargs)

            key = ("robust", bench, tuple(known) if bench == POOLED else (), criterion, settings)
            rows += reused_rows(scope_cache, scope_versions, bench, key, compute)
    return pd.DataFrame(rows, columns=list(ROBUST_COLUMNS))


def _robust_scope_rows(bench: str, criterion: str, scores: pd.DataFrame, n_jury: int,
                       kwargs: dict[str, object]) -> list[dict[str, object]]:
    """The rows of :func:`robust_table` for one benchmark scope and criterion."""
    rows: list[dict[str, object]] = []
    clin_scores = scores[scores["rater_kind"] == "clinician"]
    pairs: list[tuple[str, pd.Series, pd.Series, str]] = []
    pair = most_shared_pair(clin_scores[["rater_id", "item_id"]])
    if pair is not None:
        first, second, shared, _ = pair
        side = {r: clin_scores[clin_scores["rater_id"] == r].set_index("item_id")["score"]
                for r in (first, second)}
        pairs.append((CLINICIAN_PAIR, side[first], side[second], f"pair {first} and {second}"))
    clin_mean = clin_scores.groupby("item_id")["score"].mean()
    others = scores[scores["rater_kind"].isin(("jury", "judge"))]
    for (rater, kind), mine in others.groupby(["rater_id", "rater_kind"], sort=True):
        pairs.append((comparison_name(rater, kind, n_jury), clin_mean, mine.set_index("item_id")["score"], ""))
    for comparison, left, right, note in pairs:
        joined = pd.concat([left, right], axis=1, join="inner").dropna()
        frame = scale_agreement(joined.iloc[:, 0], joined.iloc[:, 1], **kwargs)
        for rec in frame.to_dict("records"):
            rec["note"] = "; ".join(p for p in (note, rec["note"]) if p)
            rows.append({"comparison": comparison, "benchmark": bench, "criterion": criterion, **rec})
    return rows
