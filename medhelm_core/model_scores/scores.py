"""Each model's mean score by every source (clinicians, the jury, each judge, ROUGE-L, BERTScore), with 95%
bootstrap intervals that resample benchmark instances, and paired differences between models.

Why instances and not items: models answer the same benchmark instances, so one hard instance pulls every
model's score down together. Resampling instances (each with all its models' items) keeps that pairing, so
the interval of a difference between two models is the paired one. Instances are resampled within their
benchmark (the design fixes how many each benchmark has).

Every mean of every resample comes from one matrix product per benchmark: a (B, instances) matrix of
resample counts times an (instances, models x sources x criteria) matrix of score sums and score counts.
Counts are drawn by :func:`medhelm_core.agreement.bootstrap.resample_counts` and every interval is read off
by :func:`medhelm_core.agreement.bootstrap.bootstrap_interval` (percentile), as in the agreement engine.

A model's pooled mean is stratified by benchmark: the mean of its benchmark means weighted by how many of
the model's items each benchmark holds. When every item is scored this is the plain mean; when clinicians
rated some benchmarks more densely than others (the "rate these next" mode does that on purpose) it still
estimates the model's mean over all its items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from medhelm_core.agreement.bootstrap import bootstrap_interval, resample_counts
from medhelm_core.agreement.contract import COMPOSITE
from medhelm_core.agreement.scopes import POOLED
from medhelm_core.errors import NotEnoughRatingsError, ValidationError

CLINICIANS = "clinicians"
JURY = "jury"
#: the metric scores shown beside the raters (F-measures on 0-1)
SCORE_METRICS = ("rougeL_f", "bertscore_f1")
ITEM_COLUMNS = ["item_id", "benchmark", "instance_id", "model"]
ITEM_SCORE_COLUMNS = [*ITEM_COLUMNS, "source", "source_kind", "criterion", "score"]
MEAN_COLUMNS = ["model", "benchmark", "source", "source_kind", "criterion", "mean", "ci_low", "ci_high", "n_items",
                "note"]
DIFFERENCE_COLUMNS = ["model_a", "model_b", "benchmark", "source", "criterion", "difference", "ci_low", "ci_high",
                      "n_paired", "verdict", "note"]
_KIND_ORDER = {"clinician": 0, "jury": 1, "judge": 2, "metric": 3}


def aligned_ids(values: pd.Series, like: pd.Series) -> tuple[pd.Series, pd.Series]:
    """``values`` and ``like`` as item ids of one type: ``like``'s when ``values`` converts to it (ids read from a
    CSV as text, say), else both as text. Converting a million ids to text is slow, so it is done only then.

    Examples
    --------
    >>> a, b = aligned_ids(pd.Series(["1", "2"]), pd.Series([1, 2, 3]))
    >>> a.tolist(), b.tolist()
    ([1, 2], [1, 2, 3])
    >>> aligned_ids(pd.Series(["x"]), pd.Series([1]))[1].tolist()
    ['1']
    """
    if values.dtype == like.dtype:
        return values, like
    try:
        return values.astype(like.dtype), like
    except (TypeError, ValueError):
        return values.astype(str), like.astype(str)


def item_scores(long: pd.DataFrame, items: pd.DataFrame, criteria: Sequence[str] | None = None) -> pd.DataFrame:
    """One score per item, source and criterion, the composite included: what every model figure starts from.

    Parameters
    ----------
    long : pandas.DataFrame
        Scores in the long contract (``item_id``, ``rater_id``, ``rater_kind``, ``criterion``, ``score``):
        clinicians (one row per clinician), the jury mean (``rater_kind='jury'``), each judge (``'judge'``)
        and metrics (``'metric'``, criterion ``composite``).
    items : pandas.DataFrame
        Every item to describe: ``item_id``, ``benchmark``, ``instance_id``, ``model``. Scores of other items
        are ignored.
    criteria : sequence of str, optional
        The rubric's criteria, in order (default: those in ``long``, in order of appearance).

    Returns
    -------
    pandas.DataFrame
        :data:`ITEM_SCORE_COLUMNS`: ``source`` is ``clinicians`` (the mean over an item's clinicians),
        ``jury``, a judge's name or a metric's name. The composite is the mean of an item's criteria, kept
        only where the source scored every criterion of it; a metric has only its composite.

    Examples
    --------
    >>> items = pd.DataFrame({"item_id": [1, 2], "benchmark": "b", "instance_id": ["i1", "i1"],
    ...                       "model": ["m1", "m2"]})
    >>> long = pd.DataFrame({"item_id": [1, 1, 1, 1, 2, 2], "rater_id": ["c1", "c1", "c2", "c2", "jury", "jury"],
    ...                      "rater_kind": ["clinician"] * 4 + ["jury"] * 2,
    ...                      "criterion": ["accuracy", "clarity"] * 3, "score": [4, 5, 2, 3, 5, 4]})
    >>> item_scores(long, items)[["item_id", "source", "criterion", "score"]]
      item_id      source  criterion  score
    0       1  clinicians   accuracy    3.0
    1       1  clinicians    clarity    4.0
    2       1  clinicians  composite    3.5
    3       2        jury   accuracy    5.0
    4       2        jury    clarity    4.0
    5       2        jury  composite    4.5
    """
    missing = [c for c in ITEM_COLUMNS if c not in items.columns]
    if missing:
        raise ValidationError(f"the items table lacks column(s) {', '.join(missing)}")
    missing = [c for c in ("item_id", "rater_id", "rater_kind", "criterion", "score") if c not in long.columns]
    if missing:
        raise ValidationError(f"the scores table lacks column(s) {', '.join(missing)}")
    ids, item_ids = aligned_ids(long["item_id"], items["item_id"])
    identity = items[ITEM_COLUMNS].assign(item_id=item_ids)
    if identity["item_id"].duplicated().any():
        raise ValidationError("the items table lists an item twice")
    rows = pd.Index(identity["item_id"]).get_indexer(ids)
    values = long["score"].to_numpy(dtype=float)
    keep = (rows >= 0) & ~np.isnan(values)
    if np.isinf(values[keep]).any():
        raise ValidationError("a score is infinite")
    # a source per row: the clinicians (averaged per item), the jury, each judge, each metric
    kinds = long["rater_kind"].to_numpy(dtype=object)
    raters = long["rater_id"].to_numpy(dtype=object)
    named = np.where(kinds == "clinician", CLINICIANS, np.where(kinds == "jury", JURY, raters))
    keep &= np.isin(kinds, list(_KIND_ORDER))
    source_codes, sources = pd.factorize(named)
    kind_of = pd.Series(kinds).groupby(source_codes).first() if len(kinds) else pd.Series(dtype=object)
    metric = np.isin(np.arange(len(sources)), kind_of.index[kind_of == "metric"])
    criterion_text = long["criterion"].to_numpy(dtype=object)
    if criteria is None:
        criteria = list(pd.unique(criterion_text[keep & ~metric[source_codes] & (criterion_text != COMPOSITE)]))
    columns = [*criteria, COMPOSITE]
    criterion_codes = pd.Index(columns).get_indexer(criterion_text)
    criterion_codes[metric[source_codes]] = len(criteria)  # a metric's one score stands for the composite
    keep &= (criterion_codes >= 0) & ((criterion_codes < len(criteria)) | metric[source_codes])
    n, k, c = len(identity), len(sources), len(columns)
    cell = (rows[keep] * k + source_codes[keep]) * c + criterion_codes[keep]
    total = np.bincount(cell, weights=values[keep], minlength=n * k * c).reshape(n, k, c)
    count = np.bincount(cell, minlength=n * k * c).reshape(n, k, c)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
    if criteria:  # the composite: every criterion scored by the source
        rated = mean[:, :, : len(criteria)]
        whole = (~np.isnan(rated)).all(axis=2) & ~metric[None, :]
        # NaN criteria sum to NaN, which np.where leaves out with the sources that lack one
        mean[:, :, -1] = np.where(whole, rated.sum(axis=2) / len(criteria), mean[:, :, -1])
    # rows in the order of the sources (clinicians, jury, judges, metrics; by name within a kind), item, criterion
    rank = sorted(range(k), key=lambda i: (_KIND_ORDER[kind_of[i]], str(sources[i])))
    ordered = mean[:, rank, :].transpose(1, 0, 2)
    src, item, crit = np.nonzero(~np.isnan(ordered))
    kinds_sorted = [str(kind_of[i]) for i in rank]
    out = identity.iloc[item].reset_index(drop=True)
    return out.assign(
        source=pd.Categorical.from_codes(src, [str(sources[i]) for i in rank]),
        source_kind=pd.Categorical(np.asarray(kinds_sorted, dtype=object)[src]),
        criterion=pd.Categorical.from_codes(crit, columns),
        score=ordered[src, item, crit],
    )[ITEM_SCORE_COLUMNS]


@dataclass
class Resampled:
    """Every (model, scope, source, criterion) mean on the data and on each resample of instances.

    ``keys`` has one row per column of ``estimate`` (shape ``(C,)``) and ``resamples`` (``(B, C)``): ``model``,
    ``benchmark`` (a benchmark or ``pooled``), ``source``, ``source_kind``, ``criterion``, ``n_items`` and
    ``note``. ``paired[b]`` says, for benchmark ``b``, which instance each model has a score on (instances x
    models x the (source, criterion) pairs of ``source_criteria``).
    """

    keys: pd.DataFrame
    estimate: np.ndarray
    resamples: np.ndarray
    models: tuple[str, ...]
    benchmarks: tuple[str, ...]
    source_criteria: pd.DataFrame
    #: per model (rows) and benchmark (columns), how many of the model's items it holds: the pooled weights
    item_counts: pd.DataFrame
    paired: tuple[np.ndarray, ...]
    n_resamples: int
    seed: int
    _index: dict[tuple[str, str, str, str], int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._index = {key: i for i, key in enumerate(
            self.keys[["model", "benchmark", "source", "criterion"]].itertuples(index=False, name=None))}

    def column(self, model: str, benchmark: str, source: str, criterion: str) -> int | None:
        """The column of one mean, or None when there is no such mean."""
        return self._index.get((model, benchmark, source, criterion))

    def sources(self) -> pd.DataFrame:
        """The sources in display order (clinicians, jury, judges, metrics) with their kind."""
        return self.source_criteria[["source", "source_kind"]].drop_duplicates().reset_index(drop=True)


def _distinct_columns(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct columns of ``matrix`` and, for each column, which of them it is.

    Most sources score the same items on every criterion, so many columns of item counts are equal; the
    bootstrap multiplies each distinct one once (the product is most of its time). Columns are told apart by
    a random projection, then checked equal exactly (all columns are kept if that ever fails).
    """
    key = np.random.default_rng(0).random(matrix.shape[0]) @ matrix
    _, first, which = np.unique(key, return_index=True, return_inverse=True)
    if not np.array_equal(matrix, matrix[:, first[which]]):
        return matrix, np.arange(matrix.shape[1])
    return matrix[:, first], which.ravel()


def resample_means(scores: pd.DataFrame, items: pd.DataFrame, *, n_resamples: int = 2000,
                   seed: int = 0) -> Resampled:
    """Every model's mean per benchmark (and pooled), source and criterion, on the data and on ``n_resamples``
    resamples of instances (within benchmarks), all at once.

    Parameters
    ----------
    scores : pandas.DataFrame
        :func:`item_scores`.
    items : pandas.DataFrame
        Every item (``item_id``, ``benchmark``, ``instance_id``, ``model``): the pooled mean weighs each
        benchmark by how many of the model's items it holds, scored or not.
    n_resamples : int
        Bootstrap resamples (0: estimates only).
    seed : int
        Seed of the resampling; the same seed draws the same instances for every model and source.

    Returns
    -------
    Resampled

    Examples
    --------
    >>> items = pd.DataFrame({"item_id": [1, 2, 3, 4], "benchmark": "b", "instance_id": ["i1", "i1", "i2", "i2"],
    ...                       "model": ["m1", "m2", "m1", "m2"]})
    >>> long = pd.DataFrame({"item_id": [1, 2, 3, 4], "rater_id": "jury", "rater_kind": "jury",
    ...                      "criterion": "accuracy", "score": [4.0, 3.0, 5.0, 3.0]})
    >>> r = resample_means(item_scores(long, items), items, n_resamples=200)
    >>> r.estimate[r.column("m1", "pooled", "jury", "accuracy")]
    np.float64(4.5)
    """
    if scores.empty:
        raise NotEnoughRatingsError("no scores yet: nothing to say about the models")
    if n_resamples < 0:
        raise ValidationError(f"n_resamples must be 0 or more, got {n_resamples}")
    score_ids, item_ids = aligned_ids(scores["item_id"], items["item_id"])
    identity = items[ITEM_COLUMNS].assign(item_id=item_ids).reset_index(drop=True)
    models = tuple(sorted(identity["model"].unique()))
    benchmarks = tuple(sorted(identity["benchmark"].unique()))
    keys_sc = scores[["source", "source_kind", "criterion"]].drop_duplicates().astype(str)
    order = {c: i for i, c in enumerate(dict.fromkeys([*scores["criterion"].drop_duplicates(), COMPOSITE]))}
    order[COMPOSITE] = len(order)
    keys_sc = keys_sc.sort_values(
        ["source_kind", "source", "criterion"],
        key=lambda col: col.map(_KIND_ORDER) if col.name == "source_kind" else col.map(order)
        if col.name == "criterion" else col, kind="stable").reset_index(drop=True)
    k = len(keys_sc)
    # the column of each score: its (source, criterion) pair's row in keys_sc, found by integer codes
    source_codes, sources = pd.factorize(scores["source"])
    criterion_codes, criteria_seen = pd.factorize(scores["criterion"])
    lookup = np.full((len(sources), len(criteria_seen)), -1)
    at = (pd.Index(sources).get_indexer(keys_sc["source"]), pd.Index(criteria_seen).get_indexer(keys_sc["criterion"]))
    lookup[at] = np.arange(k)
    cols = lookup[source_codes, criterion_codes]
    rows = pd.Index(identity["item_id"]).get_indexer(score_ids)
    known = rows >= 0  # a score of an item not in ``items`` is not counted
    values = np.full((len(identity), k), np.nan)
    values[rows[known], cols[known]] = scores["score"].to_numpy(dtype=float)[known]
    model_code = pd.Categorical(identity["model"], categories=models).codes
    bench_code = pd.Categorical(identity["benchmark"], categories=benchmarks).codes
    instance_code = pd.factorize(identity["instance_id"])[0]
    # one item per (instance, model) lets the sums be plain assignments; duplicates (not from the database,
    # whose items are unique by benchmark, instance and model) are added up instead
    unique = not pd.DataFrame({"b": bench_code, "i": instance_code, "m": model_code}).duplicated().any()
    m = len(models)
    rng = np.random.default_rng(seed)
    num_b, den_b, res_num, res_den, paired = [], [], [], [], []
    for benchmark in benchmarks:
        here = np.flatnonzero(bench_code == benchmarks.index(benchmark))
        instance, _ = pd.factorize(instance_code[here])
        n_inst = int(instance.max()) + 1
        sums = np.zeros((n_inst, m, k))
        counts = np.zeros((n_inst, m, k))
        v = values[here]
        present = ~np.isnan(v)
        if unique:
            sums[instance, model_code[here]] = np.where(present, v, 0.0)
            counts[instance, model_code[here]] = present
        else:
            np.add.at(sums, (instance, model_code[here]), np.where(present, v, 0.0))
            np.add.at(counts, (instance, model_code[here]), present)
        num_b.append(sums.sum(axis=0))
        den_b.append(counts.sum(axis=0))
        if n_resamples:
            draws = np.concatenate(list(resample_counts(n_inst, n_resamples, rng)))
            distinct, which = _distinct_columns(counts.reshape(n_inst, -1))
            both = draws @ np.concatenate([sums.reshape(n_inst, -1), distinct], axis=1)
            res_num.append(both[:, : m * k].reshape(n_resamples, m, k))
            res_den.append(both[:, m * k:][:, which].reshape(n_resamples, m, k))
        else:
            res_num.append(np.empty((0, m, k)))
            res_den.append(np.empty((0, m, k)))
        paired.append(counts > 0)
    n_items = np.stack(den_b)  # (benchmarks, models, k): items scored
    item_counts = identity.groupby(["model", "benchmark"]).size().unstack(fill_value=0)
    item_counts = item_counts.reindex(index=list(models), columns=list(benchmarks), fill_value=0)
    # Pooled: each scored item weighs its cell's items per scored item (Hajek), so a benchmark counts by its share
    # of the model's items however densely it was rated; every weight is 1 when every item is scored.
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(n_items > 0, item_counts.to_numpy(dtype=float).T[:, :, None] / n_items, 0.0)
        num, den = np.stack(num_b), n_items
        res_num, res_den = np.stack(res_num, axis=1), np.stack(res_den, axis=1)  # (B, benchmarks, models, k)
        est = num / den
        res = res_num / np.where(res_den > 0, res_den, np.nan)
        pooled_est = (weight * num).sum(axis=0) / (weight * den).sum(axis=0)
        pooled_den = (weight * res_den).sum(axis=1)
        pooled_res = (weight * res_num).sum(axis=1) / np.where(pooled_den > 0, pooled_den, np.nan)
    covered = n_items > 0
    records, est_cols, res_cols = [], [], []
    triples = list(keys_sc.itertuples(index=False, name=None))
    for mi, model in enumerate(models):
        holds = item_counts.loc[model].to_numpy() > 0
        for scope in (*range(len(benchmarks)), None):
            for ki, (source, kind, criterion) in enumerate(triples):
                if scope is None:
                    n = int(n_items[:, mi, ki].sum())
                    if n == 0:
                        continue
                    present_in = covered[:, mi, ki]
                    left_out = [b for b, p, h in zip(benchmarks, present_in, holds, strict=True) if h and not p]
                    note = f"pooled without {', '.join(left_out)} (no {source} scores there)" if left_out else ""
                    records.append((model, POOLED, source, kind, criterion, n, note))
                    est_cols.append(pooled_est[mi, ki])
                    res_cols.append(pooled_res[:, mi, ki])
                else:
                    n = int(n_items[scope, mi, ki])
                    if n == 0:
                        continue
                    records.append((model, benchmarks[scope], source, kind, criterion, n, ""))
                    est_cols.append(est[scope, mi, ki])
                    res_cols.append(res[:, scope, mi, ki])
    keys = pd.DataFrame(records, columns=["model", "benchmark", "source", "source_kind", "criterion", "n_items",
                                          "note"])
    estimate = np.asarray(est_cols, dtype=float)
    resamples = np.stack(res_cols, axis=1) if res_cols else np.empty((n_resamples, 0))
    return Resampled(keys, estimate, resamples, models, benchmarks, keys_sc, item_counts, tuple(paired),
                     n_resamples, seed)


def _interval(estimate: float, draws: np.ndarray, confidence: float) -> tuple[float, float, str]:
    if draws.size == 0:
        return np.nan, np.nan, "no resamples asked for"
    low, high, _, note = bootstrap_interval(estimate, draws, method="percentile", confidence=confidence,
                                            undefined="a score")
    return low, high, note


def percentile_intervals(estimates: np.ndarray, resamples: np.ndarray,
                         confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Percentile intervals of many statistics at once: ``bootstrap_interval(..., method="percentile")`` of
    each column.

    Thousands of columns (every model, benchmark, source and criterion) read one at a time cost a second;
    the columns whose every resample is defined are read in one ``np.quantile`` call (the same quantiles), the
    others through :func:`~medhelm_core.agreement.bootstrap.bootstrap_interval`, which also writes their notes.

    Parameters
    ----------
    estimates : ndarray of shape (C,)
        Each statistic on the data.
    resamples : ndarray of shape (B, C)
        Each statistic on each resample.
    confidence : float
        Confidence level.

    Returns
    -------
    tuple
        ``low`` and ``high`` (arrays of shape (C,)) and one note per column.

    Examples
    --------
    >>> draws = np.random.default_rng(0).normal(size=(1000, 2))
    >>> draws[0, 1] = np.nan
    >>> low, high, notes = percentile_intervals(np.zeros(2), draws)
    >>> low.round(2).tolist(), notes
    ([-2.03, -1.88], ['', '1 resamples without a score were left out'])
    """
    c = len(estimates)
    low, high = np.full(c, np.nan), np.full(c, np.nan)
    notes = ["no resamples asked for" if resamples.shape[0] == 0 else ""] * c
    if resamples.shape[0] == 0 or c == 0:
        return low, high, notes
    clean = np.isfinite(resamples).all(axis=0) & np.isfinite(estimates)
    alpha = (1 - confidence) / 2
    if clean.any():
        low[clean], high[clean] = np.quantile(resamples[:, clean], (alpha, 1 - alpha), axis=0)
    for i in np.flatnonzero(~clean):
        low[i], high[i], notes[i] = _interval(estimates[i], resamples[:, i], confidence)
    return low, high, notes


def model_means(resampled: Resampled, confidence: float = 0.95) -> pd.DataFrame:
    """Each model's mean per benchmark (and pooled), source and criterion with its percentile bootstrap interval.

    Parameters
    ----------
    resampled : Resampled
        :func:`resample_means`.
    confidence : float
        Confidence level of the intervals.

    Returns
    -------
    pandas.DataFrame
        :data:`MEAN_COLUMNS`; ``n_items`` counts the items the mean rests on. A mean with a single item has
        no interval (its instances cannot vary): ``ci_low`` and ``ci_high`` are NaN and ``note`` says so.

    Examples
    --------
    >>> items = pd.DataFrame({"item_id": range(6), "benchmark": "b", "instance_id": [0, 0, 1, 1, 2, 2],
    ...                       "model": ["m1", "m2"] * 3})
    >>> long = pd.DataFrame({"item_id": range(6), "rater_id": "jury", "rater_kind": "jury",
    ...                      "criterion": "accuracy", "score": [4.0, 3.0, 5.0, 3.0, 3.0, 2.0]})
    >>> means = model_means(resample_means(item_scores(long, items), items, n_resamples=500))
    >>> means.query("benchmark == 'pooled' and criterion == 'composite'")[["model", "mean", "n_items"]].round(2)
      model  mean  n_items
    3    m1  4.00        3
    7    m2  2.67        3
    """
    rows = []
    lows, highs, notes = percentile_intervals(resampled.estimate, resampled.resamples, confidence)
    for i, key in enumerate(resampled.keys.itertuples(index=False)):
        low, high, note = lows[i], highs[i], notes[i]
        if key.n_items < 2:
            low, high, note = np.nan, np.nan, "one item: no interval"
        rows.append((key.model, key.benchmark, key.source, key.source_kind, key.criterion, resampled.estimate[i],
                     low, high, key.n_items, "; ".join(n for n in (key.note, note) if n)))
    return pd.DataFrame(rows, columns=MEAN_COLUMNS)


def verdict(low: float, high: float, a: str, b: str) -> str:
    """In words: which model the interval of ``a - b`` favours, or that it does not tell them apart.

    Examples
    --------
    >>> verdict(0.1, 0.5, "m1", "m2"), verdict(-0.2, 0.3, "m1", "m2"), verdict(float("nan"), 1.0, "m1", "m2")
    ('m1 higher', 'not told apart', 'n/a')
    """
    if not (np.isfinite(low) and np.isfinite(high)):
        return "n/a"
    if low > 0:
        return f"{a} higher"
    if high < 0:
        return f"{b} higher"
    return "not told apart"


def model_differences(resampled: Resampled, sources: Sequence[str] = (CLINICIANS, JURY),
                      confidence: float = 0.95) -> pd.DataFrame:
    """Each pair of models' difference in mean (``model_a`` minus ``model_b``), paired by instance.

    Both means of a pair come from the same resampled instances, so what an instance does to both models
    cancels in the interval. ``n_paired`` counts the instances on which both models have a score.

    Parameters
    ----------
    resampled : Resampled
        :func:`resample_means`.
    sources : sequence of str
        Whose means to compare (default: the clinicians and the jury).
    confidence : float
        Confidence level.

    Returns
    -------
    pandas.DataFrame
        :data:`DIFFERENCE_COLUMNS`, one row per pair, scope, source and criterion; ``verdict`` says which model
        the interval favours ("not told apart" when it holds 0). Empty with fewer than two models.

    Examples
    --------
    >>> items = pd.DataFrame({"item_id": range(6), "benchmark": "b", "instance_id": [0, 0, 1, 1, 2, 2],
    ...                       "model": ["m1", "m2"] * 3})
    >>> long = pd.DataFrame({"item_id": range(6), "rater_id": "jury", "rater_kind": "jury",
    ...                      "criterion": "accuracy", "score": [4.0, 3.0, 5.0, 4.0, 3.0, 2.0]})
    >>> diff = model_differences(resample_means(item_scores(long, items), items, n_resamples=500))
    >>> diff.query("benchmark == 'pooled' and criterion == 'accuracy'")[["difference", "ci_low", "verdict"]]
       difference  ci_low    verdict
    2         1.0     1.0  m1 higher
    """
    rows = []
    keys = resampled.keys
    index = resampled._index
    paired = resampled.paired
    sc = resampled.source_criteria
    sc_index = {(s, c): i for i, (s, c) in enumerate(zip(sc["source"], sc["criterion"], strict=True))}
    model_pos = {m: i for i, m in enumerate(resampled.models)}
    wanted = keys[keys["source"].isin(list(sources))][["benchmark", "source", "criterion"]].drop_duplicates()
    found = []
    for a, b in combinations(resampled.models, 2):
        for scope, source, criterion in wanted.itertuples(index=False):
            ia, ib = index.get((a, scope, source, criterion)), index.get((b, scope, source, criterion))
            if ia is None or ib is None:
                continue
            blocks = range(len(resampled.benchmarks)) if scope == POOLED else [resampled.benchmarks.index(scope)]
            k = sc_index[(source, criterion)]
            n_paired = int(sum((paired[bi][:, model_pos[a], k] & paired[bi][:, model_pos[b], k]).sum()
                               for bi in blocks))
            found.append((a, b, scope, source, criterion, ia, ib, n_paired))
    if not found:
        return pd.DataFrame(columns=DIFFERENCE_COLUMNS)
    first = np.array([f[5] for f in found])
    second = np.array([f[6] for f in found])
    estimates = resampled.estimate[first] - resampled.estimate[second]
    lows, highs, notes = percentile_intervals(estimates, resampled.resamples[:, first] - resampled.resamples[:, second],
                                              confidence)
    n_items = keys["n_items"].to_numpy()
    for (a, b, scope, source, criterion, ia, ib, n_paired), estimate, low, high, note in zip(
            found, estimates, lows, highs, notes, strict=True):
        if min(n_items[ia], n_items[ib]) < 2:
            low, high, note = np.nan, np.nan, "a model with one item: no interval"
        rows.append((a, b, scope, source, criterion, estimate, low, high, n_paired, verdict(low, high, a, b), note))
    return pd.DataFrame(rows, columns=DIFFERENCE_COLUMNS)
