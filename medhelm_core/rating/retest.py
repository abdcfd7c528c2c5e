"""Test-retest: show a share of each clinician's rated items to them again, later and unannounced.

When a study's ``retest_share`` is above 0 (see :func:`medhelm_core.studies.update_settings`), every first
rating a clinician submits may schedule a repeat of that item in their own queue. Which items come back is
decided by a stable hash of (study seed, clinician, item), so the share holds per clinician and the choice is
reproducible. The repeat is a second
:class:`~medhelm_core.db.models.Assignment` of the same item to the same clinician, marked ``retest``; its
rating is a :class:`~medhelm_core.db.models.RatingSubmission` marked ``retest`` too, which never becomes a
current :class:`~medhelm_core.db.models.Rating`. So a repeat is never counted as a second rater, and the
agreement figures never see it; it only feeds :func:`medhelm_core.agreement.intra_rater.intra_rater_agreement`.

Where the repeat goes: after at least ``retest_gap`` other unrated items that come *after* the rated
item in the clinician's queue (or after the last of them when fewer are left). With no unrated item after
it, nothing is scheduled: the repeat would follow the item directly, and a clinician must never see the
same item twice in a row. The repeat takes the position of the item it follows; the queue orders ties
by assignment id, and the repeat is always the newer assignment.
"""

from __future__ import annotations

import hashlib

import pandas as pd
from sqlalchemy import and_
from sqlmodel import Session, col, select

from medhelm_core.db.models import Assignment, Item, RatingSubmission, Study, User

RETEST_PAIR_COLUMNS: tuple[str, ...] = ("rater_id", "item_id", "criterion", "first", "repeat")


def chosen_for_retest(seed: int, user_id: int, item_id: int, share: float) -> bool:
    """Whether this clinician's rating of this item is to be repeated: a stable draw with probability ``share``.

    Examples
    --------
    >>> sum(chosen_for_retest(0, 1, i, 0.2) for i in range(1000)) / 1000  # doctest: +ELLIPSIS
    0.2...
    """
    if share <= 0:
        return False
    digest = hashlib.sha256(f"retest:{seed}:{user_id}:{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def _queue_rows(session: Session, study: Study, user_id: int) -> list[tuple[Assignment, bool]]:
    """The clinician's assignments in queue order, each with whether it has a submission of its kind."""
    submitted = (
        select(RatingSubmission.item_id, RatingSubmission.retest)
        .where(RatingSubmission.rater_id == user_id)
        .distinct()
        .subquery()
    )
    rows = session.exec(
        select(Assignment, submitted.c.item_id)
        .outerjoin(submitted, and_(submitted.c.item_id == Assignment.item_id, submitted.c.retest == Assignment.retest))
        .where(Assignment.study_id == study.id, Assignment.user_id == user_id)
        .order_by(col(Assignment.position), col(Assignment.id))
    ).all()
    return [(a, done is not None) for a, done in rows]


def schedule_retest(session: Session, study: Study, user_id: int, item_id: int) -> Assignment | None:
    """After a clinician's first rating of an item, put the item back in their queue if it is chosen.

    Called in the transaction that stores the rating. Returns the new retest assignment, or None when
    the study runs no test-retest, the item is not chosen, it is already scheduled, or no unrated item
    follows it in the queue.
    """
    if study.retest_share <= 0 or not chosen_for_retest(study.order_seed, user_id, item_id, study.retest_share):
        return None
    rows = _queue_rows(session, study, user_id)
    if any(a.retest and a.item_id == item_id for a, _ in rows):
        return None
    place = next((n for n, (a, _) in enumerate(rows) if a.item_id == item_id and not a.retest), None)
    if place is None:
        return None
    later = [a for a, done in rows[place + 1 :] if not done and a.item_id != item_id]
    if not later:
        return None
    anchor = later[min(study.retest_gap, len(later)) - 1]
    repeat = Assignment(study_id=study.id, item_id=item_id, user_id=user_id, position=anchor.position, retest=True)
    session.add(repeat)
    session.flush()
    return repeat


def retest_pairs(session: Session, study: Study) -> pd.DataFrame:
    """Every repeat rating beside the first: ``rater_id``, ``item_id``, ``criterion``, ``first``, ``repeat``.

    ``repeat`` is the clinician's latest retest submission; ``first`` their latest ordinary submission made
    before the repeat was first submitted (a revision made after seeing the item again is not the first
    reading). Criteria missing from either (a flagged submission) give no pair.
    """
    rows = session.exec(
        select(RatingSubmission, User.username)
        .join(Item, Item.id == RatingSubmission.item_id)
        .join(User, User.id == RatingSubmission.rater_id)
        .where(Item.study_id == study.id)
        .order_by(col(RatingSubmission.revision))
    ).all()
    ordinary: dict[tuple[int, int], list[RatingSubmission]] = {}
    repeats: dict[tuple[int, int], list[RatingSubmission]] = {}
    names: dict[int, str] = {}
    for sub, name in rows:
        names[sub.rater_id] = name
        (repeats if sub.retest else ordinary).setdefault((sub.item_id, sub.rater_id), []).append(sub)
    out: list[tuple[str, str, str, float, float]] = []
    for key, subs in sorted(repeats.items()):
        # Ids grow with every submission, so they order the two kinds of submission in time exactly.
        opened = min(s.id for s in subs)
        before = [s for s in ordinary.get(key, []) if s.id < opened]
        if not before:
            continue
        first, repeat = before[-1], subs[-1]
        for criterion, score in repeat.scores.items():
            if criterion in first.scores:
                out.append((names[key[1]], str(key[0]), criterion, float(first.scores[criterion]), float(score)))
    return pd.DataFrame(out, columns=list(RETEST_PAIR_COLUMNS))
