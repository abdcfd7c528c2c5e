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

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from sqlmodel import Session

from medhelm_core.db.models import JuryRun, Study, VerdictStatus
from medhelm_core.frames import (
    AGREEMENT_METRICS,
    LONG_COLUMNS,
    clinician_ratings_frame,
    item_identity_frame,
    judge_scores_frame,
    jury_long,
    metric_raters,
    study_jury_run,
    without_items,
)
from medhelm_core.rating.gold import gold_item_ids
from medhelm_core.rating.quality import first_rating_speed
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


def _run_info(run: JuryRun, verdicts: pd.DataFrame) -> JuryRunInfo:
    config = dict(run.config or {})
    prompt_hash = config.get("prompt_template_hash")
    return JuryRunInfo(
        id=int(run.id),
        name=run.name,
        source=run.source,
        status=run.status,
        judges=tuple(sorted(verdicts["judge"].unique())) if not verdicts.empty else (),
        n_verdicts=len(verdicts),
        n_failed=int((verdicts["status"] != VerdictStatus.ok).sum()) if not verdicts.empty else 0,
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
        ``long`` in the agreement contract (item ids as strings; gold items left out), ``items`` with the
        identity of every item (no texts), the jury run's description, the metric settings used, the
        number of gold items left out and each clinician's speed flags.

    Examples
    --------
    >>> data = load_dashboard_data(session, study)  # doctest: +SKIP
    >>> data.long.groupby("rater_kind").size()  # doctest: +SKIP
    """
    rubric = rubric_spec(session, study.rubric_id)
    identity = item_identity_frame(session, study)
    items = identity.assign(item_id=identity["item_id"].astype(str))
    clinicians = clinician_ratings_frame(session, study)
    clinicians["item_id"] = clinicians["item_id"].astype(str)
    parts = [clinicians]
    info = None
    run = study_jury_run(session, study, jury_run_id, or_newest=True)
    if run is not None:
        judged = judge_scores_frame(session, run.id)
        judged["item_id"] = judged["item_id"].astype(str)
        info = _run_info(run, judged)
        parts.append(jury_long(judged, items, judges=True)[LONG_COLUMNS])
    metric_long, settings = metric_raters(session, study, items=identity)
    parts.append(metric_long)
    parts = [p for p in parts if not p.empty]
    long = pd.concat(parts, ignore_index=True)[LONG_COLUMNS] if parts else pd.DataFrame(columns=LONG_COLUMNS)
    long = long.astype({"item_id": str, "rater_id": str, "score": float})
    gold = gold_item_ids(session, study)
    long = without_items(long, gold)
    return DashboardData(
        study_id=int(study.id),
        study_name=study.name,
        rubric=rubric,
        long=long,
        items=items,
        jury_run=info,
        metric_settings=settings,
        gold_items=len(gold),
        speed=first_rating_speed(session, study),
    )
