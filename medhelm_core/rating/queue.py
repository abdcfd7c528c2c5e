"""A clinician's queue in one study: its order, where to resume, where to go next, what one Rate page run shows.

Each answer comes in two forms. The list functions (:func:`queue`, :func:`first_open`, :func:`all_done`,
:func:`next_open`) read the whole queue and are the reference; the indexed reads (:func:`queue_length`,
:func:`open_count`, :func:`entry_at`, :func:`first_open_index`, :func:`next_open_index`, :func:`rate_view`) exist
so that a page run reads only what it shows, not a queue that grows to thousands of items, and must give the same
answers (``tests/rating/test_rate_at_scale.py`` walks both).
Every function takes the :class:`~medhelm_core.accounts.auth.Principal` making the request and reads only the
items assigned to them and their own ratings and skips.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, bindparam, func, or_
from sqlmodel import Session, col, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.models import Assignment, Item, RatingSkip, RatingSubmission, Study
from medhelm_core.errors import NotFoundError
from medhelm_core.rating.progress import StudyProgress, _same, _skipped, _submitted
from medhelm_core.rating.rater_item import RaterItem, _rater_item


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
    not revising. ``counts``, ``who``'s :func:`~medhelm_core.rating.progress.progress` in ``study`` when the
    caller has it, saves counting again: the place shown, its item, ``who``'s rating and skip of it are then one
    statement."""
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
    """:func:`entry_at` ``index`` and :func:`~medhelm_core.rating.rater_item.load_item` of its item, read
    together; None past the queue's end. The item comes from ``who``'s own assignment, so it is assigned to them
    by construction."""
    row = _run(session, _SHOWN, who, study, offset=index).first() if index >= 0 else None
    if row is None:
        return None
    item_id, retest, item, latest, skip = row
    if item is None:
        raise NotFoundError(f"study {study.name!r} has no item {item_id}")
    entry = QueueEntry(item_id, latest is not None, bool(retest), skip is not None and latest is None)
    return entry, _rater_item(study, item, latest, skip)
