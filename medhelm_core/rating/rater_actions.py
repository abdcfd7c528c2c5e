"""What a clinician does to an assigned item: submit a rating of it, or skip it with a reason.

Apart from the reads because these are the rater's writes: each joins the caller's transaction with what comes
with it (a repeat scheduled for test-retest, an audit row), and the two share one rule, that a rating removes the
clinician's skip of the item. Both check first that the item is assigned to ``who``
(:mod:`medhelm_core.rating.rater_item`).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlmodel import Session

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.audit import record_event
from medhelm_core.db.engine import hold_write_lock
from medhelm_core.db.models import AuditAction, RatingSkip, SkipReason, Study, User
from medhelm_core.errors import ValidationError
from medhelm_core.rating.rater_item import _assigned, _skip_of, study_rubric
from medhelm_core.rating.ratings import latest_submission, record_rating
from medhelm_core.rating.retest import schedule_retest

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
