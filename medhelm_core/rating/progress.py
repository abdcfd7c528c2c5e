"""A clinician's progress over their studies: per study, how many of their items are rated, skipped and open.

Apart from the queue because it spans every study of the clinician and is read on every page they open (the home
page lists it; the Rate page takes its queue's length and open count from it, so it must stay one statement over
the clinician's own assignments). The subqueries of the clinician's own submitted and skipped items live here too:
:func:`medhelm_core.rating.queue.queue` joins them the same way. Only ``who``'s own rows are read, never another
clinician's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import and_, bindparam, case, func, or_
from sqlalchemy.sql.elements import BindParameter
from sqlmodel import Session, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.models import Assignment, RatingSkip, RatingSubmission, Study


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
