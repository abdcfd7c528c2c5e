"""Writing a clinician's rating: validated against the rubric, appended to the history, one transaction.

Callers pass a session that is inside a transaction (see :func:`medhelm_core.db.engine.transaction`); nothing
here commits, so an import of many ratings is still all-or-nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlmodel import Session, select

from medhelm_core.db.audit import record_event
from medhelm_core.db.engine import hold_write_lock
from medhelm_core.db.models import AuditAction, Item, Rating, RatingFlag, RatingSubmission, User, utcnow
from medhelm_core.errors import ValidationError
from medhelm_core.rubric import RubricSpec


def record_rating(
    session: Session,
    *,
    item: Item,
    rater: User,
    rubric: RubricSpec,
    scores: Mapping[str, object],
    comment: str = "",
    flag: str | None = None,
    request_id: str | None = None,
    elapsed_seconds: float | None = None,
    retest: bool = False,
) -> tuple[RatingSubmission, bool]:
    """Store one submission of ``rater``'s scores for ``item``; returns ``(submission, written)``.

    Every criterion of the rubric needs a score on its scale, unless a flag says the output could not be
    rated (then scores may be left out). A repeated ``request_id`` (double click, rerun) returns the earlier
    submission and writes nothing. A submission identical to the current one writes nothing either, so
    re-importing the same file is idempotent; a changed one becomes the next revision.

    A ``retest`` submission (the item shown again to the same clinician, see :mod:`medhelm_core.rating.retest`)
    has its own revisions and never touches the current ratings: a repeat is not a second rater.
    """
    hold_write_lock(session)  # the revision read below must still be the newest when it is written
    if request_id is not None:
        earlier = session.exec(
            select(RatingSubmission).where(RatingSubmission.request_id == request_id)
        ).first()
        if earlier is not None:
            return earlier, False
    if flag is not None and flag not in {f.value for f in RatingFlag}:
        raise ValidationError(
            f"unknown flag {flag!r}; flags are: {', '.join(f.value for f in RatingFlag)}"
        )
    unknown = set(scores) - set(rubric.criterion_names)
    if unknown:
        raise ValidationError(f"criteria not in rubric {rubric.name}: {', '.join(sorted(unknown))}")
    clean: dict[str, int] = {}
    missing: list[str] = []
    for criterion in rubric.criteria:
        value = scores.get(criterion.name)
        if value is None or value == "":
            missing.append(criterion.label)
            continue
        clean[criterion.name] = criterion.check_score(value)
    if missing and flag is None:
        raise ValidationError(f"please score every criterion: {', '.join(missing)} left empty")

    latest = latest_submission(session, item.id, rater.id, retest=retest)
    if latest is not None and (latest.scores, latest.comment, latest.flag) == (clean, comment, flag):
        return latest, False
    revision = (latest.revision + 1) if latest is not None else 1
    submission = RatingSubmission(
        item_id=item.id,
        rater_id=rater.id,
        revision=revision,
        scores=clean,
        comment=comment,
        flag=flag,
        request_id=request_id,
        elapsed_seconds=elapsed_seconds,
        retest=retest,
    )
    session.add(submission)
    session.flush()
    if not retest:
        _update_current(session, item, rater, submission)
    # the comment is not copied into the audit trail: it is free text that may name a patient
    extra = {"retest": True} if retest else {}
    record_event(session, AuditAction.rating_submitted, actor=rater, study_id=item.study_id, item_id=item.id,
                 submission_id=submission.id, revision=revision, scores=clean, flag=flag,
                 has_comment=bool(comment), **extra)
    return submission, True


def _update_current(session: Session, item: Item, rater: User, submission: RatingSubmission) -> None:
    """Point the rater's current score on each criterion at ``submission``."""
    current = {
        r.criterion: r
        for r in session.exec(select(Rating).where(Rating.item_id == item.id, Rating.rater_id == rater.id)).all()
    }
    now = utcnow()
    for name, score in submission.scores.items():
        row = current.pop(name, None)
        if row is None:
            row = Rating(item_id=item.id, rater_id=rater.id, criterion=name, score=score,
                         submission_id=submission.id)
        row.score, row.submission_id, row.updated_at = score, submission.id, now
        session.add(row)
    for stale in current.values():  # a criterion left out by a flagged revision has no current score
        session.delete(stale)


def latest_submission(
    session: Session, item_id: int, rater_id: int, *, retest: bool = False
) -> RatingSubmission | None:
    """The rater's newest submission for the item: of their ordinary rating, or of its retest repeat."""
    return session.exec(
        select(RatingSubmission)
        .where(RatingSubmission.item_id == item_id, RatingSubmission.rater_id == rater_id,
               RatingSubmission.retest == retest)
        .order_by(RatingSubmission.revision.desc())
        .limit(1)
    ).first()
