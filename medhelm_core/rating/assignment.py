"""Give items to clinicians: each item to ``overlap`` distinct clinicians, balanced, with even pairs.

Agreement needs overlap, and ICC needs the same clinicians to meet on many items, so the plan is built
greedily: items in a seeded random order, each open slot of an item filled by one of the least-loaded
clinicians (which keeps loads within one of each other), and among those the one who has shared the
fewest items with the clinicians already on this item (which spreads pairs evenly). Existing assignments
are kept: re-running after adding items or clinicians only fills what is missing.

Each clinician's queue order is a stable pseudo-random rank of (study seed, clinician, item), so the order
is random per clinician, reproducible from the stored seed, and unchanged by later additions.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import (
    RECORDED_RATER,
    Assignment,
    AuditAction,
    Item,
    Rating,
    RatingSubmission,
    Role,
    Study,
    User,
)
from medhelm_core.errors import NotFoundError, ValidationError
from medhelm_core.rating.gold import gold_item_ids

#: exhaustive search over tied clinicians up to this many subsets per item, greedy beyond
MAX_SUBSETS = 2000


@dataclass
class AssignmentPlan:
    """The pairs (item, clinician) to add, and the resulting loads and pair counts."""

    new: list[tuple[int, int]] = field(default_factory=list)
    loads: dict[int, int] = field(default_factory=dict)
    pairs: dict[tuple[int, int], int] = field(default_factory=dict)


def plan_assignments(
    item_ids: Sequence[int],
    clinician_ids: Sequence[int],
    overlap: int,
    existing: Iterable[tuple[int, int]] = (),
    seed: int = 0,
) -> AssignmentPlan:
    """Plan which clinicians get which items (pure; no database).

    Parameters
    ----------
    item_ids, clinician_ids
        The items to cover and the clinicians who may rate them.
    overlap
        How many distinct clinicians each item needs.
    existing
        (item, clinician) pairs already assigned; they are kept and counted.
    seed
        Seeds the item order and the tie-breaks, so a plan is reproducible.

    Returns
    -------
    AssignmentPlan
        ``new`` holds the pairs to add; ``loads`` and ``pairs`` describe the whole design afterwards.

    Examples
    --------
    >>> plan = plan_assignments(range(6), [1, 2, 3], overlap=2)
    >>> sorted(plan.loads.values())
    [4, 4, 4]
    """
    clinicians = list(dict.fromkeys(clinician_ids))
    if overlap < 1:
        raise ValidationError("overlap must be at least 1")
    if overlap > len(clinicians):
        raise ValidationError(
            f"overlap {overlap} needs at least {overlap} clinicians; the study has {len(clinicians)}"
        )
    members = set(clinicians)
    on_item: dict[int, list[int]] = {i: [] for i in item_ids}
    loads = Counter({c: 0 for c in clinicians})
    pairs: Counter[tuple[int, int]] = Counter()
    for item, clinician in existing:
        if item in on_item and clinician in members and clinician not in on_item[item]:
            on_item[item].append(clinician)
            loads[clinician] += 1
    for raters in on_item.values():
        pairs.update(combinations(sorted(raters), 2))

    rng = random.Random(seed)
    order = list(on_item)
    rng.shuffle(order)
    plan = AssignmentPlan()
    for item in order:
        chosen = on_item[item]
        need = overlap - len(chosen)
        if need <= 0:
            continue
        picks = _pick(clinicians, chosen, need, loads, pairs, rng)
        for pick in picks:
            pairs.update(tuple(sorted((pick, o))) for o in chosen)
            chosen.append(pick)
            loads[pick] += 1
            plan.new.append((item, pick))
    plan.loads = dict(loads)
    plan.pairs = {p: pairs[p] for p in combinations(sorted(clinicians), 2)}
    return plan


def _pick(
    clinicians: list[int],
    chosen: list[int],
    need: int,
    loads: Counter,
    pairs: Counter,
    rng: random.Random,
) -> list[int]:
    """The ``need`` clinicians to add to an item: the least loaded (so loads stay within one), and among
    clinicians tied at the cut-off load, the subset that adds the fewest repeated pairs."""
    free = sorted((c for c in clinicians if c not in chosen), key=lambda c: loads[c])
    cutoff = loads[free[need - 1]]
    forced = [c for c in free if loads[c] < cutoff]
    tied = [c for c in free if loads[c] == cutoff]
    rng.shuffle(tied)
    room = need - len(forced)

    def cost(group: tuple[int, ...]) -> int:
        members = [*chosen, *forced, *group]
        return sum(pairs[tuple(sorted(p))] for p in combinations(members, 2))

    if math.comb(len(tied), room) <= MAX_SUBSETS:
        best = min(combinations(tied, room), key=cost)  # first minimum: ties broken by the shuffle
        return [*forced, *best]
    group: list[int] = []
    for _ in range(room):  # too many subsets to try: add one at a time
        pick = min((c for c in tied if c not in group), key=lambda c: cost((*group, c)))
        group.append(pick)
    return [*forced, *group]


def queue_position(seed: int, user_id: int, item_id: int) -> int:
    """A stable pseudo-random rank: the clinician's queue is sorted by it (31 bits: fits an SQL integer)."""
    digest = hashlib.sha256(f"{seed}:{user_id}:{item_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def study_clinicians(session: Session, usernames: Sequence[str] | None = None) -> list[User]:
    """Active clinicians: the named ones (each must exist and be a clinician), else all of them except the
    recorded raters a ratings import created (MedHELM's 17 raters, say: they cannot rate here unless named)."""
    query = select(User).where(User.role == Role.clinician.value, User.is_active == True)  # noqa: E712
    if not usernames:
        return [u for u in session.exec(query.order_by(User.id)).all() if not (u.meta or {}).get(RECORDED_RATER)]
    found = {u.username: u for u in session.exec(query.where(User.username.in_(list(usernames)))).all()}
    missing = [n for n in usernames if n not in found]
    if missing:
        raise NotFoundError(f"no active clinician named {', '.join(repr(n) for n in missing)}")
    return [found[n] for n in usernames]


def assign_balanced(
    session: Session,
    study: Study,
    overlap: int | None = None,
    usernames: Sequence[str] | None = None,
    *,
    actor: Actor = "cli",
) -> AssignmentPlan:
    """Assign the study's items to clinicians (inside the caller's transaction) and store the overlap.

    Keeps every existing assignment; adds only what makes each item reach ``overlap`` clinicians. Gold items
    (:mod:`medhelm_core.rating.gold`) go to every clinician, so that each clinician's gold accuracy can be
    measured. The change is recorded in the audit trail as done by ``actor``.
    """
    previous_overlap = study.overlap
    overlap = overlap or study.overlap
    clinicians = study_clinicians(session, usernames)
    item_ids = list(session.exec(select(Item.id).where(Item.study_id == study.id).order_by(Item.id)).all())
    gold = gold_item_ids(session, study)
    existing = session.exec(
        select(Assignment.item_id, Assignment.user_id).where(
            Assignment.study_id == study.id, Assignment.retest == False  # noqa: E712 - SQL comparison
        )
    ).all()
    ids = [c.id for c in clinicians]
    plan = plan_assignments([i for i in item_ids if i not in gold], ids, overlap, existing, seed=study.order_seed)
    if gold and ids:
        everyone = plan_assignments(sorted(gold), ids, len(ids), existing, seed=study.order_seed)
        plan.new += everyone.new
        plan.loads = {c: plan.loads.get(c, 0) + everyone.loads.get(c, 0) for c in ids}
    for item_id, user_id in plan.new:
        session.add(
            Assignment(study_id=study.id, item_id=item_id, user_id=user_id,
                       position=queue_position(study.order_seed, user_id, item_id))
        )
    study.overlap = overlap
    session.add(study)
    session.flush()
    if plan.new or overlap != previous_overlap:  # a re-run that changes nothing leaves no trail
        record_event(session, AuditAction.assignment_balanced, actor=actor, study_id=study.id, overlap=overlap,
                     added=len(plan.new), clinicians=[c.username for c in clinicians])
    return plan


def reassign(
    session: Session, study: Study, item_id: int, from_username: str, to_username: str, *, actor: Actor = "cli"
) -> Assignment:
    """Move one not-yet-rated assignment from one clinician to another (recorded as done by ``actor``)."""
    source = _user(session, from_username)
    target = _user(session, to_username)
    if target.role != Role.clinician.value or not target.is_active:
        raise ValidationError(f"{to_username} is not an active clinician")
    row = session.exec(
        select(Assignment).where(Assignment.study_id == study.id, Assignment.item_id == item_id,
                                 Assignment.user_id == source.id, Assignment.retest == False)  # noqa: E712
    ).first()
    if row is None:
        raise NotFoundError(f"item {item_id} is not assigned to {from_username} in study {study.name}")
    if session.exec(select(Rating.id).where(Rating.item_id == item_id, Rating.rater_id == source.id)).first():
        raise ValidationError(f"{from_username} has already rated item {item_id}; it stays with them")
    if session.exec(
        select(Assignment.id).where(Assignment.item_id == item_id, Assignment.user_id == target.id)
    ).first():
        raise ValidationError(f"item {item_id} is already assigned to {to_username}")
    row.user_id = target.id
    row.position = queue_position(study.order_seed, target.id, item_id)
    session.add(row)
    session.flush()
    record_event(session, AuditAction.assignment_moved, actor=actor, study_id=study.id, item_id=item_id,
                 from_user=from_username, to_user=to_username)
    return row


def _user(session: Session, username: str) -> User:
    user = session.exec(select(User).where(User.username == username)).first()
    if user is None:
        raise NotFoundError(f"no user named {username!r}")
    return user


@dataclass(frozen=True)
class RaterProgress:
    """One clinician's progress on a study, for the researcher's Raters page."""

    username: str
    display_name: str
    active: bool
    assigned: int
    done: int
    last_submitted: str | None


def rater_progress(session: Session, study: Study) -> list[RaterProgress]:
    """Assigned and done counts per clinician with assignments in ``study`` (researchers only).

    Test-retest repeats count as assignments too, each done once the repeat itself is submitted.
    """
    submitted = (
        select(RatingSubmission.item_id, RatingSubmission.rater_id, RatingSubmission.retest,
               func.max(RatingSubmission.submitted_at).label("last"))
        .group_by(RatingSubmission.item_id, RatingSubmission.rater_id, RatingSubmission.retest)
        .subquery()
    )
    rows = session.exec(
        select(User.username, User.display_name, User.is_active, func.count(Assignment.id),
               func.count(submitted.c.item_id), func.max(submitted.c.last))
        .join(Assignment, Assignment.user_id == User.id)
        .outerjoin(submitted, (submitted.c.item_id == Assignment.item_id) & (submitted.c.rater_id == User.id)
                   & (submitted.c.retest == Assignment.retest))
        .where(Assignment.study_id == study.id)
        .group_by(User.id, User.username, User.display_name, User.is_active)
        .order_by(User.username)
    ).all()
    return [
        RaterProgress(name, display or name, active, assigned, done, last.isoformat() if last else None)
        for name, display, active, assigned, done, last in rows
    ]


def unrated_assignments(session: Session, study: Study, username: str) -> list[Item]:
    """The items of ``study`` assigned to ``username`` that they have not rated yet (these can move)."""
    user = _user(session, username)
    submitted = select(RatingSubmission.item_id).where(RatingSubmission.rater_id == user.id)
    return list(
        session.exec(
            select(Item)
            .join(Assignment, Assignment.item_id == Item.id)
            .where(Assignment.study_id == study.id, Assignment.user_id == user.id, Item.id.not_in(submitted),
                   Assignment.retest == False)  # noqa: E712 - SQL comparison
            .order_by(Item.benchmark, Item.instance_id, Item.model)
        ).all()
    )
