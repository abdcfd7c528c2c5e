"""Studies: create one, find one, and count what is in it."""

from __future__ import annotations

import dataclasses
import math
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import Assignment, Item, JudgeVerdict, JuryRun, MetricScore, Rating, Study
from medhelm_core.errors import NotFoundError, ValidationError
from medhelm_core.rating.gold import gold_item_ids

if TYPE_CHECKING:  # planning imports scipy.stats, which every command would otherwise pay for at start-up
    from medhelm_core.agreement.planning import PlanResult
from medhelm_core.rubric import RubricSpec, default_rubric, store_rubric


def get_study(session: Session, name: str) -> Study:
    """The study called ``name``, or :class:`NotFoundError` naming the studies that exist."""
    study = session.exec(select(Study).where(Study.name == name)).first()
    if study is None:
        names = session.exec(select(Study.name).order_by(Study.name)).all()
        known = ", ".join(names) if names else "none yet"
        raise NotFoundError(f"no study named {name!r} (studies: {known})")
    return study


def get_or_create_study(
    session: Session,
    name: str,
    *,
    rubric: RubricSpec | None = None,
    title: str = "",
    description: str = "",
    overlap: int = 2,
    show_reference: bool = True,
) -> tuple[Study, bool]:
    """Return ``(study, created)``; a new study gets ``rubric`` (default MedHELM's) and a random seed."""
    name = name.strip()
    if not name:
        raise ValidationError("a study needs a name")
    existing = session.exec(select(Study).where(Study.name == name)).first()
    if existing is not None:
        return existing, False
    if overlap < 1:
        raise ValidationError("overlap must be at least 1 clinician per item")
    stored = store_rubric(session, rubric or default_rubric())
    study = Study(
        name=name,
        title=title or name,
        description=description,
        rubric_id=stored.id,
        overlap=overlap,
        show_reference=show_reference,
        order_seed=secrets.randbelow(2**31),
    )
    session.add(study)
    session.flush()
    return study, True


@dataclass(frozen=True)
class StudySummary:
    """What a study holds, for listings and the CLI's ``--json``."""

    name: str
    title: str
    items: int
    benchmarks: int
    models: int
    with_reference: int
    assignments: int
    ratings: int
    raters: int
    jury_runs: int
    verdicts: int
    metric_scores: int


def summarise_study(session: Session, study: Study) -> StudySummary:
    """Count items, ratings, verdicts and metric scores of a study in a few aggregate queries."""
    sid = study.id
    items = session.exec(
        select(
            func.count(Item.id),
            func.count(func.distinct(Item.benchmark)),
            func.count(func.distinct(Item.model)),
            func.count(Item.reference_text),
        ).where(Item.study_id == sid)
    ).one()
    in_study = select(Item.id).where(Item.study_id == sid)
    ratings = session.exec(
        select(func.count(Rating.id), func.count(func.distinct(Rating.rater_id))).where(
            Rating.item_id.in_(in_study)
        )
    ).one()
    return StudySummary(
        name=study.name,
        title=study.title,
        items=items[0],
        benchmarks=items[1],
        models=items[2],
        with_reference=items[3],
        assignments=session.exec(select(func.count(Assignment.id)).where(Assignment.study_id == sid)).one(),
        ratings=ratings[0],
        raters=ratings[1],
        jury_runs=session.exec(select(func.count(JuryRun.id)).where(JuryRun.study_id == sid)).one(),
        verdicts=session.exec(
            select(func.count(JudgeVerdict.id)).where(JudgeVerdict.item_id.in_(in_study))
        ).one(),
        metric_scores=session.exec(
            select(func.count(MetricScore.id)).where(MetricScore.item_id.in_(in_study))
        ).one(),
    )


def list_studies(session: Session) -> list[Study]:
    """All studies, by name."""
    return list(session.exec(select(Study).order_by(Study.name)).all())


def set_speed_threshold(session: Session, study: Study, seconds: float, *, actor: Actor = None) -> Study:
    """Set the study's speed threshold: a first rating submitted faster is flagged (in the caller's transaction).

    Examples
    --------
    >>> set_speed_threshold(session, study, 45, actor=who)  # doctest: +SKIP
    """
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        raise ValidationError(f"the speed threshold must be a number of seconds, not {seconds!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValidationError(f"the speed threshold must be a positive number of seconds, not {seconds!r}")
    study.speed_threshold_seconds = value
    session.add(study)
    record_event(session, "study.speed_threshold", actor=actor, study_id=study.id, seconds=value)
    return study


def save_plan(session: Session, study: Study, plan: PlanResult | None, *, actor: Actor = None) -> Study:
    """Keep the study-size plan the designer chose (None forgets it), so progress is measured against it."""
    study.plan = dataclasses.asdict(plan) if plan is not None else None
    session.add(study)
    record_event(session, "study.plan", actor=actor, study_id=study.id,
                 items=plan.items if plan is not None else None, raters=plan.raters if plan is not None else None)
    return study


@dataclass(frozen=True)
class PlanProgress:
    """How far a study is from its plan: items rated by at least the planned number of clinicians."""

    planned_items: int
    raters: int
    complete_items: int
    items_in_study: int

    @property
    def share(self) -> float:
        """Complete items as a share of the planned ones (may pass 1)."""
        return self.complete_items / self.planned_items if self.planned_items else 0.0


def plan_progress(session: Session, study: Study, raters: int | None = None) -> PlanProgress | None:
    """Items rated by at least ``raters`` clinicians (default: the plan's), against the plan's item count.

    Gold items are not counted: they stay out of the agreement figures. None when the study has no plan
    and no ``raters`` is given.
    """
    plan = study.plan or {}
    k = raters or plan.get("raters")
    if not k:
        return None
    gold = gold_item_ids(session, study)
    per_item = (
        select(Rating.item_id, func.count(func.distinct(Rating.rater_id)).label("n"))
        .join(Item, Item.id == Rating.item_id)
        .where(Item.study_id == study.id)
        .group_by(Rating.item_id)
        .subquery()
    )
    complete = session.exec(select(per_item.c.item_id).where(per_item.c.n >= k)).all()
    items = session.exec(select(func.count(Item.id)).where(Item.study_id == study.id)).one()
    return PlanProgress(
        planned_items=int(plan.get("items", 0)),
        raters=int(k),
        complete_items=sum(1 for i in complete if i not in gold),
        items_in_study=int(items) - len(gold),
    )
