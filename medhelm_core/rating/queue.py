"""What a clinician sees and does: their studies' progress, their queue, one item, a submission, a skip.

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
from medhelm_core.db.audit import record_event
from medhelm_core.db.engine import hold_write_lock
from medhelm_core.db.models import (
    Assignment,
    AuditAction,
    Item,
    RatingSkip,
    RatingSubmission,
    SkipReason,
    Study,
    User,
)
from medhelm_core.errors import AccessDenied, ValidationError
from medhelm_core.rating.ratings import latest_submission, record_rating
from medhelm_core.rating.retest import schedule_retest
from medhelm_core.rubric import RubricSpec, rubric_spec
from medhelm_core.studies import study_item

#: what a clinician reads for each :class:`~medhelm_core.db.models.SkipReason`, in the order offered
SKIP_REASONS: dict[str, str] = {
    SkipReason.outside_expertise: "Outside my expertise",
    SkipReason.needs_context: "Needs more context than the item gives",
    SkipReason.text_unusable: "The text is missing, cut off or garbled",
    SkipReason.conflict_of_interest: "Conflict of interest",
    SkipReason.other: "Other (say why in the note)",
}
#: the longest note a skip keeps
MAX_SKIP_NOTE = 2000


@dataclass(frozen=True)
class StudyProgress:
    """'12 of 40 done' for one study of one clinician; ``skipped`` items are handled but not rated."""

    study_id: int
    name: str
    title: str
    done: int
    assigned: int
    skipped: int = 0

    @property
    def handled(self) -> int:
        """Rated or skipped: what is no longer waiting in the queue."""
        return self.done + self.skipped


@dataclass(frozen=True)
class QueueEntry:
    """One place in a clinician's queue (no model name, no scores of others).

    ``retest`` marks an item shown again for test-retest; the page must not announce it (it looks like any
    other item), but passes it back so the repeat's rating is stored apart.
    """

    item_id: int
    rated: bool
    retest: bool = False
    skipped: bool = False

    @property
    def open(self) -> bool:
        """Still waiting for the clinician: neither rated nor skipped."""
        return not (self.rated or self.skipped)


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
    #: the reason of the clinician's skip of this item (a :class:`~medhelm_core.db.models.SkipReason`), if skipped
    skip_reason: str | None = None
    skip_note: str = ""


def _submitted(who: Principal):  # noqa: ANN202 - a SQLAlchemy subquery
    """(item id, retest) pairs ``who`` has submitted for: an item counts as done once submitted (a flagged
    submission counts too), and a repeat is done only once the repeat itself is submitted."""
    return (
        select(RatingSubmission.item_id, RatingSubmission.retest)
        .where(RatingSubmission.rater_id == who.user_id)
        .distinct()
        .subquery()
    )


def _skipped(who: Principal):  # noqa: ANN202 - a SQLAlchemy subquery
    """(item id, retest) pairs ``who`` has skipped (one skip at most per pair, removed by a rating)."""
    return select(RatingSkip.item_id, RatingSkip.retest).where(RatingSkip.rater_id == who.user_id).subquery()


def _same(submitted) -> object:  # noqa: ANN001 - the subquery of _submitted or _skipped
    return and_(submitted.c.item_id == Assignment.item_id, submitted.c.retest == Assignment.retest)


def progress(session: Session, who: Principal) -> list[StudyProgress]:
    """Done / assigned (and skipped) for every study in which ``who`` has assignments (repeats included,
    unannounced)."""
    submitted, skipped = _submitted(who), _skipped(who)
    rows = session.exec(
        select(Study.id, Study.name, Study.title, func.count(Assignment.id), func.count(submitted.c.item_id),
               func.count(skipped.c.item_id))
        .join(Assignment, Assignment.study_id == Study.id)
        .outerjoin(submitted, _same(submitted))
        .outerjoin(skipped, _same(skipped))
        .where(Assignment.user_id == who.user_id)
        .group_by(Study.id, Study.name, Study.title)
        .order_by(Study.name)
    ).all()
    return [StudyProgress(sid, name, title, done, total, skip) for sid, name, title, total, done, skip in rows]


def queue(session: Session, who: Principal, study: Study) -> list[QueueEntry]:
    """``who``'s items in ``study`` in their randomised order, each marked rated (or skipped) or not.

    Ties of position are ordered by assignment id, which puts a repeat after the item it was placed
    behind (see :mod:`medhelm_core.rating.retest`).
    """
    submitted, skipped = _submitted(who), _skipped(who)
    rows = session.exec(
        select(Assignment.item_id, Assignment.retest, submitted.c.item_id, skipped.c.item_id)
        .outerjoin(submitted, _same(submitted))
        .outerjoin(skipped, _same(skipped))
        .where(Assignment.user_id == who.user_id, Assignment.study_id == study.id)
        .order_by(col(Assignment.position), col(Assignment.id))
    ).all()
    return [QueueEntry(item_id, done is not None, bool(retest), skip is not None and done is None)
            for item_id, retest, done, skip in rows]


def first_open(entries: list[QueueEntry]) -> int:
    """Index of the first open item (where to resume), or the last item when all are rated or skipped."""
    for index, entry in enumerate(entries):
        if entry.open:
            return index
    return max(len(entries) - 1, 0)


def all_done(entries: list[QueueEntry]) -> bool:
    """True when every item of the queue is rated or skipped (and there is at least one).

    Examples
    --------
    >>> all_done([QueueEntry(1, True), QueueEntry(2, False, skipped=True)]), all_done([QueueEntry(1, False)])
    (True, False)
    """
    return bool(entries) and not any(e.open for e in entries)


def next_open(entries: list[QueueEntry], index: int) -> int:
    """Where to go after a submission (or a skip) at ``index``: the next open item after it that is not the same
    item.

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
    after = [i for i in range(index + 1, len(entries)) if entries[i].open and entries[i].item_id != current]
    if after:
        return after[0]
    anywhere = [i for i, e in enumerate(entries) if e.open and e.item_id != current]
    if anywhere:
        return anywhere[0]
    return index if any(e.open for e in entries) else first_open(entries)


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
    skip = None if latest else _skip_of(session, who, item_id, retest)
    return RaterItem(
        **item_as_shown(study, item),
        text_available=bool(item.meta.get("text_available", True)),
        scores=dict(latest.scores) if latest else {},
        comment=latest.comment if latest else "",
        flag=latest.flag if latest else None,
        revision=latest.revision if latest else 0,
        skip_reason=skip.reason if skip else None,
        skip_note=skip.note if skip else "",
    )


def _skip_of(session: Session, who: Principal, item_id: int, retest: bool) -> RatingSkip | None:
    return session.exec(
        select(RatingSkip).where(RatingSkip.item_id == item_id, RatingSkip.rater_id == who.user_id,
                                 RatingSkip.retest == retest)
    ).first()


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
    A skip of the item is removed once the rating is written (the audit trail keeps it).
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
    if written:
        skip = _skip_of(session, who, item_id, retest)
        if skip is not None:
            session.delete(skip)
    if written and not retest and submission.revision == 1 and submission.flag is None:
        schedule_retest(session, study, who.user_id, item_id)
    return written


def skip(
    session: Session,
    who: Principal,
    study: Study,
    item_id: int,
    reason: str,
    note: str = "",
    *,
    retest: bool = False,
) -> bool:
    """Skip an assigned, unrated item with a reason (a :class:`~medhelm_core.db.models.SkipReason`; ``other``
    needs a ``note``), in the caller's transaction; True if it was written, False when the same skip is already
    stored (a double click). A skip is not a rating: the item leaves ``who``'s open queue, counts as skipped in
    their progress and shows on the researchers' review list; rating it later removes the skip.

    Raises :class:`~medhelm_core.errors.ValidationError` for an unknown reason, a missing or too long note, or an
    item ``who`` has already rated (revise the rating instead), and
    :class:`~medhelm_core.errors.AccessDenied` for an item not assigned to ``who``.
    """
    item = _assigned(session, who, study, item_id, retest)
    if reason not in SKIP_REASONS:
        raise ValidationError(f"unknown skip reason {reason!r}; reasons are: {', '.join(SKIP_REASONS)}")
    note = (note or "").strip()
    if reason == SkipReason.other and not note:
        raise ValidationError("please say in the note why you skip this item")
    if len(note) > MAX_SKIP_NOTE:
        raise ValidationError(f"the note is {len(note)} characters long; at most {MAX_SKIP_NOTE} are kept")
    hold_write_lock(session)  # the checks below must still hold when the skip is written
    if latest_submission(session, item_id, who.user_id, retest=retest) is not None:
        raise ValidationError("you have rated this item already: revise your rating instead of skipping it")
    existing = _skip_of(session, who, item_id, retest)
    if existing is not None and (existing.reason, existing.note) == (reason, note):
        return False
    row = existing or RatingSkip(item_id=item_id, rater_id=who.user_id, reason=reason, retest=retest)
    row.reason, row.note = str(SkipReason(reason)), note
    session.add(row)
    # the note is not copied into the audit trail: it is free text that may name a patient
    record_event(session, AuditAction.rating_skipped, actor=who, study_id=study.id, item_id=item.id,
                 reason=row.reason, has_note=bool(note), **({"retest": True} if retest else {}))
    return True
