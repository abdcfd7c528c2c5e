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

import functools
import hashlib
import math
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations

import numpy as np
from sqlalchemy import delete, func, insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.engine import transaction
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
    utcnow,
)
from medhelm_core.errors import NotFoundError, ValidationError
from medhelm_core.rating.gold import gold_item_ids

#: exhaustive search over tied clinicians up to this many subsets per item, greedy beyond
MAX_SUBSETS = 2000
#: assignments per transaction in :func:`assign_in_steps` (about 0.1 s of SQLite's write lock each)
STEP_ROWS = 10_000
#: seconds between two steps on SQLite, for a clinician's submission waiting for the lock
STEP_PAUSE = 0.02


@dataclass
class AssignmentPlan:
    """The pairs (item, clinician) to add, and the resulting loads and pair counts."""

    new: list[tuple[int, int]] = field(default_factory=list)
    loads: dict[int, int] = field(default_factory=dict)
    pairs: dict[tuple[int, int], int] = field(default_factory=dict)
    #: how many ordinary assignments the study had before (set by :func:`plan_study`)
    kept: int = 0


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
    # Clinicians are handled by their place in ``clinicians``: loads a vector, pair counts a matrix.
    place = {c: k for k, c in enumerate(clinicians)}
    on_item: dict[int, list[int]] = {i: [] for i in item_ids}
    loads = np.zeros(len(clinicians), dtype=np.int64)
    pairs = np.zeros((len(clinicians), len(clinicians)), dtype=np.int64)
    for item, clinician in existing:
        k = place.get(clinician)
        if item in on_item and k is not None and k not in on_item[item]:
            on_item[item].append(k)
            loads[k] += 1
    for raters in on_item.values():
        for a, b in combinations(raters, 2):
            pairs[a, b] += 1
            pairs[b, a] += 1

    rng = random.Random(seed)
    order = list(on_item)
    rng.shuffle(order)
    plan = AssignmentPlan()
    for item in order:
        chosen = on_item[item]
        need = overlap - len(chosen)
        if need <= 0:
            continue
        for pick in _pick(chosen, need, loads, pairs, rng):
            for other in chosen:
                pairs[pick, other] += 1
                pairs[other, pick] += 1
            chosen.append(pick)
            loads[pick] += 1
            plan.new.append((item, clinicians[pick]))
    plan.loads = {c: int(loads[k]) for k, c in enumerate(clinicians)}
    ranked = sorted(clinicians)
    plan.pairs = {(a, b): int(pairs[place[a], place[b]]) for a, b in combinations(ranked, 2)}
    return plan


def _pick(chosen: list[int], need: int, loads: np.ndarray, pairs: np.ndarray, rng: random.Random) -> list[int]:
    """The ``need`` clinicians (places) to add to an item: the least loaded (so loads stay within one), and among
    clinicians tied at the cut-off load, the subset that adds the fewest repeated pairs.

    The cost of a subset is the number of earlier shared items over all pairs it forms with the item's
    clinicians and within itself; the first subset of least cost in ``combinations`` order wins (ties broken by
    the shuffle of the tied clinicians). Computed on the pair matrix, a whole family of subsets at once.
    """
    free_mask = np.ones(len(loads), dtype=bool)
    free_mask[chosen] = False
    free = np.flatnonzero(free_mask)
    by_load = free[np.argsort(loads[free], kind="stable")]
    cutoff = loads[by_load[need - 1]]
    forced = by_load[loads[by_load] < cutoff].tolist()
    tied = by_load[loads[by_load] == cutoff].tolist()
    rng.shuffle(tied)
    room = need - len(forced)
    if room == 0:
        return forced
    fixed = [*chosen, *forced]
    # what each tied clinician adds with the clinicians already on the item
    rows = pairs[tied]
    base = rows[:, fixed].sum(axis=1) if fixed else np.zeros(len(tied), dtype=np.int64)
    if room == 1:
        return [*forced, tied[int(np.argmin(base))]]
    if math.comb(len(tied), room) <= MAX_SUBSETS:
        among = rows[:, tied]
        if room == 2:
            first, second = _upper_pairs(len(tied))
            best = int(np.argmin(base[first] + base[second] + among[first, second]))
            return [*forced, tied[first[best]], tied[second[best]]]
        groups = np.array(list(combinations(range(len(tied)), room)))
        cost = base[groups].sum(axis=1)
        for a, b in combinations(range(room), 2):
            cost += among[groups[:, a], groups[:, b]]
        return [*forced, *(tied[k] for k in groups[int(np.argmin(cost))])]
    group: list[int] = []  # too many subsets to try: add one at a time
    cost = base.astype(np.float64)
    for _ in range(room):
        best = int(np.argmin(cost))
        group.append(best)
        cost += pairs[tied, tied[best]]
        cost[group] = np.inf
    return [*forced, *(tied[k] for k in group)]


@functools.cache
def _upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (i, j), i < j, of ``range(n)`` in the order of ``itertools.combinations``."""
    return np.triu_indices(n, 1)


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


def plan_study(
    session: Session, study: Study, overlap: int | None = None, usernames: Sequence[str] | None = None
) -> tuple[AssignmentPlan, list[User], int]:
    """What :func:`assign_balanced` would add to ``study`` now, the clinicians and the overlap (reads only).

    Reading takes no write lock (SQLite in WAL mode lets the clinicians write meanwhile), so the seconds of
    planning a large study never hold up a submission.
    """
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
    plan.kept = len(existing)
    return plan, clinicians, overlap


def _insert(session: Session, study: Study, pairs: Sequence[tuple[int, int]], created_at: datetime) -> None:
    """Insert the (item, clinician) pairs as assignments in bulk: COPY on PostgreSQL, one executemany on SQLite
    (one ORM object each made the ORM's flush most of the time at 200,000 rows)."""
    if not pairs:
        return
    rows = [(study.id, item_id, user_id, False, queue_position(study.order_seed, user_id, item_id), created_at)
            for item_id, user_id in pairs]
    columns = ("study_id", "item_id", "user_id", "retest", "position", "created_at")
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        cursor = connection.connection.driver_connection.cursor()  # psycopg 3, in this session's transaction
        with cursor.copy(f"COPY {Assignment.__tablename__} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        return
    connection.execute(insert(Assignment.__table__), [dict(zip(columns, row, strict=True)) for row in rows])


def _finish(session: Session, study: Study, overlap: int, plan: AssignmentPlan, clinicians: list[User],
            actor: Actor) -> None:
    """Store the overlap and, when something changed, the audit event."""
    previous_overlap = study.overlap
    study.overlap = overlap
    session.add(study)
    session.flush()
    if plan.new or overlap != previous_overlap:  # a re-run that changes nothing leaves no trail
        record_event(session, AuditAction.assignment_balanced, actor=actor, study_id=study.id, overlap=overlap,
                     added=len(plan.new), clinicians=[c.username for c in clinicians])


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

    The plan is made before the first write, so on SQLite the write lock is held from the bulk insert to the
    caller's commit, not during the planning. For a study that clinicians are rating right now, prefer
    :func:`assign_in_steps`, which never holds the lock for more than one step.
    """
    plan, clinicians, overlap = plan_study(session, study, overlap, usernames)
    _insert(session, study, plan.new, utcnow())
    _finish(session, study, overlap, plan, clinicians, actor)
    return plan


def assign_in_steps(
    engine: Engine,
    study_id: int,
    overlap: int | None = None,
    usernames: Sequence[str] | None = None,
    *,
    actor: Actor = "cli",
    step_rows: int = STEP_ROWS,
) -> AssignmentPlan:
    """:func:`assign_balanced` for a study in use: planned with no lock held, then written in steps of
    ``step_rows`` assignments on SQLite, each step a short transaction of its own, so a clinician's submission
    (or the session check of a page run, which writes too) waits for one step at most, not for the whole
    assignment: SQLite has one writer at a time. PostgreSQL gets one transaction: its inserts take no lock
    that a submission waits for (a submission's own retest assignment has another key), so there the whole
    assignment is atomic.

    On SQLite, all or nothing in effect: the last step also checks that nobody else assigned in this study
    meanwhile and stores the overlap and the audit event. If any step fails, the steps already written are
    taken back (deleted by the time stamp they share) before the error is raised: only an assignment a
    clinician has already rated in those seconds stays (it holds a rating), and a re-run fills in the rest.
    The trade-off: while the steps land, a clinician may see their queue grow, and a failure after a rating
    leaves that one assignment in place, where one transaction would have shown all of it at once or none.
    """
    with Session(engine) as session:
        study = session.get(Study, study_id)
        if study is None:
            raise NotFoundError(f"no study with id {study_id}")
        plan, clinicians, overlap = plan_study(session, study, overlap, usernames)
    created_at = utcnow()
    if engine.dialect.name != "sqlite":
        step_rows = max(len(plan.new), 1)  # PostgreSQL's readers and writers do not wait for an insert: one step
    steps = [plan.new[k:k + step_rows] for k in range(0, len(plan.new), step_rows)] or [[]]
    try:
        for number, step in enumerate(steps, start=1):
            with transaction(engine) as session:
                study = session.get(Study, study_id)
                _insert(session, study, step, created_at)
                if number == len(steps):
                    _check_alone(session, study, plan.kept + len(plan.new))
                    _finish(session, study, overlap, plan, clinicians, actor)
            if number < len(steps) and engine.dialect.name == "sqlite":
                time.sleep(STEP_PAUSE)  # let a waiting writer in before the next step takes the lock again
    except BaseException:
        if plan.new:
            _take_back(engine, study_id, created_at)
        raise
    return plan


def _check_alone(session: Session, study: Study, expected: int) -> None:
    """Refuse (so the steps are taken back) when another assignment of the study ran at the same time."""
    stored = session.exec(
        select(func.count(Assignment.id)).where(Assignment.study_id == study.id,
                                                Assignment.retest == False)  # noqa: E712 - SQL comparison
    ).one()
    if stored != expected:
        raise ValidationError(f"study {study.name} was assigned by someone else at the same time "
                              f"({stored} assignments where {expected} were expected); nothing was added, try again")


def _take_back(engine: Engine, study_id: int, created_at: datetime) -> None:
    """Delete the assignments written by a failed :func:`assign_in_steps` run, except those rated meanwhile."""
    rated = select(RatingSubmission.id).where(RatingSubmission.item_id == Assignment.item_id,
                                              RatingSubmission.rater_id == Assignment.user_id)
    with transaction(engine) as session:
        session.execute(
            delete(Assignment)
            .where(Assignment.study_id == study_id, Assignment.created_at == created_at,
                   Assignment.retest == False, ~rated.exists())  # noqa: E712 - SQL comparison
            .execution_options(synchronize_session=False)
        )


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
