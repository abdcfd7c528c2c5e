"""What a clinician sees and does: their studies' progress, their queue, one item, a submission, a skip.

Every function takes the :class:`~medhelm_core.accounts.auth.Principal` making the request and enforces the access
rules itself: a clinician reads only items assigned to them and only their own ratings; the model's name,
the jury's scores and other clinicians' scores are never part of what is returned to a rater.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import and_, bindparam, case, func, or_
from sqlalchemy.sql.elements import BindParameter
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
from medhelm_core.errors import AccessDenied, NotFoundError, ValidationError
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
    #: neither rated nor skipped (an item both rated and skipped, by an import after a skip, is not open)
    waiting: int | None = None

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


def _submitted(rater_id: int | BindParameter):  # noqa: ANN202 - a SQLAlchemy subquery
    """(item id, retest) pairs the rater has submitted for: an item counts as done once submitted (a flagged
    submission counts too), and a repeat is done only once the repeat itself is submitted."""
    return (
        select(RatingSubmission.item_id, RatingSubmission.retest)
        .where(RatingSubmission.rater_id == rater_id)
        .distinct()
        .subquery()
    )


def _skipped(rater_id: int | BindParameter):  # noqa: ANN202 - a SQLAlchemy subquery
    """(item id, retest) pairs the rater has skipped (one skip at most per pair, removed by a rating)."""
    return select(RatingSkip.item_id, RatingSkip.retest).where(RatingSkip.rater_id == rater_id).subquery()


def _same(submitted) -> object:  # noqa: ANN001 - the subquery of _submitted or _skipped
    return and_(submitted.c.item_id == Assignment.item_id, submitted.c.retest == Assignment.retest)


def progress(session: Session, who: Principal) -> list[StudyProgress]:
    """Done / assigned (and skipped, and still open) for every study in which ``who`` has assignments (repeats
    included, unannounced). One pass over ``who``'s assignments in the index, joined by hash to ``who``'s own
    submitted and skipped items (never to other clinicians' rows)."""
    rows = session.execute(_progress_statement(), {"user_id": who.user_id}).all()
    return [StudyProgress(sid, name, title, done, total, skip, waiting)
            for sid, name, title, total, done, skip, waiting in rows]


@functools.cache
def _progress_statement():  # noqa: ANN202 - a SQLAlchemy select, built once
    # Outer joins, not an EXISTS per assignment: PostgreSQL costs a correlated EXISTS at thousands of probes per
    # queue, which at 4,000 assignments passed its JIT threshold (25 ms of compiling for a 3 ms query), or
    # hashed every clinician's submissions to answer it. Counted per study, in the index's order, before the
    # study's row is joined: grouping 4,000 rows by the study's name and title took SQLite twice the time.
    mine, skips = _submitted(bindparam("user_id")), _skipped(bindparam("user_id"))
    rated, skipped = mine.c.item_id.is_not(None), skips.c.item_id.is_not(None)
    counts = (
        select(Assignment.study_id, func.count().label("assigned"), func.count(mine.c.item_id).label("done"),
               func.count(skips.c.item_id).label("skipped"),
               func.sum(case((or_(rated, skipped), 0), else_=1)).label("waiting"))
        .outerjoin(mine, _same(mine))
        .outerjoin(skips, _same(skips))
        .where(Assignment.user_id == bindparam("user_id"))
        .group_by(Assignment.study_id)
        .subquery()
    )
    return (
        select(Study.id, Study.name, Study.title, counts.c.assigned, counts.c.done, counts.c.skipped, counts.c.waiting)
        .join(counts, counts.c.study_id == Study.id)
        .order_by(Study.name)
    )


def queue(session: Session, who: Principal, study: Study) -> list[QueueEntry]:
    """``who``'s items in ``study`` in their randomised order, each marked rated (or skipped) or not.

    Ties of position are ordered by assignment id, which puts a repeat after the item it was placed
    behind (see :mod:`medhelm_core.rating.retest`).
    """
    submitted, skipped = _submitted(who.user_id), _skipped(who.user_id)
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


# What one run of the Rate page reads: a few indexed queries instead of the whole queue (:func:`queue`); each gives
# the same answer as the list function it stands for. The index ix_assignment_queue walks who's assignments of a
# study in queue order, and the submissions and skips are looked up for the rows shown only: what grows with the
# queue is a walk of its index entries (the place shown by OFFSET, the rank), about 0.2 ms per 1,000 on PostgreSQL.
# The statements are built once, with parameters: building them anew on every run cost more than running them.


def _rated_flag(row=Assignment):  # noqa: ANN001, ANN202 - a table or subquery with item_id, retest; an EXISTS
    """The assignment ``row`` has been submitted by the rater ``:user_id`` (any revision; a repeat only by its own
    submission). The rater is the parameter, not a column: PostgreSQL then reads that rater's rows only."""
    return (
        select(RatingSubmission.id)
        .where(RatingSubmission.rater_id == bindparam("user_id"), RatingSubmission.item_id == row.item_id,
               RatingSubmission.retest == row.retest)
        .exists()
    )


def _skipped_flag(row=Assignment):  # noqa: ANN001, ANN202 - as _rated_flag
    return (
        select(RatingSkip.id)
        .where(RatingSkip.rater_id == bindparam("user_id"), RatingSkip.item_id == row.item_id,
               RatingSkip.retest == row.retest)
        .exists()
    )


_IN_QUEUE = (Assignment.user_id == bindparam("user_id"), Assignment.study_id == bindparam("study_id"))
_OPEN = and_(~_rated_flag(), ~_skipped_flag())
_IN_ORDER = (col(Assignment.position), col(Assignment.id))
_NOT_ITEM = Assignment.item_id != bindparam("item_id")
_AFTER = or_(Assignment.position > bindparam("position"),
             and_(Assignment.position == bindparam("position"), Assignment.id > bindparam("assignment_id")))
_BEFORE = or_(Assignment.position < bindparam("position"),
              and_(Assignment.position == bindparam("position"), Assignment.id < bindparam("assignment_id")))
_COUNT = select(func.count()).select_from(Assignment).where(*_IN_QUEUE)
_LENGTH = _COUNT
_OPEN_COUNT = _COUNT.where(_OPEN)
_RANK = _COUNT.where(_BEFORE)
#: the assignment at ``:offset`` of the queue; the flags and the item are read for it alone, never for the rows
#: OFFSET passes (PostgreSQL computes a select list's EXISTS for every row it skips)
_HERE = (select(Assignment.item_id, Assignment.retest, Assignment.position, Assignment.id)
         .where(*_IN_QUEUE).order_by(*_IN_ORDER).offset(bindparam("offset")).limit(1).subquery("here"))
_AT = select(_HERE.c.item_id, _HERE.c.retest, _HERE.c.position, _HERE.c.id, _rated_flag(_HERE.c),
             _skipped_flag(_HERE.c))
_LATEST_REVISION = (select(func.max(RatingSubmission.revision))
                    .where(RatingSubmission.rater_id == bindparam("user_id"),
                           RatingSubmission.item_id == _HERE.c.item_id, RatingSubmission.retest == _HERE.c.retest)
                    .correlate(_HERE).scalar_subquery())
#: what the page shows at ``:offset``, in one round trip: the entry, its item, who's latest submission and skip
_SHOWN = (select(_HERE.c.item_id, _HERE.c.retest, Item, RatingSubmission, RatingSkip)
          .select_from(_HERE)
          .outerjoin(Item, and_(Item.id == _HERE.c.item_id, Item.study_id == bindparam("study_id")))
          .outerjoin(RatingSubmission, and_(RatingSubmission.rater_id == bindparam("user_id"),
                                            RatingSubmission.item_id == _HERE.c.item_id,
                                            RatingSubmission.retest == _HERE.c.retest,
                                            RatingSubmission.revision == _LATEST_REVISION))
          .outerjoin(RatingSkip, and_(RatingSkip.rater_id == bindparam("user_id"),
                                      RatingSkip.item_id == _HERE.c.item_id, RatingSkip.retest == _HERE.c.retest)))
_FIRST = select(Assignment.position, Assignment.id).where(*_IN_QUEUE, _OPEN).order_by(*_IN_ORDER).limit(1)
_FIRST_OTHER = _FIRST.where(_NOT_ITEM)
_FIRST_OTHER_AFTER = _FIRST_OTHER.where(_AFTER)


def _run(session: Session, statement, who: Principal, study: Study, **params: object):  # noqa: ANN001, ANN202
    return session.execute(statement, {"user_id": who.user_id, "study_id": study.id, **params})


def queue_length(session: Session, who: Principal, study: Study) -> int:
    """How many items are in ``who``'s queue in ``study`` (``len(queue(...))``)."""
    return _run(session, _LENGTH, who, study).scalar_one()


def open_count(session: Session, who: Principal, study: Study) -> int:
    """How many items of ``who``'s queue in ``study`` are neither rated nor skipped (``all_done`` is
    ``queue_length > 0 and open_count == 0``)."""
    return _run(session, _OPEN_COUNT, who, study).scalar_one()


def entry_at(session: Session, who: Principal, study: Study, index: int) -> QueueEntry | None:
    """The entry at ``index`` of ``who``'s queue in ``study`` (``queue(...)[index]``), None past its end."""
    row = _run(session, _AT, who, study, offset=max(index, 0)).first() if index >= 0 else None
    if row is None:
        return None
    item_id, retest, _, _, rated, skipped = row
    return QueueEntry(item_id, bool(rated), bool(retest), bool(skipped) and not rated)


def first_open_index(session: Session, who: Principal, study: Study) -> int:
    """Where to resume: :func:`first_open` of the queue, read as the first open entry and its rank."""
    found = _run(session, _FIRST, who, study).first()
    if found is None:
        return max(queue_length(session, who, study) - 1, 0)
    return _rank(session, who, study, found)


def next_open_index(session: Session, who: Principal, study: Study, index: int) -> int:
    """:func:`next_open` of the queue after a submission (or a skip) at ``index``, read with LIMIT 1 queries."""
    here = _run(session, _AT, who, study, offset=index).first() if index >= 0 else None
    if here is not None:
        item_id, _, position, assignment_id, _, _ = here
        after = _run(session, _FIRST_OTHER_AFTER, who, study, item_id=item_id, position=position,
                     assignment_id=assignment_id).first()
        anywhere = after or _run(session, _FIRST_OTHER, who, study, item_id=item_id).first()
    else:
        anywhere = _run(session, _FIRST, who, study).first()
    if anywhere is not None:
        return _rank(session, who, study, anywhere)
    return index if open_count(session, who, study) else first_open_index(session, who, study)


def _rank(session: Session, who: Principal, study: Study, key: tuple[int, int]) -> int:
    """The index in the queue of the assignment at ``key`` = (position, id): how many come before it."""
    position, assignment_id = key
    return _run(session, _RANK, who, study, position=position, assignment_id=assignment_id).scalar_one()


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
    return _rater_item(study, item, latest, None if latest else _skip_of(session, who, item_id, retest))


def _rater_item(study: Study, item: Item, latest: RatingSubmission | None, skip: RatingSkip | None) -> RaterItem:
    """The item as the rater sees it, with their latest submission, or else their skip (a rating replaces it)."""
    skip = None if latest else skip
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


@dataclass(frozen=True)
class RateView:
    """What one run of the Rate page shows of ``who``'s queue in a study: its length, how many items are still
    open, the place shown and, unless the queue is done and not being revised, that place's entry and item."""

    length: int
    open: int
    index: int
    entry: QueueEntry | None = None
    item: RaterItem | None = None

    @property
    def all_done(self) -> bool:
        """:func:`all_done` of the queue: at least one item, and none open."""
        return self.length > 0 and self.open == 0


def rate_view(session: Session, who: Principal, study: Study, index: int | None, *, revising: bool = False,
              counts: StudyProgress | None = None) -> RateView:
    """The reads of one Rate page run for ``study``: where ``index`` is None or past the queue's end, the place
    to resume (:func:`first_open_index`); the entry and its item unless every item is handled and ``who`` is
    not revising. ``counts``, ``who``'s :func:`progress` in ``study`` when the caller has it, saves counting
    again: the place shown, its item, ``who``'s rating and skip of it are then one statement."""
    length = counts.assigned if counts is not None else queue_length(session, who, study)
    waiting = counts.waiting if counts is not None and counts.waiting is not None else open_count(session, who, study)
    if index is None or index >= length:  # with nothing open, first_open is the last item: no need to look
        index = first_open_index(session, who, study) if waiting else max(length - 1, 0)
    if length == 0 or (waiting == 0 and not revising):
        return RateView(length, waiting, index)
    shown = _shown(session, who, study, index)
    if shown is None:  # the queue shrank between the two reads (an item moved away): resume instead
        index = first_open_index(session, who, study)
        shown = _shown(session, who, study, index)
    entry, item = shown if shown is not None else (None, None)
    return RateView(length, waiting, index, entry, item)


def _shown(session: Session, who: Principal, study: Study, index: int) -> tuple[QueueEntry, RaterItem] | None:
    """:func:`entry_at` ``index`` and :func:`load_item` of its item, read together; None past the queue's end.
    The item comes from ``who``'s own assignment, so it is assigned to them by construction."""
    row = _run(session, _SHOWN, who, study, offset=index).first() if index >= 0 else None
    if row is None:
        return None
    item_id, retest, item, latest, skip = row
    if item is None:
        raise NotFoundError(f"study {study.name!r} has no item {item_id}")
    entry = QueueEntry(item_id, latest is not None, bool(retest), skip is not None and latest is None)
    return entry, _rater_item(study, item, latest, skip)


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
