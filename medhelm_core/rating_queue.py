"""What a clinician sees and does: their studies' progress, their queue, one item, a submission.

Every function takes the :class:`~medhelm_core.auth.Principal` making the request and enforces the access
rules itself: a clinician reads only items assigned to them and only their own ratings; the model's name,
the jury's scores and other clinicians' scores are never part of what is returned to a rater.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.auth import Principal
from medhelm_core.errors import MedhelmError, NotFoundError
from medhelm_core.models import Assignment, Item, RatingSubmission, Study, User
from medhelm_core.ratings import record_rating
from medhelm_core.rubric import RubricSpec, rubric_spec


class AccessDenied(MedhelmError):
    """The signed-in account may not see or change this."""


@dataclass(frozen=True)
class StudyProgress:
    """'12 of 40 done' for one study of one clinician."""

    study_id: int
    name: str
    title: str
    done: int
    assigned: int


@dataclass(frozen=True)
class QueueEntry:
    """One place in a clinician's queue (no model name, no scores of others)."""

    item_id: int
    rated: bool


@dataclass(frozen=True)
class RaterItem:
    """An item as a rater sees it, with the rater's own current rating if any."""

    item_id: int
    benchmark: str
    input_text: str
    output_text: str
    reference_text: str | None
    text_available: bool
    scores: dict[str, int]
    comment: str
    flag: str | None
    revision: int


def progress(session: Session, who: Principal) -> list[StudyProgress]:
    """Done / assigned for every study in which ``who`` has assignments."""
    # An item is done once the clinician has submitted for it (a flagged submission counts too).
    submitted = (
        select(RatingSubmission.item_id).where(RatingSubmission.rater_id == who.user_id).distinct().subquery()
    )
    rows = session.exec(
        select(Study.id, Study.name, Study.title, func.count(Assignment.id), func.count(submitted.c.item_id))
        .join(Assignment, Assignment.study_id == Study.id)
        .outerjoin(submitted, submitted.c.item_id == Assignment.item_id)
        .where(Assignment.user_id == who.user_id)
        .group_by(Study.id, Study.name, Study.title)
        .order_by(Study.name)
    ).all()
    return [StudyProgress(sid, name, title, done, total) for sid, name, title, total, done in rows]


def queue(session: Session, who: Principal, study_id: int) -> list[QueueEntry]:
    """``who``'s items in ``study_id`` in their randomised order, each marked rated or not.

    An item counts as rated once the clinician has submitted for it (a flagged submission counts too).
    """
    submitted = select(RatingSubmission.item_id).where(RatingSubmission.rater_id == who.user_id).distinct().subquery()
    rows = session.exec(
        select(Assignment.item_id, submitted.c.item_id)
        .outerjoin(submitted, submitted.c.item_id == Assignment.item_id)
        .where(Assignment.user_id == who.user_id, Assignment.study_id == study_id)
        .order_by(Assignment.position, Assignment.item_id)
    ).all()
    return [QueueEntry(item_id, done is not None) for item_id, done in rows]


def first_open(entries: list[QueueEntry]) -> int:
    """Index of the first unrated item (where to resume), or the last item when all are done."""
    for index, entry in enumerate(entries):
        if not entry.rated:
            return index
    return max(len(entries) - 1, 0)


def _assigned(session: Session, who: Principal, study_id: int, item_id: int) -> Item:
    item = session.get(Item, item_id)
    if item is None or item.study_id != study_id:
        raise NotFoundError(f"no item {item_id} in this study")
    assigned = session.exec(
        select(Assignment.id).where(Assignment.item_id == item_id, Assignment.user_id == who.user_id)
    ).first()
    if assigned is None:
        raise AccessDenied("this item is not assigned to you")
    return item


def load_item(session: Session, who: Principal, study_id: int, item_id: int) -> RaterItem:
    """The item for rating by ``who``, who must have it assigned (whatever their role)."""
    item = _assigned(session, who, study_id, item_id)
    study = session.get(Study, study_id)
    latest = session.exec(
        select(RatingSubmission)
        .where(RatingSubmission.item_id == item_id, RatingSubmission.rater_id == who.user_id)
        .order_by(RatingSubmission.revision.desc())
        .limit(1)
    ).first()
    return RaterItem(
        item_id=item.id,
        benchmark=item.benchmark,
        input_text=item.input_text,
        output_text=item.output_text,
        reference_text=item.reference_text if study.show_reference else None,
        text_available=bool(item.meta.get("text_available", True)),
        scores=dict(latest.scores) if latest else {},
        comment=latest.comment if latest else "",
        flag=latest.flag if latest else None,
        revision=latest.revision if latest else 0,
    )


def study_rubric(session: Session, study_id: int) -> RubricSpec:
    """The rubric of a study."""
    study = session.get(Study, study_id)
    if study is None:
        raise NotFoundError(f"no study {study_id}")
    return rubric_spec(session, study.rubric_id)


def submit(
    session: Session,
    who: Principal,
    study_id: int,
    item_id: int,
    scores: Mapping[str, object],
    *,
    comment: str = "",
    flag: str | None = None,
    request_id: str | None = None,
    elapsed_seconds: float | None = None,
) -> bool:
    """Store ``who``'s rating of an assigned item (in the caller's transaction); True if it was written."""
    item = _assigned(session, who, study_id, item_id)
    user = session.get(User, who.user_id)
    _, written = record_rating(
        session,
        item=item,
        rater=user,
        rubric=study_rubric(session, study_id),
        scores=scores,
        comment=comment.strip(),
        flag=flag,
        request_id=request_id,
        elapsed_seconds=elapsed_seconds,
    )
    return written
