"""Studies: create one, find one (by name or id), change its settings, and count what is in it.

Core functions take the :class:`~medhelm_core.db.models.Study` row; the CLI finds it by name
(:func:`get_study`), a page by id (:func:`get_study_by_id`).
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import Assignment, AuditAction, Item, JudgeVerdict, JuryRun, MetricScore, Rating, Study
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


def get_study_by_id(session: Session, study_id: int) -> Study:
    """The study with id ``study_id`` in ``session``, or :class:`NotFoundError` (it was deleted meanwhile).

    A page keeps the id of the study picked and reads the row again in the session that writes to it.
    """
    study = session.get(Study, study_id)
    if study is None:
        raise NotFoundError(f"study {study_id} no longer exists")
    return study


def study_item(session: Session, study: Study, item_id: int) -> Item:
    """The item ``item_id`` of ``study``, or :class:`NotFoundError`.

    An item id arrives from a request (a page's click, a typed id); checking that it belongs to the study in
    hand is what keeps one study's rater, adjudicator or researcher out of another study's items.
    """
    item = session.get(Item, item_id)
    if item is None or item.study_id != study.id:
        raise NotFoundError(f"study {study.name!r} has no item {item_id}")
    return item


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


#: the largest share of items that may come back for test-retest: beyond it the repeats crowd out first ratings
MAX_RETEST_SHARE = 0.5


def _speed_threshold(seconds: object) -> float:
    # The check lives with the speed flags; imported here so that a command that never sets a threshold does
    # not pay for their pandas. Its error is a ValidationError.
    from medhelm_core.rating.quality_flags import check_speed_threshold

    return check_speed_threshold(seconds)


def _retest_share(share: object) -> float:
    try:
        value = float(share)
    except (TypeError, ValueError):
        message = f"the retest share must be a number between 0 and {MAX_RETEST_SHARE}, not {share!r}"
        raise ValidationError(message) from None
    if not math.isfinite(value) or not 0 <= value <= MAX_RETEST_SHARE:
        raise ValidationError(f"the retest share must be between 0 and {MAX_RETEST_SHARE}, not {share!r}")
    return value


def _retest_gap(gap: object) -> int:
    if isinstance(gap, bool) or not isinstance(gap, int) or gap < 1:
        raise ValidationError(f"the retest gap must be a whole number of items, 1 or more, not {gap!r}")
    return gap


def check_adjudication_threshold(threshold: object) -> int:
    """``threshold`` as points of disagreement (a whole number, 1 or more), or :class:`ValidationError`.

    Examples
    --------
    >>> check_adjudication_threshold(2)
    2
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise ValidationError(f"the adjudication threshold must be a whole number of points, 1 or more, "
                              f"not {threshold!r}")
    return threshold


def _plan(plan: PlanResult | None) -> dict[str, Any] | None:
    return dataclasses.asdict(plan) if plan is not None else None


#: the longest instructions a study keeps for its clinicians
MAX_INSTRUCTIONS = 20_000


def _instructions(text: object) -> str:
    if not isinstance(text, str):
        raise ValidationError(f"the instructions must be text, not {type(text).__name__}")
    text = text.strip()
    if len(text) > MAX_INSTRUCTIONS:
        raise ValidationError(f"the instructions are {len(text)} characters long; at most {MAX_INSTRUCTIONS} are kept")
    if "\x00" in text:
        raise ValidationError("the instructions contain a NUL character")
    return text


def _protocol(protocol: object) -> str:
    # As agreement.protocol.PROTOCOLS, which loads pandas: a settings change should not pay for it.
    if protocol not in ("medhelm", "full"):
        raise ValidationError(f"protocol {protocol!r} unknown; use one of medhelm, full")
    return str(protocol)


def _benchmarks(session: Session, study: Study, benchmarks: object) -> list[str]:
    if isinstance(benchmarks, str) or not isinstance(benchmarks, (list, tuple, set, frozenset)):
        raise ValidationError(f"the benchmarks must be a list of names, not {benchmarks!r}")
    chosen = sorted({str(b) for b in benchmarks})
    known = set(session.exec(select(Item.benchmark).where(Item.study_id == study.id).distinct()).all())
    unknown = [b for b in chosen if b not in known]
    if unknown:
        raise ValidationError(f"study {study.name!r} has no benchmark {', '.join(unknown)} "
                              f"(its benchmarks: {', '.join(sorted(known)) or 'none yet'})")
    return chosen


#: the settings :func:`update_settings` changes, each with its check (None turns adjudication off and
#: forgets the plan)
_SETTINGS: dict[str, Callable[[Any], Any]] = {
    "speed_threshold_seconds": _speed_threshold,
    "retest_share": _retest_share,
    "retest_gap": _retest_gap,
    "adjudication_threshold": lambda v: None if v is None else check_adjudication_threshold(v),
    "plan": _plan,
    "instructions": _instructions,
    "agreement_protocol": _protocol,
}


def update_settings(session: Session, study: Study, *, actor: Actor = None, **fields: Any) -> Study:
    """Change some of a study's settings in the caller's transaction, each change in the audit trail.

    Parameters
    ----------
    session
        The session that writes the change (and its audit events).
    study
        The study, read in ``session``.
    actor
        Who changes it, for the audit trail.
    **fields
        Any of ``speed_threshold_seconds`` (a first rating faster than this is flagged),
        ``retest_share`` (0 turns test-retest off; at most :data:`MAX_RETEST_SHARE`), ``retest_gap``
        (other items before a repeat), ``adjudication_threshold`` (points apart; None turns adjudication
        off), ``plan`` (a :class:`~medhelm_core.agreement.planning.PlanResult`; None forgets it),
        ``instructions`` (what clinicians read on the Rate page), ``agreement_protocol`` (``medhelm`` or
        ``full``) and ``agreement_benchmarks`` (the benchmarks the Agreement page and the report pool by
        default, each one of the study's; empty: all), the last two together being how the study's figures
        open. Every value is checked before any is set, so a bad one changes nothing.

    Returns
    -------
    Study
        The same row, changed. A new retest share applies to ratings submitted from then on; repeats
        already scheduled stay in the queues.

    Examples
    --------
    >>> update_settings(session, study, speed_threshold_seconds=45, retest_share=0.1, retest_gap=10,
    ...                 actor=who)  # doctest: +SKIP
    """
    known = [*_SETTINGS, "agreement_benchmarks"]
    unknown = sorted(set(fields) - set(known))
    if unknown:
        raise TypeError(f"update_settings() got unknown settings {', '.join(unknown)}; known: {', '.join(known)}")
    clean = {name: _SETTINGS[name](value) for name, value in fields.items() if name in _SETTINGS}
    if "agreement_benchmarks" in fields:  # checked against the study's items
        clean["agreement_benchmarks"] = _benchmarks(session, study, fields["agreement_benchmarks"])
    for name, value in clean.items():
        setattr(study, name, value)
    session.add(study)
    # one audit action per kind of setting, as the trail has always named them
    if "speed_threshold_seconds" in clean:
        record_event(session, AuditAction.study_speed_threshold, actor=actor, study_id=study.id,
                     seconds=study.speed_threshold_seconds)
    if "retest_share" in clean or "retest_gap" in clean:
        record_event(session, AuditAction.study_retest, actor=actor, study_id=study.id, share=study.retest_share,
                     gap=study.retest_gap)
    if "adjudication_threshold" in clean:
        record_event(session, AuditAction.adjudication_threshold, actor=actor, study_id=study.id,
                     threshold=study.adjudication_threshold)
    if "plan" in clean:
        plan = study.plan or {}
        record_event(session, AuditAction.study_plan, actor=actor, study_id=study.id, items=plan.get("items"),
                     raters=plan.get("raters"))
    if "instructions" in clean:
        record_event(session, AuditAction.study_instructions, actor=actor, study_id=study.id,
                     characters=len(study.instructions))
    if "agreement_protocol" in clean or "agreement_benchmarks" in clean:
        record_event(session, AuditAction.study_agreement_defaults, actor=actor, study_id=study.id,
                     protocol=study.agreement_protocol, benchmarks=list(study.agreement_benchmarks or []))
    return study


def study_benchmarks(session: Session, study: Study) -> list[str]:
    """The benchmarks of ``study``'s items, by name."""
    return list(session.exec(select(Item.benchmark).where(Item.study_id == study.id).distinct()
                             .order_by(Item.benchmark)).all())


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


def agreement_view(study: Study, protocol: str | None = None, benchmarks: Sequence[str] = ()) -> tuple[str, list[str]]:
    """The protocol and benchmarks a figure of ``study`` uses: those given, else the study's saved view (what the
    Agreement page opens on), so that the page, ``medhelm agreement`` and ``medhelm report`` agree by default.

    Examples
    --------
    >>> agreement_view(Study(name="s", agreement_protocol="full", agreement_benchmarks=["medi_qa"]))
    ('full', ['medi_qa'])
    >>> agreement_view(Study(name="s", agreement_benchmarks=["medi_qa"]), "medhelm", ["aci_bench"])
    ('medhelm', ['aci_bench'])
    """
    return protocol or study.agreement_protocol or "medhelm", list(benchmarks) or list(study.agreement_benchmarks or [])


def plan_progress(session: Session, study: Study, raters: int | None = None) -> PlanProgress | None:
    """Items rated by at least ``raters`` clinicians (default: the plan's clinicians per item), against the plan's
    item count.

    Gold items are not counted: they stay out of the agreement figures. None when the study has no plan
    and no ``raters`` is given.
    """
    plan = study.plan or {}
    k = raters or plan.get("clinicians") or plan.get("raters")
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


def study_items(session: Session, study: Study) -> list[Item]:
    """Every item of ``study``, by benchmark and instance: the order a researcher browses them in.

    Examples
    --------
    >>> [f"{i.benchmark} / {i.instance_id}" for i in study_items(session, study)][:1]  # doctest: +SKIP
    ['aci_bench / 0']
    """
    return list(
        session.exec(select(Item).where(Item.study_id == study.id).order_by(Item.benchmark, Item.instance_id)).all()
    )
