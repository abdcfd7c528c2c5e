"""The clinicians' scores as frames: the current score of each (item, rater, criterion), and every submission."""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd
from sqlmodel import Session, col, select

from medhelm_core.db.models import Item, Rating, RatingSubmission, Study, User
from medhelm_core.frames.rows import LONG_COLUMNS, select_frame


def clinician_ratings_frame(
    session: Session,
    study: Study,
    item_ids: Collection[int] | None = None,
    benchmarks: Collection[str] | None = None,
) -> pd.DataFrame:
    """Current clinician scores, one row per item, rater and criterion (the long contract, ``item_id`` an int);
    with ``item_ids``, of those items only (the gold items, for rater quality); with ``benchmarks``, of those
    benchmarks' items only (the dashboard's reload of what changed)."""
    statement = (
        select(Rating.item_id, User.username, Rating.criterion, Rating.score, Item.benchmark, Item.model)
        .join(Item, Item.id == Rating.item_id)
        .join(User, User.id == Rating.rater_id)
        .where(Item.study_id == study.id)
    )
    if item_ids is not None:
        statement = statement.where(col(Rating.item_id).in_(list(item_ids)))
    if benchmarks is not None:
        statement = statement.where(col(Item.benchmark).in_(list(benchmarks)))
    frame = select_frame(session, statement, ["item_id", "rater_id", "criterion", "score", "benchmark", "model"])
    frame.insert(2, "rater_kind", "clinician")
    return frame[LONG_COLUMNS].astype({"score": float})


def rating_history_frame(session: Session, study: Study) -> pd.DataFrame:
    """Every submission ever made (revisions and test-retest repeats included), one row per submission."""
    rows = session.exec(
        select(RatingSubmission, User.username)
        .join(Item, Item.id == RatingSubmission.item_id)
        .join(User, User.id == RatingSubmission.rater_id)
        .where(Item.study_id == study.id)
        .order_by(RatingSubmission.id)
    ).all()
    return pd.DataFrame(
        [
            {
                "item_id": s.item_id,
                "rater_id": name,
                "revision": s.revision,
                "retest": s.retest,
                **{f"score_{k}": v for k, v in s.scores.items()},
                "comment": s.comment,
                "flag": s.flag,
                "elapsed_seconds": s.elapsed_seconds,
                "submitted_at": s.submitted_at.isoformat(),
            }
            for s, name in rows
        ]
    )


def first_submissions_frame(
    session: Session, study: Study, benchmarks: Collection[str] | None = None
) -> pd.DataFrame:
    """Every clinician's first submission of each item (ordinary or repeat), with what speed flags need:
    ``rater_id``, ``item_id``, ``revision``, ``elapsed_seconds``, ``submitted_at``, and the item's ``benchmark``
    (one light query: the Agreement page asks for it on every recompute; with ``benchmarks``, of those only)."""
    statement = (
        select(User.username, RatingSubmission.item_id, RatingSubmission.revision, RatingSubmission.elapsed_seconds,
               RatingSubmission.submitted_at, Item.benchmark)
        .join(Item, Item.id == RatingSubmission.item_id)
        .join(User, User.id == RatingSubmission.rater_id)
        .where(Item.study_id == study.id, RatingSubmission.revision == 1)
    )
    if benchmarks is not None:
        statement = statement.where(col(Item.benchmark).in_(list(benchmarks)))
    return select_frame(session, statement,
                        ["rater_id", "item_id", "revision", "elapsed_seconds", "submitted_at", "benchmark"])


def item_clinicians_frame(session: Session, item_id: int) -> pd.DataFrame:
    """One item's clinicians, each with their latest submission (test-retest repeats left out): ``clinician``,
    ``revision``, ``submitted_at``, ``score_<criterion>`` ..., ``comment``, ``flag`` (the dashboard's drill-down).
    """
    submissions = session.exec(
        select(RatingSubmission, User.username)
        .join(User, User.id == RatingSubmission.rater_id)
        .where(RatingSubmission.item_id == item_id, RatingSubmission.retest == False)  # noqa: E712 - not repeats
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
    return pd.DataFrame(list(latest.values()))
