"""What the Agreement dashboard and the calibration report show of a study, as one picklable view model.

A study of 20,000 items has about 120,000 clinician scores, 60,000 judge verdicts and 40,000 metric scores.
:func:`load_dashboard_data` reads them through :mod:`medhelm_core.frames` (ids and scores only, never
prompts, raw answers or item texts, which the dashboard does not chart), so a load stays a fraction of a
second; the page then caches the result under :func:`~medhelm_core.frames.data_version`.

The long table is :func:`medhelm_core.frames.scores_long_frame`'s (clinicians, the jury mean over
surviving judges, the metrics with one settings variant each), with one addition for the dashboard's
sake: each judge of a run with several judges is added as a rater of kind ``judge`` (for "which judge to
trust").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from sqlmodel import Session

from medhelm_core.agreement.contract import is_trusted, trust_long, trusted_concat, trusted_rows
from medhelm_core.db.models import JuryRun, Study, VerdictStatus
from medhelm_core.frames import (
    AGREEMENT_METRICS,
    LONG_COLUMNS,
    clinician_ratings_frame,
    first_submissions_frame,
    item_identity_frame,
    judge_scores_frame,
    jury_long,
    study_jury_run,
    without_items,
)
from medhelm_core.frames.metrics import chosen_metric_long, metric_score_rows, metric_settings, newest_stamps
from medhelm_core.rating.gold import gold_item_ids
from medhelm_core.rating.quality import speed_of_first_submissions
from medhelm_core.rating.quality_flags import SPEED_SUMMARY_COLUMNS
from medhelm_core.rubric import RubricSpec, rubric_spec

#: stored metric name -> the name the paper (and the headline table) uses
HEADLINE_METRICS: dict[str, str] = {"rougeL_f": "ROUGE-L", "bertscore_f1": "BERTScore"}
#: every metric set beside the clinicians (:data:`~medhelm_core.frames.AGREEMENT_METRICS`), with the name shown for it
METRIC_LABELS: dict[str, str] = {
    **{m: m for m in AGREEMENT_METRICS},
    "rougeL_f": "ROUGE-L",
    "rougeLsum_f": "ROUGE-Lsum",
    "bertscore_f1": "BERTScore",
}


@dataclass(frozen=True)
class JuryRunInfo:
    """The jury run a dashboard uses, as plain data (what the page labels and the report's manifest holds)."""

    id: int
    name: str
    source: str
    status: str
    judges: tuple[str, ...]
    n_verdicts: int
    n_failed: int
    config_hash: str
    prompt_hash: str | None
    config: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def recorded(self) -> bool:
        """True for scores imported from elsewhere (such as MedHELM's published means): no judge ran here."""
        return self.source == "recorded"

    @property
    def label(self) -> str:
        """One line that says which run this is and, for a recorded one, that it is recorded."""
        kind = "recorded scores, no judges called by this app" if self.recorded else self.source
        return f"jury run {self.id}: {self.name} ({kind}; {len(self.judges)} judge(s), {self.n_failed} failed verdicts)"


@dataclass(frozen=True)
class VerdictCounts:
    """A benchmark's verdicts of the jury run: rows (one per verdict and criterion), failed ones, judges."""

    rows: int
    failed: int
    judges: frozenset[str]


@dataclass(frozen=True)
class BenchmarkPart:
    """What one benchmark adds to the study-wide figures of :class:`DashboardData` besides its rows of ``long``,
    kept so that :func:`reload_dashboard_data` can read one benchmark again and recombine the rest."""

    verdicts: VerdictCounts
    #: per metric, (computed_at, settings_hash) of its newest score here (:func:`~medhelm_core.frames.newest_stamps`)
    metric_stamps: dict[str, tuple[Any, str]]
    #: the clinicians' first submissions of its items (the speed flags)
    firsts: pd.DataFrame


@dataclass(frozen=True)
class DashboardData:
    """Everything the dashboard charts, for one study, jury run and data version (picklable, so cacheable)."""

    study_id: int
    study_name: str
    rubric: RubricSpec
    long: pd.DataFrame = field(hash=False, compare=False)
    items: pd.DataFrame = field(hash=False, compare=False)
    jury_run: JuryRunInfo | None = None
    metric_settings: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False, compare=False)
    #: gold items left out of every figure (they measure the clinicians; see medhelm_core.rating.gold)
    gold_items: int = 0
    #: per clinician, first ratings faster than the study's threshold (rater_quality.speed_summary)
    speed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(SPEED_SUMMARY_COLUMNS)),
                                hash=False, compare=False)
    #: per benchmark, what :func:`reload_dashboard_data` recombines
    parts: dict[str, BenchmarkPart] = field(default_factory=dict, hash=False, compare=False, repr=False)

    @property
    def criteria(self) -> list[str]:
        """The rubric's criteria in its own order (accuracy, completeness, clarity)."""
        return self.rubric.criterion_names

    @property
    def scale(self) -> tuple[int, int]:
        """The rating scale (lowest and highest level over the rubric's criteria)."""
        crits = self.rubric.criteria
        if not crits:
            return (1, 5)
        return (min(c.scale_min for c in crits), max(c.scale_max for c in crits))


def _run_info(run: JuryRun, parts: Mapping[str, BenchmarkPart]) -> JuryRunInfo:
    config = dict(run.config or {})
    prompt_hash = config.get("prompt_template_hash")
    return JuryRunInfo(
        id=int(run.id),
        name=run.name,
        source=run.source,
        status=run.status,
        judges=tuple(sorted(_judges(parts))),
        n_verdicts=sum(p.verdicts.rows for p in parts.values()),
        n_failed=sum(p.verdicts.failed for p in parts.values()),
        config_hash=run.config_hash,
        prompt_hash=str(prompt_hash) if prompt_hash else None,
        config=config,
    )


def load_dashboard_data(session: Session, study: Study, jury_run_id: int | None = None) -> DashboardData:
    """Load a study's scores for the dashboard: clinicians, the jury (and its judges) and the headline metrics.

    Parameters
    ----------
    session : Session
        An open session.
    study : Study
        The study.
    jury_run_id : int, optional
        The jury run (default: the newest with a surviving verdict, as ``medhelm agreement`` uses).

    Returns
    -------
    DashboardData
        ``long`` in the agreement contract, checked once and trusted
        (:func:`~medhelm_core.agreement.contract.trust_long`: never change it), with item ids as strings, gold
        items left out, and rows in benchmark, item, rater kind, rater and criterion order (so that a reload of some
        benchmarks gives the same frame as a whole load); ``items`` with the identity of every item (no texts); the
        jury run's description, the metric settings used, the number of gold items left out and each clinician's
        speed flags.

    Examples
    --------
    >>> data = load_dashboard_data(session, study)  # doctest: +SKIP
    >>> data.long.groupby("rater_kind").size()  # doctest: +SKIP
    """
    identity = item_identity_frame(session, study)
    run = study_jury_run(session, study, jury_run_id, or_newest=True)
    gold = gold_item_ids(session, study)
    parts, long, settings = _read_benchmarks(session, study, run, identity, None, {}, gold)
    return DashboardData(
        study_id=int(study.id),
        study_name=study.name,
        rubric=rubric_spec(session, study.rubric_id),
        long=long,
        items=identity.assign(item_id=identity["item_id"].astype(str)),
        jury_run=_run_info(run, parts) if run is not None else None,
        metric_settings=settings,
        gold_items=len(gold),
        speed=_speed(parts, study),
        parts=parts,
    )


def reload_dashboard_data(
    session: Session,
    study: Study,
    previous: DashboardData,
    changed: Collection[str],
    jury_run_id: int | None = None,
    clinicians_only: Collection[str] = (),
) -> DashboardData:
    """``previous`` with the scores of the ``changed`` benchmarks read again: what a new rating, verdict or metric
    score calls for (the data-version counters say which benchmarks changed), at a fraction of a whole load. Of
    the benchmarks in ``clinicians_only`` (those whose other scores' counter did not change,
    :func:`~medhelm_core.db.data_versions.others_scope`) only the clinicians' ratings are read again; their jury and
    metric rows are kept: a rating's reload skips the verdicts, by far the larger part.

    Everything else is taken from ``previous``, which must be this study's and jury-run choice's. Falls back to a
    whole :func:`load_dashboard_data` when the change reaches further: another jury run became the default, a
    metric's newest settings variant changed, or the judges of the run are no longer the same. The result is
    the frame a whole load gives, row for row.
    """
    run = study_jury_run(session, study, jury_run_id, or_newest=True)
    known = set(previous.parts)
    if (run.id if run else None) != (previous.jury_run.id if previous.jury_run else None) or not known:
        return load_dashboard_data(session, study, jury_run_id)
    identity = previous.items.assign(item_id=previous.items["item_id"].astype(int))
    changed = sorted(set(changed) & known)
    only = set(clinicians_only)
    light = [b for b in changed if b in only]
    whole = [b for b in changed if b not in only]
    chosen = {m: s["settings_hash"] for m, s in previous.metric_settings.items()}
    judges = frozenset(previous.jury_run.judges) if previous.jury_run else frozenset()
    gold = gold_item_ids(session, study)
    before = previous.long if is_trusted(previous.long) else trust_long(previous.long)
    fresh, blocks = {}, []
    if whole:
        fresh, block, _ = _read_benchmarks(session, study, run, identity, whole, chosen, gold,
                                           several_judges=len(judges) > 1)
        blocks.append(block)
    if light:
        clinician_parts, block = _read_clinicians(session, study, previous.parts, before, light, gold)
        fresh |= clinician_parts
        blocks.append(block)
    parts = {b: p for b, p in previous.parts.items() if b not in fresh} | fresh
    if _chosen_variants(parts) != chosen or _judges(parts) != judges:
        return load_dashboard_data(session, study, jury_run_id)
    # The kept rows and the new ones were each checked against the agreement contract; joining them checks only
    # what can break between them, not the whole table again.
    kept = trusted_rows(before, np.flatnonzero(~before["benchmark"].isin(changed).to_numpy()))
    long = trusted_concat([kept, *blocks])
    long = trusted_rows(long, np.argsort(pd.factorize(long["benchmark"], sort=True)[0], kind="stable"))
    return replace(
        previous,
        long=long,
        jury_run=_run_info(run, parts) if run is not None else None,
        gold_items=len(gold),
        speed=_speed(parts, study),
        parts=parts,
    )


def _read_benchmarks(
    session: Session,
    study: Study,
    run: JuryRun | None,
    identity: pd.DataFrame,
    benchmarks: Sequence[str] | None,
    chosen: dict[str, str],
    gold: Collection[int],
    several_judges: bool | None = None,
) -> tuple[dict[str, BenchmarkPart], pd.DataFrame, dict[str, dict[str, Any]]]:
    """The scores of ``benchmarks`` (None: all): their parts, their rows of the long table (sorted, the ``gold``
    items left out, item ids as strings) and, on a whole read (``chosen`` empty), each metric's chosen variant."""
    clinicians = clinician_ratings_frame(session, study, benchmarks=benchmarks)
    judged = judge_scores_frame(session, run.id, benchmarks=benchmarks) if run is not None else None
    metric_rows = metric_score_rows(session, study, benchmarks=benchmarks)
    firsts = first_submissions_frame(session, study, benchmarks)
    place = identity.set_index("item_id")["benchmark"]
    names = sorted(identity["benchmark"].unique()) if benchmarks is None else list(benchmarks)
    verdicts = judged.assign(benchmark=judged["item_id"].map(place)) if judged is not None else None
    scored = metric_rows.assign(benchmark=metric_rows["item_id"].map(place))
    parts = {
        b: BenchmarkPart(
            verdicts=_verdict_counts(verdicts[verdicts["benchmark"] == b] if verdicts is not None else None),
            metric_stamps=newest_stamps(scored[scored["benchmark"] == b]),
            firsts=firsts[firsts["benchmark"] == b].reset_index(drop=True),
        )
        for b in names
    }
    settings: dict[str, dict[str, Any]] = {}
    if not chosen:
        chosen = _chosen_variants(parts)
        settings = metric_settings(session, chosen)
    rows = [clinicians]
    if judged is not None:
        several = several_judges if several_judges is not None else len(_judges(parts)) > 1
        rows.append(jury_long(judged, identity, judges=True, several_judges=several)[LONG_COLUMNS])
    rows.append(chosen_metric_long(metric_rows, chosen, identity))
    rows = [r for r in rows if not r.empty]
    block = pd.concat(rows, ignore_index=True)[LONG_COLUMNS] if rows else pd.DataFrame(columns=LONG_COLUMNS)
    block = without_items(block, gold)
    return parts, trust_long(_sorted_long(block)), settings


def _read_clinicians(
    session: Session,
    study: Study,
    parts: Mapping[str, BenchmarkPart],
    before: pd.DataFrame,
    benchmarks: Sequence[str],
    gold: Collection[int],
) -> tuple[dict[str, BenchmarkPart], pd.DataFrame]:
    """The parts and rows of ``benchmarks`` with their clinicians' ratings read again and their other rows (the
    jury's, the judges', the metrics') kept from ``before``: what :func:`_read_benchmarks` gives when only the
    clinicians' ratings changed, in the same order."""
    clinicians = clinician_ratings_frame(session, study, benchmarks=benchmarks)
    firsts = first_submissions_frame(session, study, benchmarks)
    fresh = {b: replace(parts[b], firsts=firsts[firsts["benchmark"] == b].reset_index(drop=True)) for b in benchmarks}
    mine = before["benchmark"].isin(list(benchmarks)).to_numpy() & (before["rater_kind"] != "clinician").to_numpy()
    others = before.iloc[np.flatnonzero(mine)]
    rated = without_items(clinicians, gold).astype({"item_id": str})
    block = pd.concat([rated, others], ignore_index=True)[LONG_COLUMNS]
    return fresh, trust_long(_sorted_long(block))


def _sorted_long(long: pd.DataFrame) -> pd.DataFrame:
    """``long`` in benchmark, item, rater kind, rater and criterion order (one row per such key), item ids as
    strings: its order is a function of its content, so that a reload of some benchmarks gives the frame a whole
    load gives, row for row (the figures' sums depend on the order to the last bit)."""
    long = long.astype({"item_id": int, "score": float})
    keys = [long["criterion"], long["rater_id"], long["rater_kind"], long["item_id"], long["benchmark"]]
    order = np.lexsort([pd.factorize(k.astype(str) if k.dtype == object else k, sort=True)[0] for k in keys])
    return long.take(order).reset_index(drop=True).astype({"item_id": str, "rater_id": str})


def _speed(parts: Mapping[str, BenchmarkPart], study: Study) -> pd.DataFrame:
    """Each clinician's speed flags over the first submissions of every benchmark's items."""
    firsts = [parts[b].firsts for b in sorted(parts)]
    if not firsts:  # a study without items
        return pd.DataFrame(columns=list(SPEED_SUMMARY_COLUMNS))
    return speed_of_first_submissions(pd.concat(firsts, ignore_index=True), study.speed_threshold_seconds)


def _verdict_counts(verdicts: pd.DataFrame | None) -> VerdictCounts:
    if verdicts is None or verdicts.empty:
        return VerdictCounts(0, 0, frozenset())
    return VerdictCounts(len(verdicts), int((verdicts["status"] != VerdictStatus.ok).sum()),
                         frozenset(verdicts["judge"].unique()))


def _judges(parts: Mapping[str, BenchmarkPart]) -> frozenset[str]:
    return frozenset().union(*(p.verdicts.judges for p in parts.values()))


def _chosen_variants(parts: Mapping[str, BenchmarkPart]) -> dict[str, str]:
    """Each metric's newest settings variant over every benchmark (the largest of their stamps)."""
    stamps: dict[str, tuple[Any, str]] = {}
    for part in parts.values():
        for metric, stamp in part.metric_stamps.items():
            if metric not in stamps or stamp > stamps[metric]:
                stamps[metric] = stamp
    return {m: digest for m, (_, digest) in sorted(stamps.items())}
