"""Rate these next: send the next clinician ratings where the models' clinician-anchored intervals are widest.

The cells (model x benchmark) get their share of the next ``n`` ratings from
:func:`medhelm_core.model_scores.allocate_ratings` (widest projected interval first); within a cell the items
are drawn uniformly at random among those no clinician has rated, and each drawn item's probability of being
drawn (items drawn / items it was drawn from) is recorded on its assignment
(:attr:`~medhelm_core.db.models.Assignment.draw_probability`). The rated items of every cell thus stay a random
sample of it, which the clinician-anchored estimates assume; the cells' different rates are weighted back by
their stratified estimate.

Each drawn item comes first in one clinician's queue: a chosen clinician to whom it is already assigned and
who has not rated it (so no work is added), else the chosen clinician without it who has the fewest unrated
assignments in the study (ties broken at random).
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
from sqlalchemy import func
from sqlmodel import Session, col, select

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import Assignment, AuditAction, Item, RatingSubmission, Study
from medhelm_core.errors import NotEnoughRatingsError, ValidationError
from medhelm_core.rating.assignment import queue_position, study_clinicians

#: a drawn item's queue position is its usual pseudo-random rank moved below every balanced one (31 bits)
FIRST_IN_QUEUE = 1 << 31
#: the most ratings one call may place (a study's size is the natural limit; this stops a typo)
MAX_DRAWS = 100_000


@dataclass
class DrawPlan:
    """What a "rate these next" call did: the (item, clinician) pairs that come next (new assignments, or
    existing unrated ones moved to the front), the cells with their share, and each clinician's open load."""

    new: list[tuple[int, int]] = field(default_factory=list)
    #: of ``new``, how many were already assigned (unrated) to that clinician and only moved to the front
    moved: int = 0
    cells: pd.DataFrame = field(default_factory=pd.DataFrame)
    loads: dict[str, int] = field(default_factory=dict)
    note: str = ""

    def summary(self) -> str:
        """What was done, in a sentence for the Raters page.

        Examples
        --------
        >>> cells = pd.DataFrame({"model": ["m1", "m2"], "benchmark": ["b", "b"], "n_next": [3, 0]})
        >>> DrawPlan(new=[(1, 1), (2, 1), (3, 2)], moved=2, cells=cells).summary()
        '3 ratings come next, in 1 model x benchmark cell (2 moved to the front of a queue that held them, 1 new).'
        """
        if not self.new:
            return self.note or "Nothing was drawn."
        cells = int((self.cells["n_next"] > 0).sum()) if "n_next" in self.cells else 0
        text = (f"{len(self.new)} rating{'s' if len(self.new) != 1 else ''} come next, in {cells} model x benchmark "
                f"cell{'s' if cells != 1 else ''} ({self.moved} moved to the front of a queue that held them, "
                f"{len(self.new) - self.moved} new).")
        return text + (f" Note: {self.note}." if self.note else "")


def _seed(study: Study, drawn_before: int) -> int:
    """Reproducible from the study's stored seed, and different at each call (it counts earlier draws)."""
    return int.from_bytes(hashlib.sha256(f"{study.order_seed}:drawn:{drawn_before}".encode()).digest()[:8], "big")


def uncertain_cells(session: Session, study: Study, jury_run_id: int | None = None) -> pd.DataFrame:
    """Every model x benchmark cell with the half-width of its clinician-anchored 95% interval (composite; NaN
    while it has fewer than two rated items), its rated items and its sampling status
    (:func:`~medhelm_core.model_scores.sampling_status`'s columns and ``half_width``)."""
    return _cells_and_design(session, study, jury_run_id)[0]


def _cells_and_design(session: Session, study: Study, jury_run_id: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    from medhelm_core.frames import model_items_frame, model_scores_long, rating_design_frame
    from medhelm_core.model_scores import clinician_anchored, item_scores, sampling_status
    from medhelm_core.rubric import rubric_spec

    items = model_items_frame(session, study)
    if items.empty:
        raise NotEnoughRatingsError(f"study {study.name!r} has no items to rate")
    long, _ = model_scores_long(session, study, jury_run_id, items)
    criteria = [c.name for c in rubric_spec(session, study.rubric_id).criteria]
    design = rating_design_frame(session, study, items)
    status = sampling_status(design)
    scores = item_scores(long, items, criteria)
    widths = pd.Series(dtype=float)
    if (scores["source"] == "jury").any() and (scores["source"] == "clinicians").any():
        anchored = clinician_anchored(scores, status)
        cells = anchored[(anchored["criterion"] == "composite") & (anchored["benchmark"] != "pooled")]
        widths = pd.Series(((cells["anchored_high"] - cells["anchored_low"]) / 2).to_numpy(),
                           index=pd.MultiIndex.from_frame(cells[["model", "benchmark"]]))
    key = pd.MultiIndex.from_frame(status[["model", "benchmark"]])
    return status.assign(half_width=widths.reindex(key).to_numpy() if len(widths) else float("nan")), design


def assign_where_uncertain(
    session: Session,
    study: Study,
    n_ratings: int,
    usernames: Sequence[str] | None = None,
    *,
    jury_run_id: int | None = None,
    actor: Actor = "cli",
) -> DrawPlan:
    """Send the next ``n_ratings`` clinician ratings to the cells with the widest clinician-anchored intervals
    (inside the caller's transaction), drawing items at random within each cell and recording the probability.

    Only items that no clinician has rated, that are not gold items and that no earlier call drew (and still
    waits to be rated) are drawn. A cell whose rated items are not a random sample (imported ratings) gets none:
    more random draws cannot make it one.

    Parameters
    ----------
    session, study
        The open transaction and the study.
    n_ratings
        How many ratings to ask for (one clinician per drawn item).
    usernames
        The clinicians to give them to (default: every active clinician but the raters an import recorded).
    jury_run_id
        The jury run behind the intervals (default: the newest with verdicts).
    actor
        Who asked, for the audit trail.

    Returns
    -------
    DrawPlan

    Examples
    --------
    >>> plan = assign_where_uncertain(session, study, 10)  # doctest: +SKIP
    >>> plan.cells[["model", "benchmark", "n_next", "draw_probability"]]  # doctest: +SKIP
    """
    from medhelm_core.model_scores import allocate_ratings
    from medhelm_core.model_scores.anchored import NOT_RANDOM

    if not 1 <= int(n_ratings) <= MAX_DRAWS:
        raise ValidationError(f"ask for between 1 and {MAX_DRAWS} ratings, got {n_ratings}")
    clinicians = study_clinicians(session, usernames)
    if not clinicians:
        raise ValidationError("no active clinician to give the ratings to")
    ids = [c.id for c in clinicians]
    cells, design = _cells_and_design(session, study, jury_run_id)
    existing = session.exec(
        select(Assignment.item_id, Assignment.user_id, Assignment.draw_probability)
        .where(Assignment.study_id == study.id, Assignment.retest == False)  # noqa: E712 - SQL comparison
    ).all()
    submitted = set(session.exec(
        select(RatingSubmission.item_id, RatingSubmission.rater_id)
        .join(Item, Item.id == RatingSubmission.item_id)
        .where(Item.study_id == study.id, RatingSubmission.retest == False)  # noqa: E712 - SQL comparison
    ).all())
    holders: dict[int, set[int]] = {}
    for item_id, user_id, _ in existing:
        holders.setdefault(item_id, set()).add(user_id)
    pending_draws = {item_id for item_id, _, p in existing if p is not None}

    def takers(item_id: int) -> tuple[list[int], list[int]]:
        """Who can rate the item next: chosen clinicians holding it unrated, and chosen ones not holding it."""
        held = holders.get(item_id, set())
        return ([c for c in ids if c in held and (item_id, c) not in submitted], [c for c in ids if c not in held])

    eligible = design[~design["rated"] & ~design["item_id"].isin(pending_draws)]
    eligible = eligible[[any(takers(i)) for i in eligible["item_id"]]]
    pool = {key: sorted(group["item_id"]) for key, group in eligible.groupby(["model", "benchmark"])}
    cells = cells.assign(n_available=[len(pool.get((m, b), [])) if s != NOT_RANDOM else 0
                                      for m, b, s in zip(cells["model"], cells["benchmark"], cells["status"],
                                                         strict=True)])
    loads = Counter(_open_load_ids(session, study, ids))
    names = {c.id: c.username for c in clinicians}
    if cells["n_available"].sum() == 0:
        return DrawPlan(cells=cells.assign(n_next=0, draw_probability=float("nan")),
                        loads={names[c]: loads[c] for c in ids},
                        note="every item is rated or already drawn: nothing left to draw")
    shared = allocate_ratings(cells, int(n_ratings))
    rng = random.Random(_seed(study, len(pending_draws) + sum(1 for *_, p in existing if p is not None)))
    plan = DrawPlan()
    probabilities = []
    picks: list[tuple[int, float]] = []
    for model, benchmark, k in zip(shared["model"], shared["benchmark"], shared["n_next"], strict=True):
        candidates = pool.get((model, benchmark), [])
        if k <= 0 or not candidates:
            probabilities.append(float("nan"))
            continue
        probability = k / len(candidates)
        probabilities.append(probability)
        picks += [(item, probability) for item in rng.sample(candidates, int(k))]
    rng.shuffle(picks)  # clinicians are handed items in random order, not cell by cell
    held_rows = {(a.item_id, a.user_id): a for a in session.exec(
        select(Assignment).where(Assignment.study_id == study.id, Assignment.retest == False,  # noqa: E712
                                 col(Assignment.item_id).in_([item for item, _ in picks]))).all()}
    for item_id, probability in picks:
        holding, free = takers(item_id)
        # a clinician who holds the item unrated rates it next (no new work); else the least loaded free one
        among = holding or free
        lowest = min(loads[c] for c in among)
        user_id = rng.choice([c for c in among if loads[c] == lowest])
        position = queue_position(study.order_seed, user_id, item_id) - FIRST_IN_QUEUE
        if holding:
            row = held_rows[(item_id, user_id)]
            row.position, row.draw_probability = position, probability
            session.add(row)
            plan.moved += 1
        else:
            session.add(Assignment(study_id=study.id, item_id=item_id, user_id=user_id, position=position,
                                   draw_probability=probability))
            holders.setdefault(item_id, set()).add(user_id)
            loads[user_id] += 1
        plan.new.append((item_id, user_id))
    session.flush()
    plan.cells = shared.assign(draw_probability=probabilities)
    plan.loads = {names[c]: loads[c] for c in ids}
    if len(plan.new) < int(n_ratings):
        plan.note = f"only {len(plan.new)} unrated items could be drawn"
    given = plan.cells[plan.cells["n_next"] > 0]
    record_event(session, AuditAction.assignment_drawn, actor=actor, study_id=study.id, asked=int(n_ratings),
                 drawn=len(plan.new), moved_forward=plan.moved,
                 cells=[{"model": m, "benchmark": b, "drawn": int(k), "probability": float(p)}
                        for m, b, k, p in zip(given["model"], given["benchmark"], given["n_next"],
                                              given["draw_probability"], strict=True)])
    return plan


def _open_load_ids(session: Session, study: Study, user_ids: Sequence[int]) -> dict[int, int]:
    """Per clinician id: their ordinary assignments in ``study`` that they have not rated yet."""
    submitted = select(RatingSubmission.item_id, RatingSubmission.rater_id).distinct().subquery()
    rows = session.exec(
        select(Assignment.user_id, func.count(Assignment.id))
        .outerjoin(submitted,
                   (submitted.c.item_id == Assignment.item_id) & (submitted.c.rater_id == Assignment.user_id))
        .where(Assignment.study_id == study.id, Assignment.retest == False,  # noqa: E712 - SQL comparison
               submitted.c.item_id.is_(None), Assignment.user_id.in_(list(user_ids)))
        .group_by(Assignment.user_id)
    ).all()
    counts = dict(rows)
    return {u: int(counts.get(u, 0)) for u in user_ids}


def _open_loads(session: Session, study: Study, clinicians: Sequence) -> dict[str, int]:  # noqa: ANN001
    loads = _open_load_ids(session, study, [c.id for c in clinicians])
    return {c.username: loads[c.id] for c in clinicians}
