"""One item as a rater sees it: blinded, with their own latest rating or skip of it, and the study's rubric.

Apart because these rules are shared: the blinding (:func:`item_as_shown`: never the model's name, the reference
only when the study shows it) by the Rate page and adjudication; the access check (the item must be assigned to
the clinician, whatever their role) by every read and write of a rater's item
(:mod:`medhelm_core.rating.rater_actions`). The jury's scores and other clinicians' scores are never returned.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.models import Assignment, Item, RatingSkip, RatingSubmission, Study
from medhelm_core.errors import AccessDenied
from medhelm_core.rating.ratings import latest_submission
from medhelm_core.rubric import RubricSpec, rubric_spec
from medhelm_core.studies import study_item


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


def _skip_of(session: Session, who: Principal, item_id: int, retest: bool) -> RatingSkip | None:
    return session.exec(
        select(RatingSkip).where(RatingSkip.item_id == item_id, RatingSkip.rater_id == who.user_id,
                                 RatingSkip.retest == retest)
    ).first()


def study_rubric(session: Session, study: Study) -> RubricSpec:
    """The rubric of a study."""
    return rubric_spec(session, study.rubric_id)
