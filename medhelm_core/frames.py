"""A study's contents as tidy pandas frames: what the agreement engine, exports and dashboards read.

The long score table has one row per (item, rater, criterion) with columns ``item_id``, ``rater_id``,
``rater_kind`` (clinician, jury, judge, metric), ``criterion``, ``score``, ``benchmark`` and ``model``.
The jury of a run is the mean over its surviving judges per item and criterion, with ``n_judges`` saying
how many judges it rests on; an item with no surviving judge has no jury score.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pandas as pd
from sqlalchemy import Select
from sqlmodel import Session, select

from medhelm_core.db.models import Item, JudgeVerdict, JuryRun, MetricScore, Rating, RatingSubmission, Study, User
from medhelm_core.rating.gold import gold_item_ids

LONG_COLUMNS = ["item_id", "rater_id", "rater_kind", "criterion", "score", "benchmark", "model"]


def items_frame(session: Session, study: Study) -> pd.DataFrame:
    """One row per item with its texts and identity (the model name included: researchers only)."""
    rows = session.exec(select(Item).where(Item.study_id == study.id).order_by(Item.id)).all()
    return pd.DataFrame(
        [
            {
                "item_id": i.id,
                "benchmark": i.benchmark,
                "instance_id": i.instance_id,
                "model": i.model,
                "input": i.input_text,
                "output": i.output_text,
                "reference": i.reference_text,
            }
            for i in rows
        ],
        columns=["item_id", "benchmark", "instance_id", "model", "input", "output", "reference"],
    )


def select_frame(session: Session, statement: Select, columns: Sequence[str]) -> pd.DataFrame:
    """The rows of a select of plain columns as a frame, read through SQLAlchemy Core and built column by column.

    The ORM's rows and ``pd.DataFrame(rows)`` cost seconds on the 120,000 ratings of a 20,000-item study;
    Core rows turned into one list per column cost a fraction of that and give the same frame.

    Examples
    --------
    >>> select_frame(session, select(Item.id, Item.benchmark), ["item_id", "benchmark"])  # doctest: +SKIP
    """
    rows = session.connection().execute(statement).all()
    if not rows:
        return pd.DataFrame(rows, columns=list(columns))
    return pd.DataFrame(dict(zip(columns, map(list, zip(*rows, strict=True)), strict=True)))


def clinician_ratings_frame(session: Session, study: Study) -> pd.DataFrame:
    """Current clinician scores, one row per item, rater and criterion."""
    frame = select_frame(
        session,
        select(Rating.item_id, User.username, Rating.criterion, Rating.score, Item.benchmark, Item.model)
        .join(Item, Item.id == Rating.item_id)
        .join(User, User.id == Rating.rater_id)
        .where(Item.study_id == study.id),
        ["item_id", "rater_id", "criterion", "score", "benchmark", "model"],
    )
    frame.insert(2, "rater_kind", "clinician")
    return frame[LONG_COLUMNS].astype({"score": float})


def rating_history_frame(session: Session, study: Study) -> pd.DataFrame:
    """Every submission ever made (revisions and test-retest repeats included), one row per submission."""
    rows = session.exec(
        select(RatingSubmission, User.username)
        .join(Item, Item.id == RatingSubmission.item_id)
        .join(User, User.id == RatingSubmission.rater_id)
        .where(Item.study_id == study.id)
        .order_by(RatingSubmission.id)
    ).all()
    return pd.DataFrame(
        [
            {
                "item_id": s.item_id,
                "rater_id": name,
                "revision": s.revision,
                "retest": s.retest,
                **{f"score_{k}": v for k, v in s.scores.items()},
                "comment": s.comment,
                "flag": s.flag,
                "elapsed_seconds": s.elapsed_seconds,
                "submitted_at": s.submitted_at.isoformat(),
            }
            for s, name in rows
        ]
    )


def verdicts_frame(session: Session, study: Study) -> pd.DataFrame:
    """Every judge verdict (failed ones included, with their raw text), one row per verdict."""
    rows = session.exec(
        select(JudgeVerdict, JuryRun.name, JuryRun.source)
        .join(JuryRun, JuryRun.id == JudgeVerdict.jury_run_id)
        .where(JuryRun.study_id == study.id)
        .order_by(JudgeVerdict.id)
    ).all()
    return pd.DataFrame(
        [
            {
                "jury_run_id": v.jury_run_id,
                "jury_run": run_name,
                "source": source,
                "item_id": v.item_id,
                "judge": v.judge,
                "status": v.status,
                **{f"score_{k}": s for k, s in v.scores.items()},
                "error": v.error,
                "raw_response": v.raw_response,
            }
            for v, run_name, source in rows
        ]
    )


def default_jury_run(session: Session, study: Study) -> JuryRun | None:
    """The jury run agreement uses by default: the newest with any surviving verdict (a run that failed or
    has not started would otherwise hide the last usable jury)."""
    with_verdicts = select(JudgeVerdict.jury_run_id).where(JudgeVerdict.status == "ok")
    return session.exec(
        select(JuryRun)
        .where(JuryRun.study_id == study.id, JuryRun.id.in_(with_verdicts))
        .order_by(JuryRun.id.desc())
    ).first()


def jury_long_frame(session: Session, study: Study, jury_run_id: int | None = None) -> pd.DataFrame:
    """Jury means per item and criterion (``rater_kind='jury'``), over surviving judges only.

    Uses the given run, else the study's newest run with any surviving verdict. Adds ``n_judges``: how
    many judges the mean rests on.
    """
    run = session.get(JuryRun, jury_run_id) if jury_run_id else default_jury_run(session, study)
    if run is None:
        return pd.DataFrame(columns=[*LONG_COLUMNS, "n_judges"])
    rows = session.exec(
        select(JudgeVerdict, Item.benchmark, Item.model)
        .join(Item, Item.id == JudgeVerdict.item_id)
        .where(JudgeVerdict.jury_run_id == run.id, JudgeVerdict.status == "ok")
    ).all()
    flat = [
        {"item_id": v.item_id, "judge": v.judge, "criterion": c, "score": float(s), "benchmark": b, "model": m}
        for v, b, m in rows
        for c, s in v.scores.items()
    ]
    if not flat:
        return pd.DataFrame(columns=[*LONG_COLUMNS, "n_judges"])
    frame = (
        pd.DataFrame(flat)
        .groupby(["item_id", "criterion", "benchmark", "model"], as_index=False)
        .agg(score=("score", "mean"), n_judges=("judge", "nunique"))
    )
    frame["rater_id"] = "jury"
    frame["rater_kind"] = "jury"
    return frame[[*LONG_COLUMNS, "n_judges"]]


#: the metric scores that stand beside clinicians as raters (F-measures; P and R stay in the exports)
AGREEMENT_METRICS = ("rougeL_f", "rougeLsum_f", "bertscore_f1")


def metrics_long_frame(
    session: Session, study: Study, metrics: tuple[str, ...] = AGREEMENT_METRICS
) -> pd.DataFrame:
    """Metric scores as raters (``rater_kind='metric'``, ``rater_id`` the metric name, one score per item).

    A study can hold the same metric computed with several settings (stemmer on and off, another BERT
    model); for agreement each metric must have one score per item, so the settings computed most
    recently are used.
    """
    rows = session.exec(
        select(MetricScore.item_id, MetricScore.metric, MetricScore.value, MetricScore.settings_hash,
               MetricScore.computed_at, Item.benchmark, Item.model)
        .join(Item, Item.id == MetricScore.item_id)
        .where(Item.study_id == study.id, MetricScore.metric.in_(list(metrics)))
    ).all()
    frame = pd.DataFrame(
        rows, columns=["item_id", "rater_id", "score", "settings_hash", "computed_at", "benchmark", "model"]
    )
    if frame.empty:
        return pd.DataFrame(columns=LONG_COLUMNS)
    latest = frame.groupby(["rater_id", "settings_hash"])["computed_at"].max().reset_index()
    latest = latest.sort_values("computed_at").groupby("rater_id").tail(1)
    frame = frame.merge(latest[["rater_id", "settings_hash"]], on=["rater_id", "settings_hash"])
    frame["rater_kind"] = "metric"
    frame["criterion"] = "composite"
    return frame[LONG_COLUMNS]


def without_items(frame: pd.DataFrame, item_ids: Collection[int]) -> pd.DataFrame:
    """``frame`` without the rows of ``item_ids`` (its ``item_id`` column may hold ints or their strings).

    Agreement figures leave the study's gold items out with it (:func:`~medhelm_core.rating.gold.gold_item_ids`): they
    measure the clinicians, every clinician rates them and they are chosen for being clear-cut.
    """
    if not item_ids or frame.empty:
        return frame
    ids = frame["item_id"]
    keys = {str(i) for i in item_ids}
    return frame[~(ids if pd.api.types.is_string_dtype(ids) else ids.astype(str)).isin(keys)].reset_index(drop=True)


def scores_long_frame(session: Session, study: Study, jury_run_id: int | None = None) -> pd.DataFrame:
    """Clinicians, the jury and the metrics in one long table for the agreement engine (gold items left out:
    they measure the clinicians, see :mod:`medhelm_core.rating.gold`)."""
    parts = [
        clinician_ratings_frame(session, study),
        jury_long_frame(session, study, jury_run_id)[LONG_COLUMNS],
        metrics_long_frame(session, study),
    ]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=LONG_COLUMNS)
    frame = pd.concat(parts, ignore_index=True)
    frame["item_id"] = frame["item_id"].astype(str)
    return without_items(frame, gold_item_ids(session, study))
