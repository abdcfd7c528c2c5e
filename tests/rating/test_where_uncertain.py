"""Rate these next: the next clinician ratings go where the models' clinician-anchored intervals are widest,
to unrated items drawn at random within each model and benchmark, their probabilities recorded, first in a
queue, loads kept even."""

from __future__ import annotations

import pytest
from sqlmodel import Session, col, select
from support.model_support import insert_jury, rate_first

from medhelm_core.accounts.auth import Principal
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Assignment, AuditEvent, Item, JudgeVerdict, JuryRun, Rating, User
from medhelm_core.demo import DEMO_STUDY
from medhelm_core.errors import ValidationError
from medhelm_core.frames import rating_design_frame
from medhelm_core.rating import queue as rq
from medhelm_core.rating.where_uncertain import assign_where_uncertain
from medhelm_core.studies import get_or_create_study, get_study


def test_only_unrated_items_are_drawn_with_their_probability_and_come_first_in_the_queue(demo_engine):
    rate_first(demo_engine, 6)
    insert_jury(demo_engine)
    with Session(demo_engine) as s:
        rated_before = set(s.exec(select(Rating.item_id)).all())
    with transaction(demo_engine) as s:
        plan = assign_where_uncertain(s, get_study(s, DEMO_STUDY), 8, actor="researcher")
    drawn_items = {item for item, _ in plan.new}
    assert len(plan.new) == 8 and len(drawn_items) == 8 and not drawn_items & rated_before
    with Session(demo_engine) as s:
        study = get_study(s, DEMO_STUDY)
        rows = s.exec(select(Assignment).where(col(Assignment.draw_probability).is_not(None))).all()
        models = {i.id: (i.model, i.benchmark) for i in s.exec(select(Item).where(Item.study_id == study.id)).all()}
        design = rating_design_frame(s, study)
        event = s.exec(select(AuditEvent).where(AuditEvent.action == "assignment.drawn")).one()
        users = {u.id: u for u in s.exec(select(User)).all()}
        queues = {u: rq.queue(s, Principal(u, users[u].username, users[u].username, "clinician"), study)
                  for u in {u for _, u in plan.new}}
    assert {(r.item_id, r.user_id) for r in rows} == set(plan.new)
    # each drawn item's probability is its cell's draws over the unrated items the cell had
    cells = plan.cells.set_index(["model", "benchmark"])
    for row in rows:
        cell = cells.loc[models[row.item_id]]
        assert row.draw_probability == pytest.approx(cell["n_next"] / cell["n_available"])
        assert 0 < row.draw_probability <= 1
    assert set(design.loc[design["drawn"], "item_id"]) == drawn_items
    assert event.details["drawn"] == 8 and event.actor == "researcher"
    for user, entries in queues.items():
        open_items = [e.item_id for e in entries if not e.rated]
        mine = {item for item, u in plan.new if u == user}
        assert set(open_items[: len(mine)]) == mine  # the drawn ones come before everything else still open
    # every demo item already waits with two clinicians, so drawing only moves them forward: no new work
    assert plan.moved == 8


def make_study(engine, n_items: int = 10) -> None:
    """A study of 2 models x 2 benchmarks x ``n_items``, a jury on every item, four clinicians, nothing assigned."""
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "next")
        for name in ("c1", "c2", "c3", "c4"):
            add_user(s, name, "clinician", f"{name}-password-ok")
        run = JuryRun(study_id=study.id, name="jury", source="litellm", config={}, config_hash="aa" * 32,
                      status="done")
        s.add(run)
        s.flush()
        for bench in ("b1", "b2"):
            for model in ("m1", "m2"):
                for i in range(n_items):
                    item = Item(study_id=study.id, benchmark=bench, instance_id=str(i), model=model, input_text="q",
                                output_text=f"a{i}", reference_text="r")
                    s.add(item)
                    s.flush()
                    s.add(JudgeVerdict(jury_run_id=run.id, item_id=item.id, judge="j", status="ok",
                                       scores={"accuracy": 1 + i % 5, "completeness": 3, "clarity": 4}))


def test_new_assignments_keep_the_clinicians_loads_within_one(engine):
    make_study(engine)
    with transaction(engine) as s:
        first = assign_where_uncertain(s, get_study(s, "next"), 10)
    assert sorted(first.loads.values()) == [2, 2, 3, 3] and first.moved == 0
    with transaction(engine) as s:
        second = assign_where_uncertain(s, get_study(s, "next"), 6)
    assert sorted(second.loads.values()) == [4, 4, 4, 4]
    assert not {i for i, _ in first.new} & {i for i, _ in second.new}  # an item waiting to be rated is not drawn again
    # every cell starts with no interval: the first ratings spread over all four model x benchmark cells
    assert (first.cells["n_next"] > 0).sum() == 4


def test_asking_for_nothing_or_having_no_clinician_is_refused(sqlite_engine):
    engine = sqlite_engine
    make_study(engine)
    with transaction(engine) as s, pytest.raises(ValidationError, match="between 1 and"):
        assign_where_uncertain(s, get_study(s, "next"), 0)
    with transaction(engine) as s:
        for user in s.exec(select(User)).all():
            user.is_active = False
            s.add(user)
    with transaction(engine) as s, pytest.raises(ValidationError, match="no active clinician"):
        assign_where_uncertain(s, get_study(s, "next"), 3)
