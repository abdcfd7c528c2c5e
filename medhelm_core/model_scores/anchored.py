"""Clinician-anchored model scores: prediction-powered inference (PPI++, Angelopoulos, Duchi & Zrnic 2023)
with the ``ppi-python`` package, and how many more clinician ratings a model needs.

The jury has scored every item, the clinicians a random subset. PPI++ estimates a model's mean on the
clinicians' scale as the jury's mean over the unrated items (times a tuned weight lambda) plus the
clinicians' mean correction on the rated ones; its interval is valid however biased the jury is, and is
narrower than the clinicians' alone when the jury tracks them. Beside it: the jury-only mean (narrow,
possibly biased) and the clinician-only mean (unbiased, wide), and the effective number of clinician
ratings (how many ratings the clinicians alone would need for the same interval).

What it assumes: the rated items are a random sample of the model's items on each benchmark. Ratings made
through this app's assignments are (each clinician's queue is in random order; the "rate these next" mode
draws items at random within a model and benchmark and records the probability); ratings imported from
elsewhere may not be, and a model and benchmark with such ratings gets no clinician-anchored estimate.

A model's pooled estimate is stratified by benchmark: when benchmarks were rated at different rates, the
rated and unrated items are weighted (``w`` and ``w_unlabeled`` of ``ppi_py``) so that each benchmark
counts by its share of the model's items, and the interval is computed on scores centred on the estimate
(ppi_py's weighted standard error is that of the weighted scores, which the centring turns into the usual
linearised variance of a weighted mean); with equal rates every weight is 1 and the call is plain PPI++.
A benchmark whose every item is rated (nothing left to predict) enters as its clinician mean.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterator, Sequence
from itertools import combinations
from types import ModuleType

import numpy as np
import pandas as pd
from scipy.stats import norm

from medhelm_core.agreement.contract import COMPOSITE
from medhelm_core.agreement.scopes import POOLED
from medhelm_core.errors import ValidationError
from medhelm_core.model_scores.scores import CLINICIANS, JURY, verdict

CENSUS, RANDOM, NOT_RANDOM, UNRATED = "every item rated", "random sample", "not a random sample", "no ratings"
STATUS_COLUMNS = ["model", "benchmark", "n_items", "n_rated", "n_rated_unassigned", "n_drawn", "status", "note"]
ANCHORED_COLUMNS = ["model", "benchmark", "criterion", "n_items", "n_rated", "n_unrated", "clinician_mean",
                    "clinician_low", "clinician_high", "jury_mean", "jury_low", "jury_high", "anchored",
                    "anchored_low", "anchored_high", "lam", "n_effective", "note"]
ANCHORED_DIFFERENCE_COLUMNS = ["model_a", "model_b", "benchmark", "criterion", "difference", "ci_low", "ci_high",
                               "verdict", "clinician_difference", "clinician_low", "clinician_high", "note"]
NEEDED_COLUMNS = ["model", "criterion", "half_width", "n_items", "n_rated", "half_width_now", "ppi_corr",
                  "needed_without_jury", "more_without_jury", "needed_with_jury", "more_with_jury", "note"]


def ppi() -> ModuleType:
    """The ``ppi_py`` module, imported on first use (1.5 s: numba, scikit-learn, statsmodels).

    ``ppi_py`` switches every warning off for the whole process when imported
    (``warnings.simplefilter("ignore")``); the import runs inside ``catch_warnings`` so that it cannot.
    """
    with warnings.catch_warnings():
        import ppi_py
    return ppi_py


def sampling_status(design: pd.DataFrame) -> pd.DataFrame:
    """Whether each model's rated items on each benchmark are a random sample of its items there.

    Parameters
    ----------
    design : pandas.DataFrame
        One row per item: ``model``, ``benchmark``, ``rated`` (a clinician has rated it), ``assigned`` (an
        assignment of this app gave it to a clinician) and optionally ``drawn`` (the "rate these next" mode
        drew it, with a recorded probability).

    Returns
    -------
    pandas.DataFrame
        :data:`STATUS_COLUMNS`; ``status`` is ``every item rated`` (nothing to estimate), ``random sample``
        (every rated item came through this app's assignments, whose order is random), ``not a random
        sample`` (some rated item was not assigned here: imported ratings, chosen by someone else) or
        ``no ratings``.

    Examples
    --------
    >>> design = pd.DataFrame({"model": "m", "benchmark": ["b1"] * 3 + ["b2"] * 2,
    ...                        "rated": [True, False, False, True, False],
    ...                        "assigned": [True, True, True, False, False]})
    >>> sampling_status(design)[["benchmark", "n_rated", "status"]]
      benchmark  n_rated               status
    0        b1        1        random sample
    1        b2        1  not a random sample
    """
    frame = design.assign(
        rated=design["rated"].astype(bool), assigned=design["assigned"].astype(bool),
        drawn=design["drawn"].astype(bool) if "drawn" in design else False,
    )
    frame = frame.assign(unassigned=frame["rated"] & ~frame["assigned"], drawn=frame["rated"] & frame["drawn"],
                         waiting=~frame["rated"] & ~frame["assigned"])
    cells = frame.groupby(["model", "benchmark"], sort=True).agg(
        n_items=("rated", "size"), n_rated=("rated", "sum"), n_rated_unassigned=("unassigned", "sum"),
        n_drawn=("drawn", "sum"), n_never_assigned=("waiting", "sum")).reset_index()
    status, notes = [], []
    for cell in cells.itertuples(index=False):
        if cell.n_rated == 0:
            status.append(UNRATED)
            notes.append("no clinician ratings yet")
        elif cell.n_rated == cell.n_items:
            status.append(CENSUS)
            notes.append("every item is rated: the clinicians' mean is the answer, the jury adds nothing")
        elif cell.n_rated_unassigned:
            status.append(NOT_RANDOM)
            notes.append(f"{cell.n_rated_unassigned} of the {cell.n_rated} rated items were not assigned by this "
                         "app (imported ratings), so they may not be a random sample of the model's items: no "
                         "clinician-anchored estimate")
        else:
            status.append(RANDOM)
            # items added after the last assignment were never in the draw: say so, the next one includes them
            notes.append(f"{cell.n_never_assigned} unrated items were never assigned: Assign (or Rate these next) "
                         "gives them their chance of being rated" if cell.n_never_assigned else "")
    return cells.assign(status=status, note=notes).astype(
        {"n_rated": int, "n_rated_unassigned": int, "n_drawn": int})[STATUS_COLUMNS]


@functools.lru_cache(maxsize=8)
def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValidationError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    return float(norm.ppf(0.5 + confidence / 2))


def _paired_cells(scores: pd.DataFrame, criteria: Sequence[str] | None = None) -> Iterator[tuple[str, str, dict]]:
    """Per model and criterion (sorted): each benchmark's items as two arrays, the clinicians' mean score (NaN
    when unrated) and the jury's (NaN when it has none)."""
    wanted = scores[scores["source"].isin([CLINICIANS, JURY])]
    if criteria is not None:
        wanted = wanted[wanted["criterion"].isin(list(criteria))]
    if wanted.empty:
        return
    item_codes, _ = pd.factorize(wanted["item_id"])
    criterion_codes, criteria_seen = pd.factorize(wanted["criterion"].astype(str), sort=True)
    jury = (wanted["source"] == JURY).to_numpy()
    values = wanted["score"].to_numpy(dtype=float)
    n_items, n_criteria = int(item_codes.max()) + 1, len(criteria_seen)
    y = np.full((n_items, n_criteria), np.nan)
    f = np.full((n_items, n_criteria), np.nan)
    y[item_codes[~jury], criterion_codes[~jury]] = values[~jury]
    f[item_codes[jury], criterion_codes[jury]] = values[jury]
    first = np.unique(item_codes, return_index=True)[1]
    model_codes, models = pd.factorize(wanted["model"].to_numpy()[first], sort=True)
    bench_codes, benches = pd.factorize(wanted["benchmark"].to_numpy()[first], sort=True)
    order = np.lexsort((bench_codes, model_codes))
    keys = np.stack([model_codes, bench_codes], axis=1)[order]
    starts = np.flatnonzero(np.r_[True, (np.diff(keys, axis=0) != 0).any(axis=1)])
    ends = np.r_[starts[1:], len(keys)]
    for mi in range(len(models)):
        blocks = [(benches[keys[a, 1]], order[a:b]) for a, b in zip(starts, ends, strict=True) if keys[a, 0] == mi]
        for ci, criterion in enumerate(criteria_seen):
            cells = {}
            for bench, rows in blocks:
                yc, fc = y[rows, ci], f[rows, ci]
                seen = ~(np.isnan(yc) & np.isnan(fc))  # items with no score on this criterion are not in it
                if seen.any():
                    cells[str(bench)] = (yc[seen], fc[seen])
            if cells:
                yield str(models[mi]), str(criterion), cells


class _Stratum:
    """One benchmark's items of one model and criterion: rated (Y with their jury score f) and unrated (f)."""

    def __init__(self, name: str, y_all: np.ndarray, f_all: np.ndarray) -> None:
        self.name = name
        scored = ~np.isnan(f_all)
        rated = scored & ~np.isnan(y_all)
        self.y = y_all[rated]
        self.f = f_all[rated]
        self.f_unrated = f_all[scored & np.isnan(y_all)]
        self.n_items = int(scored.sum())
        self.n_no_jury = int((~scored & ~np.isnan(y_all)).sum())

    @property
    def census(self) -> bool:
        return self.f_unrated.size == 0


def _estimate(se_parts: list[tuple[float, float, float]], z: float) -> tuple[float, float, float, float]:
    """Combine (weight, mean, standard error) of independent strata: mean, low, high, se."""
    mean = sum(w * m for w, m, _ in se_parts)
    se = math.sqrt(sum((w * s) ** 2 for w, _, s in se_parts))
    if not (math.isfinite(mean) and math.isfinite(se)) or se == 0:
        return mean, np.nan, np.nan, se
    return mean, mean - z * se, mean + z * se, se


def _stratified_ppi(strata: list[_Stratum], alpha: float, z: float) -> dict[str, float]:
    """PPI++ (ppi_py, lambda tuned) on the sampled strata, each weighted by its share of the items; the strata
    whose every item is rated enter together as their clinicians' mean. Returns the three estimates (clinician,
    jury, anchored), each with its interval and standard error, and lambda."""
    p = ppi()
    total = sum(s.n_items for s in strata)
    sampled = [s for s in strata if not s.census]
    census = [s for s in strata if s.census]
    clin, jury, anchored = [], [], []
    out: dict[str, float] = {"lam": np.nan}
    if sampled:
        n_s, nu_s = sum(s.y.size for s in sampled), sum(s.f_unrated.size for s in sampled)
        items_s = sum(s.n_items for s in sampled)
        share = [s.n_items / items_s for s in sampled]
        y = np.concatenate([s.y for s in sampled])
        f = np.concatenate([s.f for s in sampled])
        f_u = np.concatenate([s.f_unrated for s in sampled])
        w = np.concatenate([np.full(s.y.size, sh * n_s / s.y.size) for s, sh in zip(sampled, share, strict=True)])
        w_u = np.concatenate([np.full(s.f_unrated.size, sh * nu_s / s.f_unrated.size)
                              for s, sh in zip(sampled, share, strict=True)])
        f_all = np.concatenate([np.r_[s.f, s.f_unrated] for s in sampled])
        w_all = np.concatenate([np.full(s.n_items, sh * items_s / s.n_items)
                                for s, sh in zip(sampled, share, strict=True)])
        if np.allclose(w, 1.0) and np.allclose(w_u, 1.0):
            w = w_u = w_all = None  # equal rates: plain PPI++, exactly what ppi_py gives without weights
        constant_jury = np.ptp(f_all) == 0
        lam = 0.0 if constant_jury else None  # a constant jury has no variance to tune lambda on
        low, high = p.ppi_mean_ci(y, f, f_u, alpha=alpha, lam=lam, w=w, w_unlabeled=w_u)
        # the interval is symmetric about ppi_mean_pointestimate (same lambda): its midpoint is the estimate
        theta = float(low[0] + high[0]) / 2
        if w is not None:
            # With weights, ppi_py's standard error is that of the weighted scores, which grows with how far the
            # scores sit from 0; the estimate moves with a shift of every score, lambda does not, and scores
            # centred on the estimate give the usual linearised (Hajek) variance of a weighted mean.
            low, high = p.ppi_mean_ci(y - theta, f - theta, f_u - theta, alpha=alpha, lam=lam, w=w,
                                      w_unlabeled=w_u)
            low, high = low + theta, high + theta
        anchored.append((items_s / total, theta, float(high[0] - low[0]) / (2 * z)))
        if constant_jury:
            out["lam"] = 0.0
        else:
            # the estimate is linear in lambda: theta(lam) = theta(0) + lam * (mean of w_u f_u - mean of w f)
            ww, wu = (np.ones_like(y), np.ones_like(f_u)) if w is None else (w, w_u)
            slope = float(np.mean(wu * f_u) - np.mean(ww * f))
            # (when the rated and unrated items' jury means agree, lambda changes nothing and is not identified)
            out["lam"] = (theta - float(np.mean(ww * y))) / slope if abs(slope) > 1e-9 else np.nan
        for parts, values, weights in ((clin, y, w), (jury, f_all, w_all)):
            c_low, c_high = p.classical_mean_ci(values, w=weights, alpha=alpha)
            mean = float(c_low + c_high) / 2
            if weights is not None:  # the same centring as above
                c_low, c_high = p.classical_mean_ci(values - mean, w=weights, alpha=alpha)
            parts.append((items_s / total, mean, float(c_high - c_low) / (2 * z)))
    if census:
        y_c = np.concatenate([s.y for s in census])
        f_c = np.concatenate([s.f for s in census])
        # every item of these strata is rated: their mean is the plain mean; one lone item borrows the spread
        # of all the model's rated items
        spread_y = np.std(y_c) if y_c.size > 1 else np.std(np.concatenate([s.y for s in strata]))
        spread_f = np.std(f_c) if f_c.size > 1 else np.std(np.concatenate([s.f for s in strata]))
        share = sum(s.n_items for s in census) / total
        clin.append((share, float(y_c.mean()), float(spread_y) / math.sqrt(y_c.size)))
        anchored.append(clin[-1])
        jury.append((share, float(f_c.mean()), float(spread_f) / math.sqrt(f_c.size)))
    for name, parts in (("clinician", clin), ("jury", jury), ("anchored", anchored)):
        mean, low, high, se = _estimate(parts, z)
        out.update({f"{name}_mean": mean, f"{name}_low": low, f"{name}_high": high, f"{name}_se": se})
    return out


def clinician_anchored(scores: pd.DataFrame, status: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Each model's clinician-anchored mean (PPI++) per benchmark and pooled, per criterion and composite,
    beside its jury-only and clinician-only means.

    Parameters
    ----------
    scores : pandas.DataFrame
        :func:`~medhelm_core.model_scores.scores.item_scores` (the ``clinicians`` and ``jury`` sources are used).
    status : pandas.DataFrame
        :func:`sampling_status` of the same items.
    confidence : float
        Confidence level.

    Returns
    -------
    pandas.DataFrame
        :data:`ANCHORED_COLUMNS`. ``anchored`` and its interval come from ``ppi_py.ppi_mean_ci`` (lambda tuned,
        PPI++); ``clinician_*`` from ``ppi_py.classical_mean_ci`` on the rated items; ``jury_*`` the same on the
        jury's scores of every item. ``n_effective`` is how many clinician ratings alone would give the
        anchored interval's width (``n_rated`` times the ratio of the two variances). Where no estimate can be
        made, the figures are NaN and ``note`` says why (not a random sample, fewer than two rated items, no
        jury, every rated item scored the same); only items the jury scored count.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.normal(3.5, 0.8, 400)
    >>> items = pd.DataFrame({"item_id": range(400), "benchmark": "b", "instance_id": range(400), "model": "m"})
    >>> rated = np.arange(400) < 60
    >>> long = pd.concat([
    ...     pd.DataFrame({"item_id": np.flatnonzero(rated), "rater_id": "c1", "rater_kind": "clinician",
    ...                   "criterion": "accuracy", "score": truth[rated] + rng.normal(0, 0.3, 60)}),
    ...     pd.DataFrame({"item_id": range(400), "rater_id": "jury", "rater_kind": "jury", "criterion": "accuracy",
    ...                   "score": truth + 0.5 + rng.normal(0, 0.3, 400)})])
    >>> from medhelm_core.model_scores.scores import item_scores
    >>> design = items.assign(rated=rated, assigned=True)
    >>> table = clinician_anchored(item_scores(long, items), sampling_status(design))
    >>> row = table.query("benchmark == 'pooled' and criterion == 'accuracy'").iloc[0]
    >>> bool(row.anchored_high - row.anchored_low < row.clinician_high - row.clinician_low), row.n_rated
    (True, np.int64(60))
    """
    alpha = 1 - confidence
    _z(confidence)
    state = _states(status)
    rows = []
    for model, criterion, by_bench in _paired_cells(scores):
        for scope in [*by_bench, POOLED]:
            names = list(by_bench) if scope == POOLED else [scope]
            rows.append(_anchored_row(model, scope, criterion, names, by_bench, state, alpha))
    table = pd.DataFrame(rows, columns=ANCHORED_COLUMNS)
    order = {c: i for i, c in enumerate(dict.fromkeys([*scores["criterion"].drop_duplicates(), COMPOSITE]))}
    order[COMPOSITE] = len(order)
    table = table.assign(_c=table["criterion"].map(order), _p=table["benchmark"].eq(POOLED))
    return table.sort_values(["model", "_p", "benchmark", "_c"], kind="stable", ignore_index=True)[ANCHORED_COLUMNS]


def _states(status: pd.DataFrame) -> dict[tuple[str, str], str]:
    return dict(zip(zip(status["model"], status["benchmark"], strict=True), status["status"], strict=True))


def _anchored_row(model: str, scope: str, criterion: str, names: list[str],
                  by_bench: dict[str, tuple[np.ndarray, np.ndarray]], state: dict, alpha: float) -> tuple:
    n_items = sum(by_bench[b][0].size for b in names)
    n_rated = sum(int((~np.isnan(by_bench[b][0])).sum()) for b in names)
    empty = (model, scope, criterion, n_items, n_rated, n_items - n_rated, *([np.nan] * 11))

    def refuse(note: str) -> tuple:
        return (*empty, note)

    statuses = {b: state.get((model, b), UNRATED) for b in names}
    wrong = [b for b, s in statuses.items() if s == NOT_RANDOM]
    if wrong:
        return refuse(f"the rated items on {', '.join(wrong)} are not a random sample (ratings imported, not "
                      "assigned here): no clinician-anchored estimate")
    used = [b for b in names if statuses[b] != UNRATED]
    if not used:
        return refuse("no clinician ratings yet")
    strata = [_Stratum(b, *by_bench[b]) for b in used]
    n_jury = sum(s.n_items for s in strata)
    n_used = sum(s.y.size for s in strata)
    notes = []
    if len(used) < len(names):
        notes.append(f"pooled over {', '.join(used)} only (no clinician ratings on "
                     f"{', '.join(b for b in names if b not in used)})")
    dropped = sum(s.n_no_jury for s in strata)
    if dropped:
        notes.append(f"{dropped} rated items without a jury score left out")
    if n_jury == 0:
        return refuse("no jury scores: the clinician-only mean is all there is")
    if n_used < 2:
        return refuse("fewer than two rated items with a jury score: no interval")
    fit = _stratified_ppi(strata, alpha, _z(1 - alpha))
    if all(s.census for s in strata):
        notes.append("every item is rated: the clinicians' mean is the answer, the jury adds nothing")
    if not np.isfinite(fit["clinician_low"]) or not np.isfinite(fit["anchored_low"]):
        notes.append("every rated item got the same score: no interval yet (rate more items)")
    n_effective = np.nan
    if fit["anchored_se"] > 0 and np.isfinite(fit["clinician_se"]):
        n_effective = n_used * (fit["clinician_se"] / fit["anchored_se"]) ** 2
    return (model, scope, criterion, n_jury, n_used, n_jury - n_used, fit["clinician_mean"], fit["clinician_low"],
            fit["clinician_high"], fit["jury_mean"], fit["jury_low"], fit["jury_high"], fit["anchored_mean"],
            fit["anchored_low"], fit["anchored_high"], fit["lam"], n_effective, "; ".join(notes))


def anchored_differences(anchored: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """The difference between each pair of models' clinician-anchored means (and clinician-only means).

    The two estimates rest on different items, so the interval adds their variances; instances that both
    models answered make the estimates positively correlated as a rule, and then this interval errs wide.

    Parameters
    ----------
    anchored : pandas.DataFrame
        :func:`clinician_anchored`.
    confidence : float
        Confidence level (the one the table was computed with).

    Returns
    -------
    pandas.DataFrame
        :data:`ANCHORED_DIFFERENCE_COLUMNS`, ``model_a`` minus ``model_b`` per benchmark (and pooled) and criterion.

    Examples
    --------
    >>> table = pd.DataFrame({"model": ["m1", "m2"], "benchmark": "pooled", "criterion": "accuracy",
    ...                       "anchored": [4.0, 3.5], "anchored_low": [3.8, 3.3], "anchored_high": [4.2, 3.7],
    ...                       "clinician_mean": [4.1, 3.4], "clinician_low": [3.6, 2.9],
    ...                       "clinician_high": [4.6, 3.9]})
    >>> anchored_differences(table)[["difference", "ci_low", "ci_high", "verdict"]].round(3)
       difference  ci_low  ci_high    verdict
    0         0.5   0.217    0.783  m1 higher
    """
    z = _z(confidence)
    rows = []
    for (scope, criterion), group in anchored.groupby(["benchmark", "criterion"], sort=False):
        by_model = {r["model"]: r for r in group.to_dict("records")}
        for a, b in combinations(sorted(by_model), 2):
            ra, rb = by_model[a], by_model[b]
            diff, low, high = _difference(ra, rb, "anchored", "anchored", z)
            c_diff, c_low, c_high = _difference(ra, rb, "clinician_mean", "clinician", z)
            note = "" if np.isfinite(diff) else "no clinician-anchored estimate for one of the two"
            rows.append((a, b, scope, criterion, diff, low, high, verdict(low, high, a, b), c_diff, c_low, c_high,
                         note))
    return pd.DataFrame(rows, columns=ANCHORED_DIFFERENCE_COLUMNS)


def _difference(ra: dict, rb: dict, mean: str, prefix: str, z: float) -> tuple[float, float, float]:
    diff = ra[mean] - rb[mean]
    se = math.hypot((ra[f"{prefix}_high"] - ra[f"{prefix}_low"]) / (2 * z),
                    (rb[f"{prefix}_high"] - rb[f"{prefix}_low"]) / (2 * z))
    if not (np.isfinite(diff) and np.isfinite(se)) or se == 0:
        return diff, np.nan, np.nan
    return diff, diff - z * se, diff + z * se


def ratings_needed(scores: pd.DataFrame, status: pd.DataFrame, half_width: float, confidence: float = 0.95,
                   criteria: Sequence[str] | None = None) -> pd.DataFrame:
    """How many clinician ratings each model needs for a clinician-scale interval of ``half_width``, with the
    jury (PPI++) and without it, and how many more than it has.

    Without the jury the answer is the classical n0 = (z * sd / half_width)^2, the sd of the clinicians' scores
    of the model's rated items. With it, ``ppi_py.ppi_mean_power`` (Broska, Howes & van Loon 2024) finds the
    cheapest pair of rated and jury-only items with the same effective sample size, the model's N items being
    all there are (``n_max``): a jury already paid for makes that n = n0 N (1 - rho^2) / (N - rho^2 n0), rho
    the PPI correlation between the clinicians' and the jury's scores on the rated items.

    Parameters
    ----------
    scores : pandas.DataFrame
        :func:`~medhelm_core.model_scores.scores.item_scores`.
    status : pandas.DataFrame
        :func:`sampling_status`.
    half_width : float
        The interval's half-width wanted, on the clinicians' scale (e.g. 0.1 on a 1-5 scale).
    confidence : float
        Confidence level.
    criteria : sequence of str, optional
        Which criteria (default: all and the composite).

    Returns
    -------
    pandas.DataFrame
        :data:`NEEDED_COLUMNS`, one row per model and criterion (pooled over benchmarks): ``needed_*`` the total
        rated items needed, ``more_*`` how many beyond those rated (0 when already there). NaN with a ``note``
        when the target cannot be reached even by rating every item, or when there is too little to go on.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> truth = rng.normal(3.5, 0.8, 1000)
    >>> items = pd.DataFrame({"item_id": range(1000), "benchmark": "b", "instance_id": range(1000), "model": "m"})
    >>> rated = np.arange(1000) < 50
    >>> long = pd.concat([
    ...     pd.DataFrame({"item_id": np.flatnonzero(rated), "rater_id": "c1", "rater_kind": "clinician",
    ...                   "criterion": "accuracy", "score": truth[rated] + rng.normal(0, 0.3, 50)}),
    ...     pd.DataFrame({"item_id": range(1000), "rater_id": "jury", "rater_kind": "jury", "criterion": "accuracy",
    ...                   "score": truth + rng.normal(0, 0.3, 1000)})])
    >>> from medhelm_core.model_scores.scores import item_scores
    >>> status = sampling_status(items.assign(rated=rated, assigned=True))
    >>> need = ratings_needed(item_scores(long, items), status, half_width=0.1, criteria=["accuracy"])
    >>> row = need.iloc[0]
    >>> bool(row.needed_with_jury < row.needed_without_jury), int(row.more_without_jury) > 200
    (True, True)
    """
    if not half_width > 0:
        raise ValidationError(f"the half-width must be above 0, got {half_width}")
    z = _z(confidence)
    p = ppi()
    state = _states(status)
    rows = []
    for model, criterion, by_bench in _paired_cells(scores, criteria):
        statuses = [state.get((model, b), UNRATED) for b in by_bench]
        y_all = np.concatenate([y for y, _ in by_bench.values()])
        f_all = np.concatenate([f for _, f in by_bench.values()])
        scored = ~np.isnan(f_all)
        rated = scored & ~np.isnan(y_all)
        n_items, n_rated = int(scored.sum()), int(rated.sum())
        base = [model, criterion, half_width, n_items, n_rated]
        if NOT_RANDOM in statuses:
            rows.append((*base, *([np.nan] * 6), "the rated items are not a random sample"))
            continue
        if n_rated < 3:
            rows.append((*base, *([np.nan] * 6),
                         "fewer than three rated items with a jury score: too little to plan on"))
            continue
        y, f = y_all[rated], f_all[rated]
        sd = float(np.std(y, ddof=1))
        now = z * sd / math.sqrt(n_rated)
        if sd == 0:
            rows.append((*base, now, np.nan, *([np.nan] * 4),
                         "every rated item got the same score: no spread to plan on yet"))
            continue
        n0 = math.ceil((z * sd / half_width) ** 2)
        notes = []
        without = n0 if n0 <= n_items else np.nan
        if n0 > n_items:
            reach = z * sd / math.sqrt(n_items)
            notes.append(f"without the jury, even rating all {n_items} items gives +/- {reach:.2f}")
        rho, with_jury = np.nan, np.nan
        r = float(np.corrcoef(y, f)[0, 1]) if np.ptp(f) > 0 else np.nan  # none when the jury's scores are constant
        if np.ptp(f) == 0:
            notes.append("the jury gives every rated item the same score: it cannot help")
        elif abs(r) < 1e-9:
            # ppi_py's optimal pair divides 0 by 0 here; a jury uncorrelated with the clinicians saves nothing
            rho, with_jury = 0.0, without
            notes.append("the jury's scores do not follow the clinicians' here: it cannot help")
        elif abs(r) > 1 - 1e-9:
            # ppi_py refuses a correlation of +/-1 (its power formula divides by 1 - rho^2); on a handful of items
            # a jury can match the clinicians exactly by chance, which says nothing about the next items
            rho = float(np.sign(r))
            notes.append(f"the jury's scores follow the clinicians' exactly on these {n_rated} rated items: rate "
                         "more before planning on the jury")
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ppi_py warns when n0 is out of reach; we say so in the note
                power = p.ppi_mean_power(y, f, cost_Y=1.0, cost_Yhat=1e-9, effective_n=n0, n_max=n_items)
            rho = float(power["ppi_corr"])
            if n0 <= n_items:
                with_jury = min(int(power["n"]), n0)
            elif not notes:
                notes.append("out of reach with this many items")
        rows.append((*base, now, rho, without, _more(without, n_rated), with_jury, _more(with_jury, n_rated),
                     "; ".join(notes)))
    return pd.DataFrame(rows, columns=NEEDED_COLUMNS)


def _more(needed: float, have: int) -> float:
    return np.nan if not np.isfinite(needed) else float(max(0, int(needed) - have))
