"""Which judges carry the jury: every judge alone, every jury without one judge, and the human ceiling.

Each subset of judges is compared with the clinicians as MedHELM compares its jury: the subset's score
per item is the mean over its judges (each judge's composite, or one criterion), the clinicians' score is
the mean over the clinicians who rated the item, both are z-scored within themselves, and ICC(3,k) is
taken over the items both scored, beside Pearson's r, Spearman's rho (on the raw means, with float noise
rounded off so that tied means stay tied) and the quadratic-weighted kappa.

The ceiling a judge is measured against is the clinicians' own agreement: each clinician against the
mean of the other clinicians on the items they share (:func:`leave_one_clinician_out`), summarised by
its median and range, as HealthBench sets its model graders beside a physician baseline. The two are
not quite alike (a judge faces the mean of all clinicians on an item, a clinician the mean of the
others), so the ceiling is a reference, not a bound.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from medhelm_core.agreement.contract import COMPOSITE, on_scale, rater_scores, validate_long
from medhelm_core.agreement.incomplete import loco_from_scores
from medhelm_core.agreement.pairs import pair_agreement
from medhelm_core.agreement.scopes import POOLED, benchmark_scopes, clinician_criteria, reused_rows
from medhelm_core.agreement.special import spearman
from medhelm_core.errors import AgreementInputError

ALL_JUDGES = "all judges"
CLINICIAN_CEILING = "clinician ceiling"
JUDGE_SUBSET_COLUMNS: tuple[str, ...] = (
    "subset",
    "subset_kind",
    "benchmark",
    "criterion",
    "judges",
    "n_judges",
    "method",
    "estimate",
    "ci_low",
    "ci_high",
    "ci_method",
    "range_low",
    "range_high",
    "pearson_r",
    "spearman_rho",
    "kappa_qw",
    "n_items",
    "note",
)


def _tie_safe_spearman(a: pd.Series, b: pd.Series, items: list[str]) -> float:
    # Means of integer scores that tie exactly can differ in the last bits (and more so once z-scored),
    # which breaks ties at random and moves rho; rounding off that noise keeps the ties.
    x = np.round(a.reindex(items).to_numpy(dtype=float), 9)
    y = np.round(b.reindex(items).to_numpy(dtype=float), 9)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return spearman(x, y)


def _subsets(judges: list[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    subsets = [(f"judge: {j}", "judge", (j,)) for j in judges]
    if len(judges) >= 2:
        subsets.append((ALL_JUDGES, "all", tuple(judges)))
        subsets += [(f"without: {j}", "without", tuple(o for o in judges if o != j)) for j in judges]
    return subsets


@dataclass(frozen=True)
class Ceiling:
    """The clinicians' ceiling: the median ICC(3,k) of each clinician against the mean of the others, with the
    range over clinicians (a median over clinicians has no sampling interval; the range shows the spread)."""

    estimate: float
    low: float
    high: float
    #: clinicians whose ICC is defined (enough items shared with the others)
    clinicians: int


def clinician_ceiling(loco: pd.DataFrame) -> Ceiling:
    """Summarise :func:`~medhelm_core.agreement.leave_one_clinician_out` (its ``icc3k`` column) as the ceiling.

    Examples
    --------
    >>> import pandas as pd
    >>> from medhelm_core.agreement import clinician_ceiling
    >>> clinician_ceiling(pd.DataFrame({"icc3k": [0.6, 0.8, None, 0.7]}))
    Ceiling(estimate=0.7, low=0.6, high=0.8, clinicians=3)
    """
    defined = loco["icc3k"].dropna()
    if defined.empty:
        return Ceiling(np.nan, np.nan, np.nan, 0)
    return Ceiling(float(defined.median()), float(defined.min()), float(defined.max()), int(len(defined)))


def _ceiling_rows(scores: pd.DataFrame, confidence: float, per_clinician: bool) -> list[dict[str, object]]:
    loco = loco_from_scores(scores, confidence=confidence)
    defined = loco[loco["icc3k"].notna()]
    ceiling = clinician_ceiling(loco)
    base = {"judges": (), "n_judges": 0, "method": "ICC3k", "kappa_qw": np.nan}
    row: dict[str, object] = {
        "subset": CLINICIAN_CEILING,
        "subset_kind": "ceiling",
        **base,
        "estimate": ceiling.estimate,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "ci_method": "none",
        "range_low": ceiling.low,
        "range_high": ceiling.high,
        "pearson_r": float(defined["pearson_r"].median()) if len(defined) else np.nan,
        "spearman_rho": float(defined["spearman_rho"].median()) if len(defined) else np.nan,
        "n_items": int(defined["n_items"].median()) if len(defined) else 0,
        "note": (
            f"median over {len(defined)} of {len(loco)} clinician(s), each against the mean of the others; "
            "n_items is the median of their shared items"
            if len(defined)
            else "no clinician shares enough items with the others"
        ),
    }
    rows = [row]
    if per_clinician:
        for rec in loco.to_dict("records"):
            rows.append(
                {
                    "subset": f"clinician: {rec['clinician']}",
                    "subset_kind": "clinician",
                    **base,
                    "estimate": rec["icc3k"],
                    "ci_low": rec["ci_low"],
                    "ci_high": rec["ci_high"],
                    "ci_method": "F",
                    "range_low": np.nan,
                    "range_high": np.nan,
                    "pearson_r": rec["pearson_r"],
                    "spearman_rho": rec["spearman_rho"],
                    "n_items": rec["n_items"],
                    "note": rec["note"],
                }
            )
    return rows


def _scope_rows(
    scores: pd.DataFrame,
    judges: list[str],
    bootstrap: str | None,
    n_resamples: int,
    seed: int,
    confidence: float,
    kappa_labels: Sequence[int],
    per_clinician: bool,
) -> list[dict[str, object]]:
    clin = scores[scores["rater_kind"] == "clinician"]
    clin_mean = clin.groupby("item_id")["score"].mean()
    judge_wide = scores[scores["rater_kind"] == "judge"].pivot(index="item_id", columns="rater_id", values="score")
    rows: list[dict[str, object]] = []
    for name, kind, members in _subsets(judges):
        present = [j for j in members if j in judge_wide.columns]
        part = judge_wide.reindex(columns=present)
        # The subset's score rests on the judges that scored the item; say when that is fewer than all.
        subset_score = part.mean(axis=1).dropna()
        n_on_item = part.notna().sum(axis=1).loc[subset_score.index]
        kappa = on_scale(subset_score, kappa_labels) and on_scale(clin_mean, kappa_labels)
        frame = pair_agreement(
            clin_mean,
            subset_score,
            icc_types=("ICC3k",),
            bootstrap=bootstrap,
            n_resamples=n_resamples,
            seed=seed,
            confidence=confidence,
            kappa_a=clin_mean if kappa else None,
            kappa_b=subset_score if kappa else None,
            kappa_labels=kappa_labels,
        )
        used = list(frame["items_used"].iloc[0])
        rho = _tie_safe_spearman(clin_mean, subset_score, used)
        short = int((n_on_item.reindex(used) < len(members)).sum())
        subset_note = f"{short} item(s) rest on fewer than {len(members)} judge(s)" if short else ""
        for rec in frame.to_dict("records"):
            rows.append(
                {
                    "subset": name,
                    "subset_kind": kind,
                    "judges": members,
                    "n_judges": len(members),
                    "method": rec["method"],
                    "estimate": rec["estimate"],
                    "ci_low": rec["ci_low"],
                    "ci_high": rec["ci_high"],
                    "ci_method": rec["ci_method"],
                    "range_low": np.nan,
                    "range_high": np.nan,
                    "pearson_r": rec["pearson_r"],
                    "spearman_rho": rho,
                    "kappa_qw": rec["kappa_qw"],
                    "n_items": rec["n_items"],
                    "note": "; ".join(p for p in (subset_note, rec["note"]) if p),
                }
            )
    rows += _ceiling_rows(clin, confidence, per_clinician)
    return rows


def judge_subset_agreement(
    long: pd.DataFrame,
    criteria: Sequence[str] | None = None,
    criterion: str = COMPOSITE,
    *,
    by_benchmark: bool = False,
    bootstrap: str | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    per_clinician: bool = False,
    kappa_labels: Sequence[int] = (1, 2, 3, 4, 5),
    scope_versions: Mapping[str, Hashable] | None = None,
    scope_cache: MutableMapping[Hashable, list[dict[str, object]]] | None = None,
) -> pd.DataFrame:
    """Agreement with the clinicians of every judge alone, every jury without one judge, and the ceiling.

    Parameters
    ----------
    long : pandas.DataFrame
        Ratings in the long contract (see :mod:`medhelm_core.agreement`): clinicians and one row per
        judge, item and criterion with ``rater_kind="judge"`` and ``rater_id`` the judge model (for
        example from :func:`medhelm_core.jury.results.verdict_scores_frame`, ``ok`` verdicts only).
        Rows of other kinds (the jury mean, metrics) are ignored.
    criteria : sequence of str, optional
        Criteria of the composite (default all the clinicians used).
    criterion : str
        ``"composite"`` (MedHELM's protocol) or one criterion.
    by_benchmark : bool
        Also one block per benchmark; the ``pooled`` block over all items always comes last.
    bootstrap : {"bca", "percentile"} or None
        Add a row per subset with a bootstrap interval over items (``ci_method`` says which).
    n_resamples, seed : int
        Bootstrap size and seed.
    confidence : float
        Confidence level of every interval.
    per_clinician : bool
        Also list each clinician against the others (``subset`` ``"clinician: <id>"``) beneath the
        ceiling's summary row.
    kappa_labels : sequence of int
        Rating scale of the quadratic-weighted kappa.
    scope_versions, scope_cache : optional
        Recompute only the scopes whose data changed, as :func:`~medhelm_core.agreement.agreement_table` does.

    Returns
    -------
    pandas.DataFrame
        Columns ``JUDGE_SUBSET_COLUMNS``: ``subset`` (``"judge: X"``, ``"all judges"``, ``"without: X"``,
        ``"clinician ceiling"``, optionally ``"clinician: C"``), ``subset_kind`` (judge, all, without,
        ceiling, clinician), ``benchmark``, ``criterion``, ``judges`` (tuple), ``n_judges``, ``method``
        (``ICC3k``), ``estimate``, ``ci_low``, ``ci_high``, ``ci_method`` (F, bootstrap-..., none),
        ``range_low`` and ``range_high`` (ceiling: the clinicians' range), ``pearson_r``,
        ``spearman_rho`` (ceiling: medians), ``kappa_qw``, ``n_items`` and ``note``. With one judge
        there is no "all judges" or "without" row.

    Raises
    ------
    AgreementInputError
        When the table breaks the contract, has no clinician or no judge, or names an unknown criterion.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from medhelm_core.agreement.judges import judge_subset_agreement
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.normal(3, 1, 30)
    >>> raters = [("c1", "clinician", 0.3), ("c2", "clinician", 0.3), ("gpt", "judge", 0.3),
    ...           ("noise", "judge", 5.0)]
    >>> rows = [(f"i{i}", r, k, "accuracy", float(np.clip(np.rint(truth[i] + rng.normal(0, sd)), 1, 5)))
    ...         for i in range(30) for r, k, sd in raters]
    >>> long = pd.DataFrame(rows, columns=["item_id", "rater_id", "rater_kind", "criterion", "score"])
    >>> table = judge_subset_agreement(long.assign(benchmark="medi_qa")).set_index("subset")
    >>> bool(table.loc["without: noise", "estimate"] > table.loc["all judges", "estimate"])
    True
    """
    data = validate_long(long)
    clin = data[data["rater_kind"] == "clinician"]
    if clin.empty:
        raise AgreementInputError("there are no clinician ratings to compare the judges with")
    judges = sorted(data.loc[data["rater_kind"] == "judge", "rater_id"].unique())
    if not judges:
        raise AgreementInputError(
            "there are no judge ratings (rater_kind 'judge', rater_id the judge model); "
            "pass each judge's verdicts, not only the jury mean"
        )
    rubric = clinician_criteria(clin, criteria)
    if criterion != COMPOSITE and criterion not in rubric:
        raise AgreementInputError(f"criterion {criterion!r} not rated by clinicians; known: {', '.join(rubric)}")
    data = data[data["rater_kind"].isin(("clinician", "judge"))]
    rows: list[dict[str, object]] = []
    known = sorted(data["benchmark"].unique())
    settings = (tuple(judges), criterion, tuple(rubric), bootstrap, n_resamples, seed, confidence,
                tuple(kappa_labels), per_clinician)
    for bench, part in benchmark_scopes(data, known if by_benchmark else []):
        def compute(part: pd.DataFrame = part) -> list[dict[str, object]]:
            scores = rater_scores(part, criterion, rubric)
            return _scope_rows(scores, judges, bootstrap, n_resamples, seed, confidence, kappa_labels, per_clinician)

        key = ("judge subsets", bench, tuple(known) if bench == POOLED else (), settings)
        for row in reused_rows(scope_cache, scope_versions, bench, key, compute):
            rows.append({**row, "benchmark": bench, "criterion": criterion})
    table = pd.DataFrame(rows).reindex(columns=list(JUDGE_SUBSET_COLUMNS))
    table["n_items"] = table["n_items"].fillna(0).astype(int)
    table["note"] = table["note"].fillna("")
    return table
