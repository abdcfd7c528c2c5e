"""Adjudication: items on which clinicians disagree by a set number of points go to an adjudicator.

A study's ``adjudication_threshold`` (None: off) says how far apart two clinicians' current scores on one
criterion must be for the item to be disputed: an item is disputed on a criterion when the highest and
the lowest current score differ by at least the threshold (which is the same as "some two clinicians
differ by at least the threshold"). An item rated by one clinician is never disputed.

The adjudicator's scores are stored in :class:`~medhelm_core.db.models.Adjudication`, apart from the raw
clinician ratings, which stay exactly as the clinicians left them (agreement is computed on the raw
ratings; an adjudicated score is a separate, later judgement). Each submission adds a revision.

Access: only the roles in :data:`ADJUDICATING_ROLES` may read the queue or submit. An adjudicator sees the
clinicians' scores and comments (that is what adjudication needs) under per-item pseudonyms
(``Clinician A``, ``Clinician B`` ...), so that who rated does not sway the verdict; researchers and admins
see usernames. Nobody here is shown the model's name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd
from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.audit import record_event
from medhelm_core.db.models import Adjudication, AuditAction, Item, Rating, Role, Study, User
from medhelm_core.errors import AccessDenied, ValidationError
from medhelm_core.rating.rater_item import item_as_shown, study_rubric
from medhelm_core.rating.ratings import latest_submission
from medhelm_core.rubric import RubricSpec
from medhelm_core.studies import check_adjudication_threshold, study_item

#: who may read the adjudication queue and submit adjudicated scores
ADJUDICATING_ROLES = frozenset({Role.adjudicator, Role.researcher, Role.admin})


@dataclass(frozen=True)
class Disagreement:
    """One disputed criterion of one item: the spread and every clinician's current score.

    ``scores`` maps rater id to score; the page shows them under the labels of :class:`CaseView`.
    """

    item_id: int
    benchmark: str
    criterion: str
    spread: int
    scores: dict[int, int]


@dataclass(frozen=True)
class QueueCase:
    """One disputed item in the adjudication queue."""

    item_id: int
    benchmark: str
    #: disputed criterion -> spread (highest minus lowest current score)
    spreads: dict[str, int]
    #: True once every disputed criterion has an adjudicated score
    adjudicated: bool

    @property
    def label(self) -> str:
        """How the queue names the case: its id, benchmark and spreads, ticked once adjudicated."""
        spreads = ", ".join(f"{criterion} ±{spread}" for criterion, spread in self.spreads.items())
        return f"Item {self.item_id} · {self.benchmark} · {spreads}" + ("  ✓" if self.adjudicated else "")


@dataclass(frozen=True)
class ClinicianRating:
    """One clinician's latest submission for the item, under the label the viewer may see."""

    label: str
    scores: dict[str, int]
    comment: str
    flag: str | None


@dataclass(frozen=True)
class CaseView:
    """A disputed item as the adjudicator sees it (no model name)."""

    item_id: int
    benchmark: str
    input_text: str
    output_text: str
    reference_text: str | None
    spreads: dict[str, int]
    ratings: tuple[ClinicianRating, ...]
    #: criterion -> current adjudicated score, and the comment of the latest adjudication
    adjudicated: dict[str, int]
    comment: str

    def ratings_table(self, rubric: RubricSpec) -> pd.DataFrame:
        """The clinicians' ratings side by side: one row per clinician (under the label the viewer may see), a
        column per criterion of ``rubric`` headed by its label, and the flag."""
        return pd.DataFrame([
            {"clinician": r.label, **{c.label: r.scores.get(c.name) for c in rubric.criteria}, "flag": r.flag or ""}
            for r in self.ratings
        ])


def disagreements(session: Session, study: Study, threshold: int | None = None) -> list[Disagreement]:
    """Every (item, criterion) of ``study`` whose current scores spread by at least ``threshold`` points.

    Parameters
    ----------
    session
        An open session.
    study
        The study whose items are checked.
    threshold
        Points of disagreement that make a dispute; defaults to the study's own threshold. With neither,
        adjudication is off and the list is empty.

    Returns
    -------
    list of Disagreement
        Ordered by item id, then criterion name. Items with fewer than two raters never appear.

    Examples
    --------
    >>> [(d.item_id, d.criterion, d.spread) for d in disagreements(session, study, 2)]  # doctest: +SKIP
    [(4, 'accuracy', 3), (9, 'clarity', 2)]
    """
    if threshold is None:
        threshold = study.adjudication_threshold
    if threshold is None:
        return []
    threshold = check_adjudication_threshold(threshold)
    rows = session.exec(
        select(Rating.item_id, Item.benchmark, Rating.criterion, Rating.rater_id, Rating.score)
        .join(Item, Item.id == Rating.item_id)
        .where(Item.study_id == study.id)
    ).all()
    grouped: dict[tuple[int, str], dict[int, int]] = defaultdict(dict)
    benchmarks: dict[int, str] = {}
    for item_id, benchmark, criterion, rater_id, score in rows:
        grouped[(item_id, criterion)][rater_id] = score
        benchmarks[item_id] = benchmark
    found = []
    for (item_id, criterion), scores in sorted(grouped.items()):
        if len(scores) < 2:
            continue
        spread = max(scores.values()) - min(scores.values())
        if spread >= threshold:
            found.append(Disagreement(item_id, benchmarks[item_id], criterion, spread, dict(sorted(scores.items()))))
    return found


def _require_adjudicator(who: Principal) -> None:
    if who.role not in ADJUDICATING_ROLES:
        raise AccessDenied("only adjudicators, researchers and admins may adjudicate")


def _current_adjudications(session: Session, item_ids: list[int]) -> dict[tuple[int, str], Adjudication]:
    if not item_ids:
        return {}
    latest = (
        select(Adjudication.item_id, Adjudication.criterion, func.max(Adjudication.revision).label("revision"))
        .where(Adjudication.item_id.in_(item_ids))
        .group_by(Adjudication.item_id, Adjudication.criterion)
        .subquery()
    )
    rows = session.exec(
        select(Adjudication).join(
            latest,
            (Adjudication.item_id == latest.c.item_id)
            & (Adjudication.criterion == latest.c.criterion)
            & (Adjudication.revision == latest.c.revision),
        )
    ).all()
    return {(row.item_id, row.criterion): row for row in rows}


def adjudication_queue(session: Session, who: Principal, study: Study) -> list[QueueCase]:
    """The disputed items of a study at its own threshold, open ones first, each with its spreads."""
    _require_adjudicator(who)
    by_item: dict[int, list[Disagreement]] = defaultdict(list)
    for found in disagreements(session, study):
        by_item[found.item_id].append(found)
    done = _current_adjudications(session, list(by_item))
    cases = [
        QueueCase(
            item_id=item_id,
            benchmark=found[0].benchmark,
            spreads={d.criterion: d.spread for d in found},
            adjudicated=all((item_id, d.criterion) in done for d in found),
        )
        for item_id, found in by_item.items()
    ]
    return sorted(cases, key=lambda c: (c.adjudicated, c.item_id))


def _disputed(session: Session, study: Study, item_id: int) -> list[Disagreement]:
    study_item(session, study, item_id)
    found = [d for d in disagreements(session, study) if d.item_id == item_id]
    if not found:
        raise ValidationError(f"item {item_id} is not disputed at this study's threshold")
    return found


def load_case(session: Session, who: Principal, study: Study, item_id: int) -> CaseView:
    """A disputed item with every clinician's latest scores and comments, for adjudication."""
    _require_adjudicator(who)
    found = _disputed(session, study, item_id)
    item = session.get(Item, item_id)
    rater_ids = sorted({rid for d in found for rid in d.scores})
    names = dict(session.exec(select(User.id, User.username).where(User.id.in_(rater_ids))).all())
    ratings = []
    for n, rater_id in enumerate(rater_ids):
        latest = latest_submission(session, item_id, rater_id)
        label = names[rater_id] if who.sees_everything else f"Clinician {chr(ord('A') + n % 26)}{n // 26 or ''}"
        ratings.append(ClinicianRating(label, dict(latest.scores), latest.comment, latest.flag))
    done = _current_adjudications(session, [item_id])
    newest = max(done.values(), key=lambda a: a.created_at, default=None)
    return CaseView(
        **item_as_shown(study, item),
        spreads={d.criterion: d.spread for d in found},
        ratings=tuple(ratings),
        adjudicated={criterion: row.score for (_, criterion), row in done.items()},
        comment=newest.comment if newest is not None else "",
    )


def submit_adjudication(
    session: Session,
    who: Principal,
    study: Study,
    item_id: int,
    scores: Mapping[str, object],
    comment: str = "",
) -> list[Adjudication]:
    """Store ``who``'s adjudicated scores for the disputed criteria of an item (in the caller's transaction).

    Each score is checked against the study's rubric and must be for a criterion that is disputed on this
    item. A score (with comment) equal to the current adjudication is not written again, so a rerun or a
    double click adds nothing; returns the rows written. The clinicians' ratings are not touched.

    Examples
    --------
    >>> with transaction(engine) as s:  # doctest: +SKIP
    ...     submit_adjudication(s, who, study, item.id, {"accuracy": 3}, "the note omits the dose")
    """
    _require_adjudicator(who)
    if not scores:
        raise ValidationError("give an adjudicated score for at least one disputed criterion")
    rubric = study_rubric(session, study)
    disputed = {d.criterion for d in _disputed(session, study, item_id)}
    clean: dict[str, int] = {}
    for name, value in scores.items():
        score = rubric.criterion(name).check_score(value)
        if name not in disputed:
            raise ValidationError(f"{name} is not disputed on item {item_id}; only disputed criteria are adjudicated")
        clean[name] = score
    comment = comment.strip()
    current = _current_adjudications(session, [item_id])
    written = []
    for name, score in clean.items():
        before = current.get((item_id, name))
        if before is not None and (before.score, before.comment) == (score, comment):
            continue
        row = Adjudication(item_id=item_id, adjudicator_id=who.user_id, criterion=name, score=score,
                           comment=comment, revision=before.revision + 1 if before is not None else 1)
        session.add(row)
        written.append(row)
    if written:
        session.flush()
        # the comment is free text that may name a patient: the audit trail only says there was one
        record_event(session, AuditAction.adjudication_submit, actor=who, study_id=study.id, item_id=item_id,
                     scores={r.criterion: r.score for r in written},
                     revisions={r.criterion: r.revision for r in written}, has_comment=bool(comment))
    return written
