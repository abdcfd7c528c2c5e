"""What a clinician sees and does: their studies' progress, their queue, one item, a submission.

Every function takes the :class:`~medhelm_core.accounts.auth.Principal` making the request and enforces the access
rules itself: a clinician reads only items assigned to them and only their own ratings; the model's name,
the jury's scores and other clinicians' scores are never part of what is returned to a rater.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import and_, func
from sqlmodel import Session, col, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.models import Assignment, Item, RatingSubmission, Study, User
from medhelm_core.errors import AccessDenied
from medhelm_core.rating.ratings import latest_submission, record_rating
from medhelm_core.rating.retest import schedule_retest
from medhelm_core.rubric import RubricSpec, rubric_spec
from medhelm_core.studies import study_item


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
    """One place in a clinician's queue (no model name, no scores of others).

    ``retest`` marks an item shown again for test-retest; the page must not announce it (it looks like any
    other item), but passes it back so the repeat's rating is stored apart.
    """

    item_id: int
    rated: bool
    retest: bool = False


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


def _submitted(who: Principal):  # noqa: ANN202 - a SQLAlchemy subquery
    """(item id, retest) pairs ``who`` has submitted for: an item counts as done once submitted (a flagged
    submission counts too), and a repeat is done only once the repeat itself is submitted."""
    return (
        select(RatingSubmission.item_id, RatingSubmission.retest)
        .where(RatingSubmission.rater_id == who.user_id)
        .distinct()
        .subquery()
    )


def _same(submitted) -> object:  # noqa: ANN001 - the subquery of _submitted
    return and_(submitted.c.item_id == Assignment.item_id, submitted.c.retest == Assignment.retest)


def progress(session: Session, who: Principal) -> list[StudyProgress]:
    """Done / assigned for every study in which ``who`` has assignments (repeats included, unannounced)."""
    submitted = _submitted(who)
    rows = session.exec(
        select(Study.id, Study.name, Study.title, func.count(Assignment.id), func.count(submitted.c.item_id))
        .join(Assignment, Assignment.study_id == Study.id)
        .outerjoin(submitted, _same(submitted))
        .where(Assignment.user_id == who.user_id)
        .group_by(Study.id, Study.name, Study.title)
        .order_by(Study.name)
    ).all()
    return [StudyProgress(sid, name, title, done, total) for sid, name, title, total, done in rows]


def queue(session: Session, who: Principal, study: Study) -> list[QueueEntry]:
    """``who``'s items in ``study`` in their randomised order, each marked rated or not.

    Ties of position are ordered by assignment id, which puts a repeat after the item it was placed
    behind (see :mod:`medhelm_core.rating.retest`).
    """
    submitted = _submitted(who)
    rows = session.exec(
        select(Assignment.item_id, Assignment.retest, submitted.c.item_id)
        .outerjoin(submitted, _same(submitted))
        .where(Assignment.user_id == who.user_id, Assignment.study_id == study.id)
        .order_by(col(Assignment.position), col(Assignment.id))
    ).all()
    return [QueueEntry(item_id, done is not None, bool(retest)) for item_id, retest, done in rows]


def first_open(entries: list[QueueEntry]) -> int:
    """Index of the first unrated item (where to resume), or the last item when all are done."""
    for index, entry in enumerate(entries):
        if not entry.rated:
            return index
    return max(len(entries) - 1, 0)


def next_open(entries: list[QueueEntry], index: int) -> int:
    """Where to go after a submission at ``index``: the next unrated item after it that is not the same item.

    The same item never comes next (a test-retest repeat is never shown straight after its first rating,
    even when the items between them were rated meanwhile); with nothing unrated after it, the first
    unrated item elsewhere in the queue. When only the same item's repeat is left, it stays where it is:
    the clinician reaches the repeat through other items with Next.

    Examples
    --------
    >>> q = [QueueEntry(1, True), QueueEntry(2, True), QueueEntry(1, False, retest=True), QueueEntry(3, False)]
    >>> next_open(q, 0), next_open(q[:3], 0), next_open(q, 1)
    (3, 0, 2)
    """
    current = entries[index].item_id if 0 <= index < len(entries) else None
    after = [i for i in range(index + 1, len(entries)) if not entries[i].rated and entries[i].item_id != current]
    if after:
        return after[0]
    anywhere = [i for i, e in enumerate(entries) if not e.rated and e.item_id != current]
    if anywhere:
        return anywhere[0]
    return index if any(not e.rated for e in entries) else first_open(entries)


def _assigned(session: Session, who: Principal, study: Study, item_id: int, retest: bool = False) -> Item:
    item = study_item(session, study, item_id)
    assigned = session.exec(
        select(Assignment.id).where(
            Assignment.item_id == item_id, Assignment.user_id == who.user_id, Assignment.retest == retest
        )
    ).first()
    if assigned is None:
        raise AccessDenied("this item is not assigned to you")
    return item


def item_as_shown(study: Study, item: Item) -> dict[str, object]:
    """The fields of ``item`` that a clinician or an adjudicator is shown, as keywords of the view they fill.

    The blinding rule in one place: never the model's name (a rater who knows the model rates the model),
    and the reference text only when the study shows it.
    """
    return {
        "item_id": item.id,
        "benchmark": item.benchmark,
        "input_text": item.input_text,
        "output_text": item.output_text,
        "reference_text": item.reference_text if study.show_reference else None,
    }


def load_item(session: Session, who: Principal, study: Study, item_id: int, *, retest: bool = False) -> RaterItem:
    """The item for rating by ``who``, who must have it assigned (whatever their role).

    For a repeat (``retest``) the form starts blank: the clinician's first rating of the item is not shown,
    or the repeat would measure their memory instead of their judgement.
    """
    item = _assigned(session, who, study, item_id, retest)
    latest = latest_submission(session, item_id, who.user_id, retest=retest)
    return RaterItem(
        **item_as_shown(study, item),
        text_available=bool(item.meta.get("text_available", True)),
        scores=dict(latest.scores) if latest else {},
        comment=latest.comment if latest else "",
        flag=latest.flag if latest else None,
        revision=latest.revision if latest else 0,
    )


def study_rubric(session: Session, study: Study) -> RubricSpec:
    """The rubric of a study."""
    return rubric_spec(session, study.rubric_id)


def submit(
    session: Session,
    who: Principal,
    study: Study,
    item_id: int,
    scores: Mapping[str, object],
    *,
    comment: str = "",
    flag: str | None = None,
    request_id: str | None = None,
    elapsed_seconds: float | None = None,
    retest: bool = False,
) -> bool:
    """Store ``who``'s rating of an assigned item (in the caller's transaction); True if it was written.

    A first rating (revision 1, not flagged) may put the item back later in the clinician's queue when
    the study runs test-retest (:func:`medhelm_core.rating.retest.schedule_retest`), in the same transaction.
    """
    item = _assigned(session, who, study, item_id, retest)
    user = session.get(User, who.user_id)
    submission, written = record_rating(
        session,
        item=item,
        rater=user,
        rubric=study_rubric(session, study),
        scores=scores,
        comment=comment.strip(),
        flag=flag,
        request_id=request_id,
        elapsed_seconds=elapsed_seconds,
        retest=retest,
    )
    if written and not retest and submission.revision == 1 and submission.flag is None:
        schedule_retest(session, study, who.user_id, item_id)
    return written
