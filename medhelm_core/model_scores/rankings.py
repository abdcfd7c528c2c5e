"""Rankings of models: each source's order, Kendall's tau-b against the clinicians' order with a bootstrap
interval over instances, the probability that each pair of models swaps places, and HELM's mean win rate.

The point estimate of tau-b is ``scipy.stats.kendalltau`` (variant b). Its 2,000 resamples per source would
cost scipy about a second (it loops in Python, about 0.45 ms a call), so they are computed at once by
:func:`kendall_tau_b`, tau-b written over the signs of all pairs of models, which the tests check against
scipy on every resample, ties included.

HELM's mean win rate (``helm.benchmark.presentation.summarize.compute_aggregate_row_win_rates``): per
benchmark, the share of the other models that a model beats, a tie counting half; then the mean over the
benchmarks on which the model has a score (a benchmark with fewer than two models is skipped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from medhelm_core.agreement.scopes import POOLED
from medhelm_core.model_scores.scores import CLINICIANS, JURY, Resampled, _interval

RANK_COLUMNS = ["model", "source", "source_kind", "criterion", "mean", "rank"]
TAU_COLUMNS = ["source", "source_kind", "criterion", "tau_b", "ci_low", "ci_high", "n_models", "note"]
SWAP_COLUMNS = ["source", "criterion", "model_a", "model_b", "p_swap", "note"]
WIN_RATE_COLUMNS = ["model", "source", "criterion", "win_rate", "ci_low", "ci_high", "n_benchmarks", "note"]


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b between the rows of ``x`` and ``y``, all rows at once (the bootstrap's kernel).

    tau-b = (concordant - discordant) / sqrt((pairs not tied in x) * (pairs not tied in y)), over all pairs
    of columns; a row with a NaN, or whose x or y is constant, gives NaN. It equals
    ``scipy.stats.kendalltau(x[i], y[i]).statistic`` for every row.

    Parameters
    ----------
    x, y : ndarray of shape (B, M) or (M,)
        Scores of the same M models, one row per resample.

    Returns
    -------
    ndarray of shape (B,) (a 0-d array for 1-d input)

    Examples
    --------
    >>> kendall_tau_b(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 3.0, 2.0, 4.0])).round(4)
    np.float64(0.6667)
    >>> kendall_tau_b(np.array([[1.0, 1.0, 2.0], [3.0, 2.0, 1.0]]), np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]))
    array([ 0.81649658, -1.        ])
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    one = x.ndim == 1
    x, y = np.atleast_2d(x), np.atleast_2d(y)
    i, j = np.triu_indices(x.shape[1], k=1)
    sx, sy = np.sign(x[:, i] - x[:, j]), np.sign(y[:, i] - y[:, j])
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = (sx * sy).sum(axis=1) / np.sqrt((sx != 0).sum(axis=1) * (sy != 0).sum(axis=1))
    tau[np.isnan(x).any(axis=1) | np.isnan(y).any(axis=1)] = np.nan
    return tau[0] if one else tau


def _win_rates(values: np.ndarray) -> np.ndarray:
    """HELM's mean win rate from (..., benchmarks, models) means (NaN: no score), as (..., models)."""
    present = ~np.isnan(values)
    diff = values[..., :, None] - values[..., None, :]  # [.., b, m, other]
    both = present[..., :, None] & present[..., None, :]
    wins = ((diff > 0) + 0.5 * (diff == 0)) * both
    n = present.sum(axis=-1, keepdims=True)  # models with a score on the benchmark
    own = 0.5 * present  # a model ties with itself: take that half back out
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (wins.sum(axis=-1) - own) / (n - 1)
    usable = present & (n >= 2)
    rate = np.where(usable, rate, np.nan)
    with np.errstate(invalid="ignore"):
        counted = usable.sum(axis=-2)
        return np.where(counted > 0, np.nansum(rate, axis=-2) / np.maximum(counted, 1), np.nan)


def win_rates(means: pd.DataFrame, score: str = "mean") -> pd.DataFrame:
    """HELM's mean win rate of each model from its mean per benchmark.

    Parameters
    ----------
    means : pandas.DataFrame
        One row per model and benchmark: ``model``, ``benchmark`` and ``score`` (a higher score is better;
        a missing one leaves the model out of that benchmark).
    score : str
        The column holding the score.

    Returns
    -------
    pandas.DataFrame
        ``model``, ``win_rate`` (in [0, 1]; NaN for a model never compared), ``n_benchmarks`` (those that
        counted for it), sorted by model.

    Examples
    --------
    Two benchmarks, three models; on b2, m2 and m3 tie:

    >>> means = pd.DataFrame({"model": ["m1", "m2", "m3"] * 2, "benchmark": ["b1"] * 3 + ["b2"] * 3,
    ...                       "mean": [4.0, 3.0, 2.0, 3.0, 4.0, 4.0]})
    >>> win_rates(means)
      model  win_rate  n_benchmarks
    0    m1     0.500             2
    1    m2     0.625             2
    2    m3     0.375             2
    """
    table = means.pivot_table(index="benchmark", columns="model", values=score, aggfunc="first")
    values = table.to_numpy(dtype=float)
    rate = _win_rates(values)
    counted = (~np.isnan(values) & ((~np.isnan(values)).sum(axis=1, keepdims=True) >= 2)).sum(axis=0)
    return pd.DataFrame({"model": table.columns.astype(str), "win_rate": rate, "n_benchmarks": counted})


@dataclass(frozen=True)
class Rankings:
    """The rankings' tables: each source's order (``ranks``), tau-b against the clinicians (``tau``), the
    chance that a pair swaps places under resampling (``swaps``) and HELM's mean win rate (``win_rates``)."""

    ranks: pd.DataFrame
    tau: pd.DataFrame
    swaps: pd.DataFrame
    win_rates: pd.DataFrame


def _pooled(resampled: Resampled, source: str, criterion: str) -> tuple[np.ndarray, np.ndarray]:
    """(M,) estimates and (B, M) resamples of each model's pooled mean (NaN where it has none)."""
    cols = [resampled.column(m, POOLED, source, criterion) for m in resampled.models]
    est = np.array([resampled.estimate[c] if c is not None else np.nan for c in cols])
    res = np.stack([resampled.resamples[:, c] if c is not None else np.full(resampled.n_resamples, np.nan)
                    for c in cols], axis=1) if cols else np.empty((resampled.n_resamples, 0))
    return est, res


def _per_benchmark(resampled: Resampled, source: str, criterion: str) -> tuple[np.ndarray, np.ndarray]:
    """(benchmarks, M) estimates and (B, benchmarks, M) resamples of the per-benchmark means."""
    b, m = len(resampled.benchmarks), len(resampled.models)
    est = np.full((b, m), np.nan)
    res = np.full((resampled.n_resamples, b, m), np.nan)
    for bi, bench in enumerate(resampled.benchmarks):
        for mi, model in enumerate(resampled.models):
            c = resampled.column(model, bench, source, criterion)
            if c is not None:
                est[bi, mi] = resampled.estimate[c]
                res[:, bi, mi] = resampled.resamples[:, c]
    return est, res


def _ranks(est: np.ndarray) -> np.ndarray:
    """1 for the best; ties share the better rank; NaN where there is no score."""
    ranked = pd.Series(est).rank(ascending=False, method="min")
    return ranked.to_numpy()


def model_rankings(resampled: Resampled, reference: str = CLINICIANS, confidence: float = 0.95,
                   swap_sources: Sequence[str] = (CLINICIANS, JURY)) -> Rankings:
    """Each source's ranking of the models (pooled means), how it agrees with the clinicians', and win rates.

    Parameters
    ----------
    resampled : Resampled
        :func:`~medhelm_core.model_scores.scores.resample_means`.
    reference : str
        The source every other is compared with (the clinicians).
    confidence : float
        Confidence level of the intervals.
    swap_sources : sequence of str
        Sources whose pairwise swap probabilities and win rates are listed (default: clinicians and jury).

    Returns
    -------
    Rankings
        ``tau`` has one row per other source and criterion: tau-b over the models both scored (``n_models``),
        with a percentile interval over resampled instances; NaN with a ``note`` when fewer than two models
        or a constant order leave it undefined (no row at all while the reference has fewer than two models).
        With a single model only ``ranks`` has rows. ``swaps`` gives, for each pair, the share of resamples in
        which the pair's order is the reverse of the observed one (a tie counts half). ``win_rates`` has
        HELM's mean win rate from the per-benchmark means, with its interval (the ``swap_sources`` only).

    Examples
    --------
    >>> from medhelm_core.model_scores.scores import item_scores, resample_means
    >>> items = pd.DataFrame({"item_id": range(9), "benchmark": "b", "instance_id": [0, 0, 0, 1, 1, 1, 2, 2, 2],
    ...                       "model": ["m1", "m2", "m3"] * 3})
    >>> clin = [5, 3, 1, 4, 3, 2, 5, 2, 1]
    >>> jury = [4, 4, 2, 5, 3, 1, 4, 3, 2]
    >>> long = pd.DataFrame({"item_id": list(range(9)) * 2, "rater_id": ["c"] * 9 + ["jury"] * 9,
    ...                      "rater_kind": ["clinician"] * 9 + ["jury"] * 9, "criterion": "accuracy",
    ...                      "score": clin + jury})
    >>> r = model_rankings(resample_means(item_scores(long, items), items, n_resamples=300))
    >>> r.tau.query("criterion == 'accuracy'")[["source", "tau_b", "n_models"]]
      source  tau_b  n_models
    0   jury    1.0         3
    """
    sources = resampled.sources()
    rank_rows, tau_rows, swap_rows, win_rows = [], [], [], []
    criteria = list(dict.fromkeys(resampled.source_criteria["criterion"]))
    models = np.array(resampled.models)
    pairs = list(combinations(range(len(models)), 2))
    for criterion in criteria:
        ref_est, ref_res = _pooled(resampled, reference, criterion)
        for source, kind in sources.itertuples(index=False):
            if not any(
                    resampled.column(m, POOLED, source, criterion) is not None for m in resampled.models):
                continue
            est, res = _pooled(resampled, source, criterion)
            for model, mean, rank in zip(models, est, _ranks(est), strict=True):
                if np.isfinite(mean):
                    rank_rows.append((model, source, kind, criterion, mean, rank))
            if len(models) < 2:
                continue  # one model: nothing to rank against anything
            if source != reference and np.isfinite(ref_est).sum() >= 2:
                tau_rows.append(_tau_row(source, kind, criterion, ref_est, ref_res, est, res, confidence))
            if source not in swap_sources:
                continue
            swap_rows += _swap_rows(source, criterion, models, pairs, est, res)
            b_est, b_res = _per_benchmark(resampled, source, criterion)
            rate, rate_res = _win_rates(b_est), _win_rates(b_res)
            counted = (~np.isnan(b_est) & ((~np.isnan(b_est)).sum(axis=1, keepdims=True) >= 2)).sum(axis=0)
            for mi, model in enumerate(models):
                if np.isnan(b_est[:, mi]).all():
                    continue
                if counted[mi] == 0:
                    win_rows.append((model, source, criterion, np.nan, np.nan, np.nan, 0,
                                     "no benchmark with two models scored"))
                    continue
                low, high, note = _interval(rate[mi], rate_res[:, mi], confidence)
                win_rows.append((model, source, criterion, rate[mi], low, high, int(counted[mi]), note))
    return Rankings(
        ranks=pd.DataFrame(rank_rows, columns=RANK_COLUMNS),
        tau=pd.DataFrame(tau_rows, columns=TAU_COLUMNS),
        swaps=pd.DataFrame(swap_rows, columns=SWAP_COLUMNS),
        win_rates=pd.DataFrame(win_rows, columns=WIN_RATE_COLUMNS),
    )


def _tau_row(source: str, kind: str, criterion: str, ref_est: np.ndarray, ref_res: np.ndarray, est: np.ndarray,
             res: np.ndarray, confidence: float) -> tuple:
    both = np.isfinite(ref_est) & np.isfinite(est)
    n = int(both.sum())
    if n < 2:
        return (source, kind, criterion, np.nan, np.nan, np.nan, n,
                "fewer than two models scored by both: no ranking to compare")
    tau = float(kendalltau(ref_est[both], est[both]).statistic)
    if not np.isfinite(tau):
        return (source, kind, criterion, np.nan, np.nan, np.nan, n,
                "one of the two gives every model the same score: no order to compare")
    low, high, note = _interval(tau, kendall_tau_b(ref_res[:, both], res[:, both]), confidence)
    return source, kind, criterion, tau, low, high, n, note


def _swap_rows(source: str, criterion: str, models: np.ndarray, pairs: list[tuple[int, int]], est: np.ndarray,
               res: np.ndarray) -> list[tuple]:
    rows = []
    for a, b in pairs:
        if not (np.isfinite(est[a]) and np.isfinite(est[b])):
            continue
        observed = np.sign(est[a] - est[b])
        if observed == 0:
            rows.append((source, criterion, models[a], models[b], np.nan, "tied on the data"))
            continue
        draws = res[:, a] - res[:, b]
        draws = draws[np.isfinite(draws)]
        if draws.size == 0:
            rows.append((source, criterion, models[a], models[b], np.nan, "no resamples"))
            continue
        swapped = (np.sign(draws) == -observed) + 0.5 * (draws == 0)
        rows.append((source, criterion, models[a], models[b], float(swapped.mean()), ""))
    return rows
