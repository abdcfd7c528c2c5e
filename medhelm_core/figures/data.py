"""What the Agreement dashboard and the calibration report read from the database, loaded once per data version.

A study of 20,000 items has about 120,000 clinician scores, 60,000 judge verdicts and 40,000 metric scores.
The loaders here select only ids and scores (never prompts, raw answers or item texts, which the dashboard
does not chart), so a load stays a fraction of a second; the page then caches the result under
:func:`data_version`, a handful of counts and maxima that change whenever a rating, verdict, metric score,
jury run or item does, so a cached dashboard is never stale.

The long table follows :mod:`medhelm_core.agreement`'s contract and
:func:`medhelm_core.frames.scores_long_frame`'s conventions: clinicians as raters, the jury mean per item
and criterion over surviving (``ok``) judges, and the metrics. Two things differ, for the dashboard's sake:
each judge of a run with several judges is added as a rater of kind ``judge`` (for "which judge to trust"),
and only the headline metrics (ROUGE-L F and BERTScore F1) are kept, one settings variant each (the most
recently computed), since two variants of one metric would be two scores per item.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from sqlalchemy import Text, func, type_coerce
from sqlmodel import Session, col, select

from medhelm_core.db.models import (
    GoldRange,
    Item,
    JudgeVerdict,
    JuryRun,
    MetricScore,
    Rating,
    RatingSubmission,
    Study,
)
from medhelm_core.errors import NotFoundError
from medhelm_core.frames import (
    AGREEMENT_METRICS,
    LONG_COLUMNS,
    clinician_ratings_frame,
    select_frame,
    without_items,
)
from medhelm_core.frames import default_jury_run as study_default_jury_run
from medhelm_core.rating.gold import gold_item_ids
from medhelm_core.rating.quality import first_rating_speed
from medhelm_core.rating.quality_flags import SPEED_SUMMARY_COLUMNS
from medhelm_core.rubric import RubricSpec, rubric_spec

#: stored metric name -> the name the paper (and the headline table) uses
HEADLINE_METRICS: dict[str, str] = {"rougeL_f": "ROUGE-L", "bertscore_f1": "BERTScore"}
#: every metric set beside the clinicians (study_data's AGREEMENT_METRICS), with the name shown for it
METRIC_LABELS: dict[str, str] = {
    **{m: m for m in AGREEMENT_METRICS},
    "rougeL_f": "ROUGE-L",
    "rougeLsum_f": "ROUGE-Lsum",
    "bertscore_f1": "BERTScore",
}
ITEM_COLUMNS = ["item_id", "benchmark", "instance_id", "model"]


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


def data_version(session: Session, study: Study) -> tuple[Any, ...]:
    """A cheap fingerprint of a study's data: it changes whenever the dashboard's figures could.

    Counts and maxima of ids and times of the items, current ratings, rating submissions, jury runs,
    verdicts and metric scores, in six aggregate queries. A revision changes ``Rating.updated_at``; a
    flagged revision that drops a score lowers the count; a retried verdict or a re-run metric adds rows.

    Examples
    --------
    >>> before = data_version(session, study)  # doctest: +SKIP
    >>> record_rating(session, item=item, rater=dr_lee, rubric=rubric, scores=scores)  # doctest: +SKIP
    >>> data_version(session, study) != before  # doctest: +SKIP
    True
    """
    in_study = select(Item.id).where(Item.study_id == study.id)
    queries = [
        select(func.count(Item.id), func.max(Item.id)).where(Item.study_id == study.id),
        select(func.count(Rating.id), func.max(Rating.id), func.max(Rating.updated_at), func.sum(Rating.score)).where(
            col(Rating.item_id).in_(in_study)
        ),
        select(func.count(RatingSubmission.id), func.max(RatingSubmission.id)).where(
            col(RatingSubmission.item_id).in_(in_study)
        ),
        select(func.count(JuryRun.id), func.max(JuryRun.id)).where(JuryRun.study_id == study.id),
        select(func.count(JudgeVerdict.id), func.max(JudgeVerdict.id), func.max(JudgeVerdict.created_at))
        .join(JuryRun, JuryRun.id == JudgeVerdict.jury_run_id)
        .where(JuryRun.study_id == study.id),
        select(func.count(JudgeVerdict.id))
        .join(JuryRun, JuryRun.id == JudgeVerdict.jury_run_id)
        .where(JuryRun.study_id == study.id, JudgeVerdict.status == "ok"),
        select(func.count(MetricScore.id), func.max(MetricScore.id), func.max(MetricScore.computed_at)).where(
            col(MetricScore.item_id).in_(in_study)
        ),
        # Gold ranges decide which items the figures leave out.
        select(func.count(GoldRange.id), func.max(GoldRange.id), func.sum(GoldRange.low + GoldRange.high)).where(
            col(GoldRange.item_id).in_(in_study)
        ),
    ]
    version: list[Any] = [study.id, float(study.speed_threshold_seconds)]
    for query in queries:
        row = session.exec(query).one()
        values = row if isinstance(row, tuple) or hasattr(row, "_fields") else (row,)
        version.extend(v.isoformat() if hasattr(v, "isoformat") else v for v in values)
    return tuple(version)


def jury_runs(session: Session, study: Study) -> list[JuryRun]:
    """The study's jury runs, the latest first."""
    return list(session.exec(select(JuryRun).where(JuryRun.study_id == study.id).order_by(col(JuryRun.id).desc())))


def default_jury_run(session: Session, runs: list[JuryRun]) -> JuryRun | None:
    """The run the dashboard shows unless told otherwise, as :mod:`medhelm_core.frames` picks it: the newest
    with a surviving verdict (a failed or unstarted run would hide the last usable jury), else the newest."""
    if not runs:
        return None
    chosen = study_default_jury_run(session, session.get(Study, runs[0].study_id))
    return next((r for r in runs if chosen is not None and r.id == chosen.id), runs[0])


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
        n_failed=int((verdicts["status"] != "ok").sum()) if not verdicts.empty else 0,
        config_hash=run.config_hash,
        prompt_hash=str(prompt_hash) if prompt_hash else None,
        config=config,
    )


def judge_scores_frame(session: Session, run_id: int) -> pd.DataFrame:
    """Each verdict of a run as ids and scores only: ``item_id``, ``judge``, ``status``, ``criterion``, ``score``.

    A failed verdict gives one row with no criterion and a NaN score, so it can be counted but never averaged.
    """
    rows = session.connection().execute(
        select(JudgeVerdict.item_id, JudgeVerdict.judge, JudgeVerdict.status, type_coerce(JudgeVerdict.scores, Text))
        .where(JudgeVerdict.jury_run_id == run_id)
    ).all()
    columns = ["item_id", "judge", "status", "criterion", "score"]
    if not rows:
        return pd.DataFrame([], columns=columns)
    flat: dict[str, list[Any]] = {c: [] for c in columns}
    for (item_id, judge, status, _), scores in zip(rows, _json_values([r[3] for r in rows]), strict=True):
        pairs = scores.items() if status == "ok" and scores else [(None, float("nan"))]
        for criterion, score in pairs:
            flat["item_id"].append(item_id)
            flat["judge"].append(judge)
            flat["status"].append(status)
            flat["criterion"].append(criterion)
            flat["score"].append(float(score))
    frame = pd.DataFrame(flat)
    frame["item_id"] = frame["item_id"].astype(str)
    return frame


def _json_values(values: list[Any]) -> list[Any]:
    """JSON columns read as text, decoded in one call (60,000 separate decodes are a third of a second); a
    driver that decodes JSON itself (psycopg) hands over objects, kept as they are."""
    texts = [v for v in values if isinstance(v, str)]
    decoded = iter(json.loads("[" + ",".join(texts) + "]"))
    return [next(decoded) if isinstance(v, str) else v for v in values]


def _jury_and_judges(judged: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """The jury mean per item and criterion over surviving judges, and each judge (when there are several)."""
    ok = judged[judged["status"] == "ok"].dropna(subset=["criterion"])
    if ok.empty:
        return pd.DataFrame(columns=LONG_COLUMNS)
    ok = ok.merge(items[["item_id", "benchmark", "model"]], on="item_id", how="inner")
    # An item has one benchmark and one model, so grouping on (item, criterion) forms the same groups, in the
    # same order, as grouping on all four; two string keys fewer to sort.
    jury = ok.groupby(["item_id", "criterion"], as_index=False)["score"].mean()
    identity = items.set_index("item_id")
    jury = jury.assign(
        benchmark=jury["item_id"].map(identity["benchmark"]),
        model=jury["item_id"].map(identity["model"]),
        rater_id="jury",
        rater_kind="jury",
    )[LONG_COLUMNS]
    if ok["judge"].nunique() < 2:
        return jury
    judges = ok.rename(columns={"judge": "rater_id"}).assign(rater_kind="judge")[LONG_COLUMNS]
    return pd.concat([jury, judges], ignore_index=True)


def _agreement_metrics(session: Session, study: Study) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """The F-measures set beside clinicians, one settings variant each: the one computed most recently (the
    rule of :func:`medhelm_core.frames.metrics_long_frame`), with the settings used."""
    scores = select_frame(
        session,
        select(
            MetricScore.item_id,
            MetricScore.metric,
            MetricScore.value,
            MetricScore.settings_hash,
            MetricScore.computed_at,
        )
        .join(Item, Item.id == MetricScore.item_id)
        .where(Item.study_id == study.id, col(MetricScore.metric).in_(list(AGREEMENT_METRICS))),
        ["item_id", "metric", "value", "settings_hash", "computed_at"],
    )
    if scores.empty:
        return pd.DataFrame(columns=["item_id", "rater_id", "score"]), {}
    latest = scores.sort_values("computed_at").groupby("metric")["settings_hash"].last()
    chosen: dict[str, dict[str, Any]] = {}
    for metric, digest in latest.items():
        settings = session.exec(
            select(MetricScore.settings)
            .where(MetricScore.metric == metric, MetricScore.settings_hash == digest)
            .limit(1)  # without it, every row's settings are fetched and decoded to keep the first
        ).first()
        chosen[str(metric)] = {"settings_hash": digest, "settings": dict(settings or {})}
    keep = scores["settings_hash"] == scores["metric"].map(latest)
    picked = scores[keep].rename(columns={"metric": "rater_id", "value": "score"})
    picked = picked.assign(item_id=picked["item_id"].astype(str))
    return picked[["item_id", "rater_id", "score"]], chosen


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
    items = select_frame(
        session,
        select(Item.id, Item.benchmark, Item.instance_id, Item.model).where(Item.study_id == study.id),
        ITEM_COLUMNS,
    )
    items["item_id"] = items["item_id"].astype(str)
    clinicians = clinician_ratings_frame(session, study)
    clinicians["item_id"] = clinicians["item_id"].astype(str)
    parts = [clinicians]
    info = None
    runs = jury_runs(session, study)
    run = default_jury_run(session, runs)
    if jury_run_id is not None:
        run = next((r for r in runs if r.id == jury_run_id), None)
        if run is None:
            known = ", ".join(str(r.id) for r in runs) or "none"
            raise NotFoundError(f"study {study.name!r} has no jury run {jury_run_id} (its runs: {known})")
    if run is not None:
        judged = judge_scores_frame(session, run.id)
        info = _run_info(run, judged)
        parts.append(_jury_and_judges(judged, items))
    metric_scores, settings = _agreement_metrics(session, study)
    if not metric_scores.empty:
        metric_long = metric_scores.merge(items[["item_id", "benchmark", "model"]], on="item_id")
        parts.append(metric_long.assign(rater_kind="metric", criterion="composite")[LONG_COLUMNS])
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
