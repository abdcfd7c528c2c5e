"""The Rate page's indexed reads and the assignment in steps give the same answers as before: the same plan, the
same queue order, the same place to resume and to go next, the same counts; and a clinician's submission is not
held up for the whole of an assignment."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest
from sqlalchemy import func, insert, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Assignment, AuditEvent, Item, RatingSkip, RatingSubmission, User, utcnow
from medhelm_core.rating import progress as rp
from medhelm_core.rating import queue as rq
from medhelm_core.rating import rater_actions as ra
from medhelm_core.rating import rater_item as ri
from medhelm_core.rating.assignment import (
    assign_balanced,
    assign_in_steps,
    plan_assignments,
    plan_study,
    queue_position,
)
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import default_rubric
from medhelm_core.studies import get_or_create_study, get_study_by_id, update_settings

SCORES = {"accuracy": 4, "completeness": 3, "clarity": 5}

# sha256 of repr((plan.new, loads, pairs)) made by the planner before it was vectorised (the tree of 6736ad5)
PLANS_BEFORE = {
    (300, 7, 2, 0, 1): "3a52e7b3d0224b88",
    (500, 50, 2, 0, 3): "f95ef01d71bef563",
    (400, 12, 3, 0, 5): "726288db36fa3f62",  # exhaustive search over triples
    (200, 5, 1, 0, 9): "7df5f0c0033d18ca",
    (300, 9, 2, 120, 4): "36caefb05b2aa584",  # with existing assignments
    (150, 6, 4, 0, 2): "686fa3ceefafb949",
    (120, 30, 3, 40, 8): "b3dd886e068dfdf8",  # too many triples: one clinician at a time
}


def _digest(plan) -> str:  # noqa: ANN001 - an AssignmentPlan
    text_ = repr((plan.new, sorted(plan.loads.items()), sorted(plan.pairs.items())))
    return hashlib.sha256(text_.encode()).hexdigest()[:16]


@pytest.mark.parametrize("case", list(PLANS_BEFORE))
def test_the_planner_makes_exactly_the_plans_it_made_before(case):
    n, clinicians, overlap, earlier, seed = case
    existing = plan_assignments(range(earlier), range(100, 100 + clinicians), overlap, seed=seed + 1).new
    plan = plan_assignments(range(n), range(100, 100 + clinicians), overlap, existing=existing, seed=seed)
    assert _digest(plan) == PLANS_BEFORE[case]


def test_the_planner_keeps_partial_items_and_ignores_strangers_as_before():
    existing = plan_assignments(range(150), range(100, 109), 1, seed=21).new + [(5, 999)]
    plan = plan_assignments(range(300), range(100, 109), 2, existing=existing, seed=22)
    assert _digest(plan) == "3baab01e57db42e8"


def build(engine, n_items: int = 24, names=("ann", "bob", "cy"), retest_share: float = 0.3) -> dict[str, Principal]:
    """A study of ``n_items`` items for ``names`` (overlap 2) with test-retest on, so queues hold repeats."""
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "scale")
        s.add_all([Item(study_id=study.id, benchmark="medi_qa", instance_id=str(i), model="m", input_text=f"q{i}",
                        output_text=f"a{i}") for i in range(n_items)])
        users = [add_user(s, name, "clinician", None) for name in names]
        s.flush()
        assign_balanced(s, study, 2)
        update_settings(s, study, retest_share=retest_share, retest_gap=2)
        return {u.username: Principal(u.id, u.username, u.username, "clinician") for u in users}


def scale_study(engine) -> int:
    with Session(engine) as s:
        return s.exec(select(Item.study_id)).first()


def check_same_answers(engine, who: Principal) -> None:
    """Every indexed read against the whole queue read the former way (:func:`rq.queue` and its list helpers)."""
    with Session(engine) as s:
        study = get_study_by_id(s, s.exec(select(Item.study_id)).first())  # the study of build()
        entries = rq.queue(s, who, study)
        assert rq.queue_length(s, who, study) == len(entries)
        assert rq.open_count(s, who, study) == sum(e.open for e in entries)
        assert [rq.entry_at(s, who, study, i) for i in range(len(entries))] == entries
        assert rq.entry_at(s, who, study, len(entries)) is None
        assert rq.first_open_index(s, who, study) == rq.first_open(entries)
        assert [rq.next_open_index(s, who, study, i) for i in range(len(entries) + 1)] == [
            rq.next_open(entries, i) for i in range(len(entries) + 1)]
        (mine,) = [p for p in rp.progress(s, who) if p.study_id == study.id]
        skip_rows = s.exec(select(func.count()).select_from(RatingSkip).where(RatingSkip.rater_id == who.user_id)).one()
        assert (mine.assigned, mine.done, mine.skipped, mine.waiting) == (
            len(entries), sum(e.rated for e in entries), skip_rows, sum(e.open for e in entries))
        for counts in (None, mine):  # counting anew, or with the page's progress
            view = rq.rate_view(s, who, study, None, counts=counts)
            assert (view.length, view.open, view.index, view.all_done) == (
                len(entries), sum(e.open for e in entries), rq.first_open(entries), rq.all_done(entries))
        for index, entry in enumerate(entries):  # the place, its item, rating and skip read in one statement
            view = rq.rate_view(s, who, study, index, revising=True, counts=mine)
            assert (view.index, view.entry) == (index, entry)
            assert view.item == ri.load_item(s, who, study, entry.item_id, retest=entry.retest)


def test_the_indexed_reads_match_the_whole_queue_while_a_clinician_works_through_it(engine):
    people = build(engine)
    ann = people["ann"]
    sid = scale_study(engine)
    check_same_answers(engine, ann)
    with Session(engine) as s:  # resume as the page does: where the indexed reads say
        index = rq.rate_view(s, ann, get_study_by_id(s, sid), None).index
    steps = 0
    while True:
        with Session(engine) as s:
            study = get_study_by_id(s, sid)
            view = rq.rate_view(s, ann, study, index)
            if view.all_done:
                break
            entry = view.entry
        with transaction(engine) as s:
            study = get_study_by_id(s, sid)
            if steps % 5 == 1:
                ra.skip(s, ann, study, entry.item_id, "needs_context", retest=entry.retest)
            else:
                ra.submit(s, ann, study, entry.item_id, SCORES, retest=entry.retest)
        if steps % 7 == 3:  # a revision: the view shows the latest one
            with transaction(engine) as s:
                ra.submit(s, ann, get_study_by_id(s, sid), entry.item_id, {**SCORES, "clarity": 2}, retest=entry.retest)
        if steps % 5 == 4:  # a skipped item rated after all, through an import (the skip stays)
            with transaction(engine) as s:
                skipped = s.exec(select(RatingSkip).where(RatingSkip.rater_id == ann.user_id)).first()
                if skipped is not None:
                    record_rating(s, item=s.get(Item, skipped.item_id), rater=s.get(User, ann.user_id),
                                  rubric=default_rubric(), scores=SCORES, retest=skipped.retest)
        check_same_answers(engine, ann)
        with Session(engine) as s:
            index = rq.next_open_index(s, ann, get_study_by_id(s, sid), view.index)
        steps += 1
        assert steps < 200
    with Session(engine) as s:
        assert any(e.retest for e in rq.queue(s, ann, get_study_by_id(s, sid)))  # repeats were in the walk
        assert s.exec(select(func.max(RatingSubmission.revision))).one() == 2  # and revisions
    check_same_answers(engine, ann)
    check_same_answers(engine, people["bob"])  # another clinician's reads are untouched by ann's work


def test_assigning_in_steps_stores_the_same_assignments_as_one_transaction(engine, tmp_path):
    with transaction(engine) as s:
        one, _ = get_or_create_study(s, "one")
        steps, _ = get_or_create_study(s, "steps")
        steps.order_seed = one.order_seed
        for study in (one, steps):
            s.execute(insert(Item), [{"study_id": study.id, "benchmark": "b", "instance_id": str(i), "model": "m",
                                      "input_text": "q", "output_text": "a", "meta": {}, "created_at": utcnow()}
                                     for i in range(90)])
        for name in ("ann", "bob", "cy", "dee"):
            add_user(s, name, "clinician", None)
        s.flush()
        plan_one = assign_balanced(s, one, 2)
        ids = (one.id, steps.id)
    plan_steps = assign_in_steps(engine, ids[1], 2, step_rows=25)
    assert plan_steps.loads == plan_one.loads and plan_steps.pairs == plan_one.pairs
    with Session(engine) as s:
        def stored(study_id: int) -> list[tuple]:
            first = s.exec(select(func.min(Item.id)).where(Item.study_id == study_id)).one()
            return sorted(s.exec(select(Assignment.item_id - first, Assignment.user_id)
                                 .where(Assignment.study_id == study_id)).all())
        assert stored(ids[1]) == stored(ids[0]) and len(stored(ids[1])) == 180
        seed = get_study_by_id(s, ids[1]).order_seed
        rows = s.exec(select(Assignment).where(Assignment.study_id == ids[1])).all()
        assert all(a.position == queue_position(seed, a.user_id, a.item_id) and not a.retest for a in rows)
        events = s.exec(select(AuditEvent).where(AuditEvent.study_id == ids[1])).all()
        assert [e.details.get("added") for e in events if e.action == "assignment.balanced"] == [180]
    assert assign_in_steps(engine, ids[1], 2).new == []  # a re-run adds nothing


def test_a_failing_step_takes_back_the_steps_already_written(sqlite_engine):
    with transaction(sqlite_engine) as s:
        study, _ = get_or_create_study(s, "fails")
        s.execute(insert(Item), [{"study_id": study.id, "benchmark": "b", "instance_id": str(i), "model": "m",
                                  "input_text": "q", "output_text": "a", "meta": {}, "created_at": utcnow()}
                                 for i in range(100)])
        for name in ("ann", "bob", "cy"):
            add_user(s, name, "clinician", None)
        s.flush()
        study_id = study.id
    with Session(sqlite_engine) as s:
        last_item = plan_study(s, get_study_by_id(s, study_id), 2)[0].new[-1][0]
    with sqlite_engine.begin() as c:  # a real failure in the last of four steps
        c.exec_driver_sql(f"CREATE TRIGGER boom BEFORE INSERT ON assignment WHEN NEW.item_id = {last_item} "
                          "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END")
    with pytest.raises(IntegrityError, match="disk on fire"):
        assign_in_steps(sqlite_engine, study_id, 2, step_rows=50)
    with Session(sqlite_engine) as s:
        assert s.exec(select(func.count()).select_from(Assignment)).one() == 0  # the three steps written are taken back
        assert not s.exec(select(AuditEvent).where(AuditEvent.action == "assignment.balanced")).all()


def test_a_submission_during_an_assignment_is_not_held_up_for_the_whole_assignment(engine):
    """A clinician rates another study while a large assignment is written: on SQLite a submission commits
    between two steps (the assignment is partly there); on PostgreSQL one commits while the assignment's own
    transaction is still open (it holds its insert lock). Either way it never waits for the whole."""
    people = build(engine, n_items=60, names=("ann", "bob"), retest_share=0.0)
    ann = people["ann"]
    sid = scale_study(engine)
    with transaction(engine) as s:
        big, _ = get_or_create_study(s, "big")
        s.execute(insert(Item), [{"study_id": big.id, "benchmark": "b", "instance_id": str(i), "model": "m",
                                  "input_text": "q", "output_text": "a", "meta": {}, "created_at": utcnow()}
                                 for i in range(6000)])
        big_id = big.id
        for name in ("c1", "c2", "c3", "c4"):
            add_user(s, name, "clinician", None)
    with Session(engine) as s:
        entries = rq.queue(s, ann, get_study_by_id(s, sid))
    sqlite = engine.dialect.name == "sqlite"
    seen: list[tuple[float, int]] = []  # (latency, what the assignment looked like right after the commit)
    done = threading.Event()

    def rate() -> None:
        for entry in entries:
            if done.is_set():
                return
            began = time.perf_counter()
            with transaction(engine) as s:
                ra.submit(s, ann, get_study_by_id(s, sid), entry.item_id, SCORES)
            took = time.perf_counter() - began
            with Session(engine) as s:
                if sqlite:
                    state = s.exec(select(func.count()).select_from(Assignment)
                                   .where(Assignment.study_id == big_id)).one()
                else:
                    state = s.execute(text("SELECT count(*) FROM pg_locks WHERE relation = 'assignment'::regclass "
                                           "AND mode = 'RowExclusiveLock' AND pid <> pg_backend_pid()")).scalar_one()
            seen.append((took, state))
            time.sleep(0.005)

    rater = threading.Thread(target=rate)
    rater.start()
    began = time.perf_counter()
    plan = assign_in_steps(engine, big_id, 2, step_rows=1000)
    whole = time.perf_counter() - began
    done.set()
    rater.join()
    assert len(plan.new) == 12_000
    if sqlite:
        during = [took for took, count in seen if 0 < count < 12_000]
    else:
        during = [took for took, locks in seen if locks > 0]
    assert during, f"no submission committed while the assignment was being written ({len(seen)} in {whole:.1f} s)"
    assert max(took for took, _ in seen) < whole
