"""One item in full, for the dashboard's drill-down: its texts, each clinician's scores and comment, each
judge's score and explanation. Researchers only: the model's name is part of it.

Read live from the database (never cached), so a comment or a revision made a moment ago is there.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from sqlmodel import Session, col, select

from medhelm_core.db.models import Item, JudgeVerdict, RatingSubmission, Study, User
from medhelm_core.errors import NotFoundError


@dataclass(frozen=True)
class ItemDetail:
    """An item with everything said about it."""

    item_id: int
    benchmark: str
    instance_id: str
    model: str
    input_text: str
    output_text: str
    reference_text: str | None
    #: one row per clinician: rater, revision, submitted_at, score_<criterion> ..., comment, flag
    clinicians: pd.DataFrame
    #: one row per judge of the run: judge, status, score_<criterion> ..., explanation_<criterion> ..., error
    judges: pd.DataFrame


def item_detail(session: Session, study: Study, item_id: int, jury_run_id: int | None = None) -> ItemDetail:
    """The item ``item_id`` of ``study`` with its clinicians' latest submissions and the run's verdicts.

    Raises :class:`NotFoundError` when the item is not in the study (an id typed by hand, or a stale click).

    Examples
    --------
    >>> detail = item_detail(session, study, 42, jury_run_id=3)  # doctest: +SKIP
    >>> detail.judges[["judge", "status", "score_accuracy", "explanation_accuracy"]]  # doctest: +SKIP
    """
    item = session.get(Item, item_id)
    if item is None or item.study_id != study.id:
        raise NotFoundError(f"study {study.name!r} has no item {item_id}")
    submissions = session.exec(
        select(RatingSubmission, User.username)
        .join(User, User.id == RatingSubmission.rater_id)
        .where(RatingSubmission.item_id == item.id, RatingSubmission.retest == False)  # noqa: E712 - not repeats
        .order_by(User.username, col(RatingSubmission.revision).desc())
    ).all()
    latest: dict[str, dict] = {}
    for sub, name in submissions:
        if name in latest:
            continue
        latest[name] = {
            "clinician": name,
            "revision": sub.revision,
            "submitted_at": sub.submitted_at.isoformat(timespec="minutes"),
            **{f"score_{k}": v for k, v in sub.scores.items()},
            "comment": sub.comment,
            "flag": sub.flag or "",
        }
    judges: list[dict] = []
    if jury_run_id is not None:
        verdicts = session.exec(
            select(JudgeVerdict)
            .where(JudgeVerdict.jury_run_id == jury_run_id, JudgeVerdict.item_id == item.id)
            .order_by(JudgeVerdict.judge)
        ).all()
        for v in verdicts:
            judges.append(
                {
                    "judge": v.judge,
                    "status": v.status,
                    **{f"score_{k}": s for k, s in v.scores.items()},
                    **{f"explanation_{k}": e for k, e in v.explanations.items()},
                    "error": v.error or "",
                }
            )
    return ItemDetail(
        item_id=int(item.id),
        benchmark=item.benchmark,
        instance_id=item.instance_id,
        model=item.model,
        input_text=item.input_text,
        output_text=item.output_text,
        reference_text=item.reference_text,
        clinicians=pd.DataFrame(list(latest.values())),
        judges=pd.DataFrame(judges),
    )
