"""A run's results as tidy frames: each judge's score and explanation, and the jury mean per item.

The jury mean of an item is the unweighted mean over every surviving (``ok``) judge and criterion, on the
rubric's scale, with ``n_judges`` saying how many judges it rests on and ``n_failed`` how many failed. An
item with no surviving judge has no jury score (NaN), never a default. The per-criterion means are
:func:`medhelm_core.frames.jury_long_frame`'s, which the agreement engine reads.
"""

from __future__ import annotations

import pandas as pd
from sqlmodel import Session, select

from medhelm_core.db.models import Item, JudgeVerdict, JuryRun, Study, VerdictStatus
from medhelm_core.errors import NotFoundError
from medhelm_core.frames import jury_long_frame

VERDICT_COLUMNS = ["item_id", "benchmark", "instance_id", "model", "judge", "status", "criterion", "score",
                   "explanation", "error", "raw_response"]
ITEM_COLUMNS = ["item_id", "benchmark", "instance_id", "model", "jury_score", "n_judges", "n_failed"]


def _run(session: Session, run_id: int) -> JuryRun:
    run = session.get(JuryRun, run_id)
    if run is None:
        raise NotFoundError(f"no jury run with id {run_id}")
    return run


def verdict_scores_frame(session: Session, run_id: int) -> pd.DataFrame:
    """One row per verdict and criterion (a failed verdict: one row, no criterion, with its error and raw text).

    Examples
    --------
    >>> frame = verdict_scores_frame(session, run.id)  # doctest: +SKIP
    >>> frame.query("status == 'ok'").groupby("judge").score.mean()  # doctest: +SKIP
    """
    _run(session, run_id)
    rows = session.exec(
        select(JudgeVerdict, Item.benchmark, Item.instance_id, Item.model)
        .join(Item, Item.id == JudgeVerdict.item_id)
        .where(JudgeVerdict.jury_run_id == run_id)
        .order_by(JudgeVerdict.item_id, JudgeVerdict.judge)
    ).all()
    flat: list[dict] = []
    for v, benchmark, instance_id, model in rows:
        base = {"item_id": v.item_id, "benchmark": benchmark, "instance_id": instance_id, "model": model,
                "judge": v.judge, "status": v.status, "error": v.error, "raw_response": v.raw_response}
        if v.status == VerdictStatus.ok.value and v.scores:
            for criterion, score in v.scores.items():
                flat.append({**base, "criterion": criterion, "score": float(score),
                             "explanation": v.explanations.get(criterion, "")})
        else:
            flat.append({**base, "criterion": None, "score": float("nan"), "explanation": ""})
    return pd.DataFrame(flat, columns=VERDICT_COLUMNS)


def item_jury_scores(session: Session, run_id: int) -> pd.DataFrame:
    """Per item of the study: the jury score over surviving judges and criteria, and how many judges.

    Every item of the study is listed; one without a surviving judge has ``jury_score`` NaN.
    """
    run = _run(session, run_id)
    items = session.exec(select(Item).where(Item.study_id == run.study_id).order_by(Item.id)).all()
    verdicts = session.exec(select(JudgeVerdict).where(JudgeVerdict.jury_run_id == run_id)).all()
    by_item: dict[int, list[JudgeVerdict]] = {}
    for v in verdicts:
        by_item.setdefault(v.item_id, []).append(v)
    rows = []
    for item in items:
        mine = by_item.get(item.id, [])
        ok = [v for v in mine if v.status == VerdictStatus.ok.value and v.scores]
        scores = [float(s) for v in ok for s in v.scores.values()]
        rows.append({
            "item_id": item.id, "benchmark": item.benchmark, "instance_id": item.instance_id, "model": item.model,
            "jury_score": sum(scores) / len(scores) if scores else float("nan"),
            "n_judges": len({v.judge for v in ok}),
            "n_failed": sum(1 for v in mine if v.status != VerdictStatus.ok.value),
        })
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)


def criterion_means(session: Session, run_id: int) -> pd.DataFrame:
    """The jury mean per item and criterion over surviving judges, with ``n_judges`` (long format)."""
    run = _run(session, run_id)
    study = session.get(Study, run.study_id)
    return jury_long_frame(session, study, run_id)
