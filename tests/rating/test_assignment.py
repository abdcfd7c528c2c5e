"""Assignment: every item to `overlap` distinct clinicians, loads within one, pairs even, stable on rerun."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlmodel import Session, select

from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Assignment, Item
from medhelm_core.errors import ValidationError
from medhelm_core.rating.assignment import assign_balanced, plan_assignments, queue_position, reassign
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import default_rubric
from medhelm_core.studies import get_or_create_study


def check_design(plan, items, clinicians, overlap, existing=()):
    per_item: dict[int, list[int]] = {i: [] for i in items}
    for item, clinician in [*existing, *plan.new]:
        per_item[item].append(clinician)
    assert all(len(v) == overlap and len(set(v)) == overlap for v in per_item.values())
    return per_item


@settings(max_examples=150, deadline=None)
@given(n_items=st.integers(1, 120), n_clinicians=st.integers(1, 12), overlap=st.integers(1, 4),
       seed=st.integers(0, 2**31))
def test_fresh_designs_cover_every_item_with_loads_within_one(n_items, n_clinicians, overlap, seed):
    if overlap > n_clinicians:
        with pytest.raises(ValidationError, match="needs at least"):
            plan_assignments(range(n_items), range(n_clinicians), overlap, seed=seed)
        return
    plan = plan_assignments(range(n_items), range(n_clinicians), overlap, seed=seed)
    check_design(plan, range(n_items), range(n_clinicians), overlap)
    assert max(plan.loads.values()) - min(plan.loads.values()) <= 1
    assert sum(plan.loads.values()) == n_items * overlap
    if overlap >= 2 and n_clinicians >= 2:
        counts = list(plan.pairs.values())
        # Pairs share items evenly up to what a greedy design allows on tiny studies; see the test below.
        assert max(counts) - min(counts) <= 3


@settings(max_examples=100, deadline=None)
@given(first=st.integers(1, 60), added=st.integers(0, 60), n_clinicians=st.integers(2, 8),
       overlap=st.integers(1, 2), seed=st.integers(0, 1000))
def test_adding_items_keeps_existing_assignments_and_balance(first, added, n_clinicians, overlap, seed):
    before = plan_assignments(range(first), range(n_clinicians), overlap, seed=seed)
    after = plan_assignments(range(first + added), range(n_clinicians), overlap, existing=before.new, seed=seed)
    assert all(item >= first for item, _ in after.new)  # nothing old is moved or repeated
    check_design(after, range(first + added), range(n_clinicians), overlap, existing=before.new)
    assert max(after.loads.values()) - min(after.loads.values()) <= 1


@pytest.mark.parametrize(("n_items", "n_clinicians", "overlap"), [(48, 3, 2), (100, 5, 2), (100, 7, 3), (2000, 12, 3)])
def test_typical_studies_have_near_perfectly_even_pairs(n_items, n_clinicians, overlap):
    plan = plan_assignments(range(n_items), range(n_clinicians), overlap, seed=11)
    counts = list(plan.pairs.values())
    assert max(counts) - min(counts) <= 2 and max(plan.loads.values()) - min(plan.loads.values()) <= 1


def test_a_new_clinician_takes_the_new_work():
    before = plan_assignments(range(30), [1, 2, 3], 2, seed=3)
    after = plan_assignments(range(45), [1, 2, 3, 4], 2, existing=before.new, seed=3)
    assert after.loads[4] >= 10 and len(after.new) == 30


def test_queue_order_is_random_per_clinician_and_reproducible():
    order_a = sorted(range(50), key=lambda i: queue_position(7, 1, i))
    order_b = sorted(range(50), key=lambda i: queue_position(7, 2, i))
    assert order_a != order_b and order_a == sorted(range(50), key=lambda i: queue_position(7, 1, i))


@pytest.fixture
def study_with_clinicians(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        for i in range(12):
            s.add(Item(study_id=study.id, benchmark="b", instance_id=str(i), model="m", input_text="q",
                       output_text="a"))
        for name in ("c1", "c2", "c3", "c4"):
            add_user(s, name, "clinician", None)
        add_user(s, "boss", "researcher", None)
    return engine, study


def test_assign_balanced_stores_the_plan_and_reruns_add_nothing(study_with_clinicians):
    engine, study = study_with_clinicians
    with transaction(engine) as s:
        plan = assign_balanced(s, study, overlap=2)
    assert len(plan.new) == 24 and set(plan.loads.values()) == {6}
    with transaction(engine) as s:
        assert assign_balanced(s, study, overlap=2).new == []
    with Session(engine) as s:
        rows = s.exec(select(Assignment)).all()
    assert len(rows) == 24 and {r.user_id for r in rows}.isdisjoint({5})  # the researcher gets nothing


def test_reassign_moves_unrated_items_only(study_with_clinicians):
    engine, study = study_with_clinicians
    with transaction(engine) as s:
        assign_balanced(s, study, overlap=1, usernames=["c1", "c2"])
    with Session(engine) as s:
        rows = s.exec(select(Assignment).where(Assignment.user_id == 1).order_by(Assignment.item_id)).all()
    first, second = rows[0].item_id, rows[1].item_id
    with transaction(engine) as s:
        reassign(s, study, first, "c1", "c3")
    with transaction(engine) as s:
        from medhelm_core.db.models import User

        record_rating(s, item=s.get(Item, second), rater=s.get(User, 1), rubric=default_rubric(),
                      scores={"accuracy": 3, "completeness": 3, "clarity": 3})
    with pytest.raises(ValidationError, match="already rated"):
        with transaction(engine) as s:
            reassign(s, study, second, "c1", "c3")
    with pytest.raises(ValidationError, match="not an active clinician"):
        with transaction(engine) as s:
            reassign(s, study, rows[2].item_id, "c1", "boss")



def test_the_raters_of_an_imported_study_get_work_only_when_named(sqlite_engine):
    """MedHELM's 17 recorded raters (no accounts here) never receive the demo study's items by default."""
    from medhelm_core.demo import seed_demo
    from medhelm_core.rating.assignment import study_clinicians
    from medhelm_core.studies import get_study

    seed_demo(sqlite_engine)
    with transaction(sqlite_engine) as s:
        demo_clinicians = {u.id: u.username for u in study_clinicians(s)}
        plan = assign_balanced(s, get_study(s, "demo"), overlap=2)
        named = [u.username for u in study_clinicians(s, ["clinician_01"])]
    assert sorted(demo_clinicians.values()) == ["clinician1", "clinician2", "clinician3"]
    assert set(plan.loads) == set(demo_clinicians) and named == ["clinician_01"]
