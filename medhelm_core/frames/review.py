"""What clinicians said about items besides their scores, for the researchers' review list: flags (unsafe first),
skips with their reasons, and comments.

One row per clinician and item: their newest submission when it carries a flag or a comment, and their skip
when they skipped it (a rating removes the skip). A test-retest repeat's flag or comment is listed too, marked
``repeat``: a clinician who calls an output unsafe the second time round should be read either way.
"""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd
from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.db.models import Item, RatingFlag, RatingSkip, RatingSubmission, Study, User

#: the kinds of row, most urgent first: the list's order and its filter
REVIEW_KINDS: tuple[str, ...] = (*(f.value for f in RatingFlag), "skip", "comment")
#: the review list's columns (``score_<criterion>`` columns follow ``clinician`` when any row has scores)
REVIEW_COLUMNS = ["kind", "item_id", "benchmark", "instance_id", "model", "clinician", "flag", "reason", "comment",
                  "at", "repeat"]


def review_frame(session: Session, study: Study) -> pd.DataFrame:
    """The study's flags, skips and comments, one row per clinician and item (see the module), most urgent first:
    ``unsafe``, ``unreadable``, ``cannot_judge``, then skips, then comments; within a kind, newest first.

    Columns: :data:`REVIEW_COLUMNS` and a ``score_<criterion>`` column per criterion scored. ``kind`` is the flag,
    ``skip`` or ``comment``; ``reason`` is a skip's :class:`~medhelm_core.db.models.SkipReason`; ``comment`` is the
    clinician's comment, or a skip's note; ``at`` is when (UTC).

    Examples
    --------
    >>> review_frame(session, study)[["kind", "item_id", "clinician", "comment"]].head(2)  # doctest: +SKIP
         kind  item_id   clinician                      comment
    0  unsafe       12  clinician1  dose is ten times too high
    1    skip        7  clinician2
    """
    newest = (
        select(RatingSubmission.item_id, RatingSubmission.rater_id, RatingSubmission.retest,
               func.max(RatingSubmission.revision).label("revision"))
        .join(Item, Item.id == RatingSubmission.item_id)
        .where(Item.study_id == study.id)
        .group_by(RatingSubmission.item_id, RatingSubmission.rater_id, RatingSubmission.retest)
        .subquery()
    )
    submissions = session.exec(
        select(RatingSubmission, User.username, Item.benchmark, Item.instance_id, Item.model)
        .join(newest, (newest.c.item_id == RatingSubmission.item_id) & (newest.c.rater_id == RatingSubmission.rater_id)
              & (newest.c.retest == RatingSubmission.retest) & (newest.c.revision == RatingSubmission.revision))
        .join(Item, Item.id == RatingSubmission.item_id)
        .join(User, User.id == RatingSubmission.rater_id)
        .where((RatingSubmission.flag.is_not(None)) | (RatingSubmission.comment != ""))
    ).all()
    skips = session.exec(
        select(RatingSkip, User.username, Item.benchmark, Item.instance_id, Item.model)
        .join(Item, Item.id == RatingSkip.item_id)
        .join(User, User.id == RatingSkip.rater_id)
        .where(Item.study_id == study.id)
    ).all()
    rows = [
        {"kind": sub.flag or "comment", "item_id": sub.item_id, "benchmark": benchmark, "instance_id": instance,
         "model": model, "clinician": name, "flag": sub.flag or "", "reason": "", "comment": sub.comment,
         "at": sub.submitted_at, "repeat": bool(sub.retest), **{f"score_{k}": v for k, v in sub.scores.items()}}
        for sub, name, benchmark, instance, model in submissions
    ] + [
        {"kind": "skip", "item_id": skip.item_id, "benchmark": benchmark, "instance_id": instance, "model": model,
         "clinician": name, "flag": "", "reason": skip.reason, "comment": skip.note, "at": skip.skipped_at,
         "repeat": bool(skip.retest)}
        for skip, name, benchmark, instance, model in skips
    ]
    frame = pd.DataFrame(rows, columns=REVIEW_COLUMNS) if not rows else pd.DataFrame(rows)
    scores = [c for c in frame.columns if c.startswith("score_")]  # in the rubric's order, as submissions keep it
    frame = frame[[*REVIEW_COLUMNS[:6], *scores, *REVIEW_COLUMNS[6:]]]
    if frame.empty:
        return frame
    frame["at"] = pd.to_datetime(frame["at"], utc=True)
    order = frame["kind"].map({kind: rank for rank, kind in enumerate(REVIEW_KINDS)}).fillna(len(REVIEW_KINDS))
    frame = frame.assign(_rank=order).sort_values(["_rank", "at"], ascending=[True, False], kind="stable")
    return frame.drop(columns="_rank").reset_index(drop=True)


def filter_review(
    frame: pd.DataFrame,
    *,
    kinds: Collection[str] = (),
    benchmarks: Collection[str] = (),
    clinicians: Collection[str] = (),
    text: str = "",
) -> pd.DataFrame:
    """The rows of a :func:`review_frame` of the given kinds, benchmarks and clinicians (an empty choice keeps
    all) whose comment holds ``text`` (case-insensitive; blank keeps all), in the same order.

    Examples
    --------
    >>> frame = pd.DataFrame({"kind": ["unsafe", "skip", "comment"], "benchmark": ["a", "a", "b"],
    ...                       "clinician": ["c1", "c2", "c1"], "comment": ["Wrong DOSE", "", "fine"]})
    >>> filter_review(frame, kinds=["unsafe", "comment"], clinicians=["c1"], text="dose")["kind"].tolist()
    ['unsafe']
    """
    keep = pd.Series(True, index=frame.index)
    for column, chosen in (("kind", kinds), ("benchmark", benchmarks), ("clinician", clinicians)):
        if chosen:
            keep &= frame[column].isin(list(chosen))
    if text.strip():
        keep &= frame["comment"].fillna("").str.contains(text.strip(), case=False, regex=False)
    return frame[keep]
