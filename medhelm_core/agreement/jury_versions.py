"""Jury-clinician agreement per jury version, so a change of prompt, rubric wording or judges is judged by
its effect on agreement and not by its wording.

Every jury run is compared with the clinicians as MedHELM compares its jury (ICC(3,k) of the mean clinician
composite and the jury composite, each z-scored within itself, with its F interval), plus a bootstrap
interval over items, Pearson's r and Spearman's rho. To make the runs comparable, all of them are computed
on the same items: those the clinicians and *every* compared run scored (each run's own overlap with the
clinicians is given beside). Against a baseline run, the difference of ICCs gets a paired bootstrap
interval: each resample draws the same items for both runs (the engine's resampling with the same seed
draws the same item indices for the same number of items), so what the two runs share cancels out and the
interval shows whether the change moved agreement beyond the noise of which items happened to be rated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from medhelm_core.agreement.bootstrap import bootstrap_distribution, check_bootstrap
from medhelm_core.agreement.contract import COMPOSITE, MIN_ITEMS, rater_scores, require_columns, validate_long
from medhelm_core.agreement.pairs import pair_agreement, zscore_within
from medhelm_core.agreement.scopes import chosen_benchmarks, clinician_criteria
from medhelm_core.errors import AgreementInputError

JURY_COLUMNS: tuple[str, ...] = ("run_id", "item_id", "criterion", "score")
VERSION_COLUMNS: tuple[str, ...] = (
    "run_id",
    "label",
    "baseline",
    "criterion",
    "method",
    "estimate",
    "ci_low",
    "ci_high",
    "ci_method",
    "boot_ci_low",
    "boot_ci_high",
    "boot_ci_method",
    "pearson_r",
    "spearman_rho",
    "n_items",
    "n_items_run",
    "diff",
    "diff_ci_low",
    "diff_ci_high",
    "diff_ci_method",
    "change",
    "reading",
    "note",
)
HIGHER, LOWER, UNCLEAR = "higher", "lower", "no clear change"


def _jury_table(juries: pd.DataFrame) -> tuple[pd.DataFrame, list[object], dict[object, str]]:
    """The juries checked once: string item ids, float scores, runs in the order given, one label each."""
    need = f"; they need {', '.join(JURY_COLUMNS)} (and optionally label)"
    require_columns(juries, JURY_COLUMNS, "juries", hint=need)
    if juries.empty:
        raise AgreementInputError("there are no jury scores to compare")
    data = juries.copy()
    data["item_id"] = data["item_id"].astype(str)
    data["criterion"] = data["criterion"].astype(str)
    score = pd.to_numeric(data["score"], errors="coerce")
    if score.isna().any() or not np.isfinite(score.to_numpy(dtype=float)).all():
        bad = data.loc[score.isna() | ~np.isfinite(score.fillna(0).to_numpy(dtype=float))].iloc[0]
        raise AgreementInputError(
            f"a jury score is missing or not finite (run {bad['run_id']!r}, item {bad['item_id']!r}, "
            f"criterion {bad['criterion']!r}); leave out items the jury did not score"
        )
    data["score"] = score.astype(float)
    dup = data.duplicated(["run_id", "item_id", "criterion"])
    if dup.any():
        first = data.loc[dup].iloc[0]
        raise AgreementInputError(
            f"run {first['run_id']!r} has two scores for item {first['item_id']!r}, criterion {first['criterion']!r}; "
            "give each run's jury mean once per item and criterion"
        )
    runs = list(dict.fromkeys(data["run_id"]))
    if "label" in data.columns:
        labels = {r: str(data.loc[data["run_id"] == r, "label"].iloc[0]) for r in runs}
    else:
        labels = {r: str(r) for r in runs}
    return data, runs, labels


def _run_scores(jury: pd.DataFrame, criterion: str, rubric: list[str]) -> pd.Series:
    """One run's score per item: a criterion's jury mean, or the composite where every criterion is scored."""
    if criterion != COMPOSITE:
        part = jury[jury["criterion"] == criterion]
        return pd.Series(part["score"].to_numpy(), index=part["item_id"].to_numpy(), dtype=float)
    wide = jury[jury["criterion"].isin(rubric)].pivot(index="item_id", columns="criterion", values="score")
    wide = wide.reindex(columns=rubric).dropna(how="any")
    return wide.mean(axis=1)


def _matrix(a: pd.Series, b: pd.Series) -> np.ndarray:
    """The z-scored two-column matrix :func:`pair_agreement` builds from the same two series (items sorted)."""
    joined = pd.concat([a, b], axis=1, join="inner").sort_index()
    x = np.column_stack([zscore_within(joined.iloc[:, 0].to_numpy()), zscore_within(joined.iloc[:, 1].to_numpy())])
    return x[~np.isnan(x).any(axis=1)]


def _criterion_rows(
    clin: pd.DataFrame,
    juries: pd.DataFrame,
    runs: list[object],
    labels: dict[object, str],
    base: object,
    criterion: str,
    rubric: list[str],
    bootstrap: str,
    n_resamples: int,
    seed: int,
    confidence: float,
) -> list[dict[str, object]]:
    per_clinician = rater_scores(clin, criterion, rubric)
    clin_mean = per_clinician.groupby("item_id")["score"].mean()
    scores = {r: _run_scores(juries[juries["run_id"] == r], criterion, rubric) for r in runs}
    own = {r: s.index.intersection(clin_mean.index) for r, s in scores.items()}
    common = clin_mean.index
    for r in runs:
        common = common.intersection(own[r])
    common = common.sort_values()
    alpha = (1 - confidence) / 2
    results: dict[object, dict[str, object]] = {}
    draws: dict[object, np.ndarray | None] = {}
    for r in runs:
        a, b = clin_mean.loc[common], scores[r].loc[common]
        frame = pair_agreement(a, b, icc_types=("ICC3k",), bootstrap=bootstrap, n_resamples=n_resamples, seed=seed,
                               confidence=confidence)
        f_row = frame[frame["ci_method"] == "F"].iloc[0]
        boot = frame[frame["ci_method"] != "F"].iloc[0]
        x = _matrix(a, b)
        # Same n and seed as every other run: the resamples draw the same items, which pairs the differences.
        draws[r] = (bootstrap_distribution(x, ["ICC3k"], n_resamples, seed)["ICC3k"]
                    if len(x) == len(common) and len(common) >= MIN_ITEMS and np.isfinite(f_row["estimate"]) else None)
        note = f"on the {len(common)} items the clinicians and every compared run scored"
        if len(own[r]) > len(common):
            note += f" (this run alone shares {len(own[r])} with the clinicians)"
        extra = "; ".join(dict.fromkeys(p for p in (str(f_row["note"] or ""), str(boot["note"] or "")) if p))
        results[r] = {
            "run_id": r,
            "label": labels[r],
            "baseline": r == base,
            "criterion": criterion,
            "method": "ICC3k",
            "estimate": float(f_row["estimate"]),
            "ci_low": float(f_row["ci_low"]),
            "ci_high": float(f_row["ci_high"]),
            "ci_method": "F",
            "boot_ci_low": float(boot["ci_low"]),
            "boot_ci_high": float(boot["ci_high"]),
            "boot_ci_method": str(boot["ci_method"]),
            "pearson_r": float(f_row["pearson_r"]),
            "spearman_rho": float(f_row["spearman_rho"]),
            "n_items": len(common),
            "n_items_run": len(own[r]),
            # ICC(C,k) of two z-scored sides is 2r / (1 + r): Koo & Li's bands were not written for it.
            "reading": "",
            "note": "; ".join(p for p in (note, extra) if p),
        }
    base_row, base_draws = results[base], draws[base]
    for r in runs:
        row = results[r]
        row["diff_ci_method"] = "bootstrap-percentile (paired items)"
        if r == base:
            row.update(diff=0.0, diff_ci_low=np.nan, diff_ci_high=np.nan, diff_ci_method="", change="")
            continue
        row["diff"] = float(row["estimate"]) - float(base_row["estimate"])
        lo = hi = np.nan
        mine = draws[r]
        if mine is not None and base_draws is not None:
            delta = mine - base_draws
            delta = delta[np.isfinite(delta)]
            if delta.size:
                lo, hi = (float(v) for v in np.quantile(delta, [alpha, 1 - alpha]))
                if delta.size < n_resamples:
                    row["note"] = f"{row['note']}; {n_resamples - delta.size} resamples without variance left out"
        row["diff_ci_low"], row["diff_ci_high"] = lo, hi
        if not np.isfinite(lo):
            row["change"] = ""
        else:
            row["change"] = HIGHER if lo > 0 else LOWER if hi < 0 else UNCLEAR
    return [results[r] for r in runs]


def version_agreement(
    clinicians: pd.DataFrame,
    juries: pd.DataFrame,
    *,
    baseline: object | None = None,
    criteria: Sequence[str] | None = None,
    by_criterion: bool = False,
    benchmarks: Sequence[str] | None = None,
    bootstrap: str = "bca",
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Jury-clinician agreement of each jury run (a version of prompt, rubric wording or judges), side by side.

    Each run is set against the mean clinician composite as in MedHELM's protocol: the jury composite is
    the mean of the run's jury scores over the criteria (only on items where every criterion is scored),
    and ICC(3,k) is taken with its F interval. All runs are computed on the same items, those the
    clinicians and every compared run scored (``n_items``; each run's own overlap with the clinicians is
    ``n_items_run``), so their figures can be compared; each side is z-scored within itself over those
    items, so the figures equal :func:`~medhelm_core.agreement.pair_agreement` on them.

    Parameters
    ----------
    clinicians : pandas.DataFrame
        Clinician ratings in the long contract (see :mod:`medhelm_core.agreement`); rows of other kinds
        are ignored.
    juries : pandas.DataFrame
        Each run's jury score per item and criterion (the mean over its surviving judges), columns
        ``run_id``, ``item_id``, ``criterion``, ``score`` and optionally ``label`` (what the run used,
        e.g. its judges, rubric and prompt versions). Runs keep the order of their first row.
    baseline : optional
        The run the others are compared with (default the first run).
    criteria : sequence of str, optional
        Criteria of the composite (default all the clinicians rated).
    by_criterion : bool
        Also a block per criterion, each on the items every run scored on that criterion.
    benchmarks : sequence of str, optional
        Only items of these benchmarks (default all), pooled.
    bootstrap : {"bca", "percentile"}
        Method of each run's own bootstrap interval. The difference always uses paired percentile intervals.
    n_resamples, seed : int
        Bootstrap size and seed (the same resamples for every run).
    confidence : float
        Confidence level of every interval.

    Returns
    -------
    pandas.DataFrame
        One row per run (per criterion block: ``composite`` first), columns ``VERSION_COLUMNS``:
        ``run_id``, ``label``, ``baseline`` (bool), ``criterion``, ``method`` (``ICC3k``), ``estimate``,
        ``ci_low``/``ci_high`` (F interval, ``ci_method`` ``F``), ``boot_ci_low``/``boot_ci_high``
        (``boot_ci_method``), ``pearson_r``, ``spearman_rho``, ``n_items`` (common items), ``n_items_run``,
        ``diff`` (ICC minus the baseline's; 0 for the baseline), ``diff_ci_low``/``diff_ci_high`` (paired
        bootstrap; NaN for the baseline), ``diff_ci_method``, ``change`` (``higher`` or ``lower`` when the
        difference's interval excludes 0, ``no clear change`` when it does not, empty for the baseline),
        ``reading`` (empty: Koo & Li do not apply to ICC(C,k) of z-scored sides) and ``note``.

    Raises
    ------
    AgreementInputError
        No clinician ratings or jury scores, a column missing, a score not finite, a repeated
        (run, item, criterion), an unknown criterion, benchmark or baseline.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from medhelm_core.agreement.jury_versions import version_agreement
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.normal(3, 1, 40)
    >>> crits = ["accuracy", "clarity"]
    >>> clin = pd.DataFrame([(f"i{i}", c, "clinician", k, float(np.clip(np.rint(truth[i] + rng.normal(0, .5)), 1, 5)),
    ...                       "medi_qa") for i in range(40) for c in ("c1", "c2") for k in crits],
    ...                     columns=["item_id", "rater_id", "rater_kind", "criterion", "score", "benchmark"])
    >>> def jury(run, noise):
    ...     return [(run, f"i{i}", k, float(np.clip(truth[i] + rng.normal(0, noise), 1, 5)))
    ...             for i in range(40) for k in crits]
    >>> juries = pd.DataFrame(jury(1, 2.0) + jury(2, 0.3), columns=["run_id", "item_id", "criterion", "score"])
    >>> table = version_agreement(clin, juries.assign(label=juries["run_id"].map({1: "prompt v1", 2: "prompt v2"})),
    ...                           n_resamples=500)
    >>> table[["label", "n_items", "change"]].values.tolist()
    [['prompt v1', 40, ''], ['prompt v2', 40, 'higher']]
    """
    check_bootstrap(bootstrap)
    if n_resamples < 1:
        raise AgreementInputError(f"n_resamples must be at least 1, got {n_resamples}")
    data = validate_long(clinicians)
    clin = data[data["rater_kind"] == "clinician"]
    if clin.empty:
        raise AgreementInputError("there are no clinician ratings to compare the jury runs with")
    clin, _ = chosen_benchmarks(clin, benchmarks)
    rubric = clinician_criteria(clin, criteria)
    jury, runs, labels = _jury_table(juries)
    base = runs[0] if baseline is None else next((r for r in runs if str(r) == str(baseline)), None)
    if base is None:
        raise AgreementInputError(
            f"baseline run {baseline!r} is not among the compared runs ({', '.join(map(str, runs))})"
        )
    rows: list[dict[str, object]] = []
    for criterion in [COMPOSITE, *(rubric if by_criterion else [])]:
        rows += _criterion_rows(clin, jury, runs, labels, base, criterion, rubric, bootstrap, n_resamples, seed,
                                confidence)
    table = pd.DataFrame(rows).reindex(columns=list(VERSION_COLUMNS))
    table["n_items"] = table["n_items"].astype(int)
    table["n_items_run"] = table["n_items_run"].astype(int)
    return table
