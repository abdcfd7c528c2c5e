"""A skip: an assigned, unrated item set aside with a reason; not a rating, out of the open queue, removed by a
later rating, refused for an item already rated or not assigned."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Assignment, Item, Rating, RatingSkip
from medhelm_core.errors import AccessDenied, ValidationError
from medhelm_core.rating import progress as rp
from medhelm_core.rating import queue as rq
from medhelm_core.rating import rater_actions as ra
from medhelm_core.rating import rater_item as ri
from medhelm_core.studies import get_or_create_study

FINE = {"accuracy": 4, "completeness": 4, "clarity": 4}


@pytest.fixture
def queue_of_two(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        items = [Item(study_id=study.id, benchmark="b", instance_id=str(i), model="m", input_text="q",
                      output_text="a") for i in range(3)]
        s.add_all(items)
        doc = add_user(s, "doc", "clinician", None)
        s.flush()
        for position, item in enumerate(items[:2]):
            s.add(Assignment(study_id=study.id, item_id=item.id, user_id=doc.id, position=position))
        who = Principal(doc.id, doc.username, doc.display_name, doc.role)
    return engine, study, who, [i.id for i in items]


def test_a_skip_leaves_the_open_queue_counts_as_skipped_and_a_rating_removes_it(queue_of_two):
    engine, study, who, (first, second, _) = queue_of_two
    with transaction(engine) as s:
        assert ra.skip(s, who, study, first, "needs_context", "  no labs given  ") is True
    with transaction(engine) as s:
        assert ra.skip(s, who, study, first, "needs_context", "no labs given") is False  # a double click
        [progress] = rp.progress(s, who)
        entries = rq.queue(s, who, study)
    assert (progress.done, progress.skipped, progress.handled, progress.assigned) == (0, 1, 1, 2)
    assert [(e.item_id, e.open) for e in entries] == [(first, False), (second, True)]
    assert rq.first_open(entries) == 1 and not rq.all_done(entries)
    with Session(engine) as s:
        skip = s.exec(select(RatingSkip)).one()
        assert (skip.reason, skip.note) == ("needs_context", "no labs given") and not s.exec(select(Rating)).all()
    with transaction(engine) as s:
        ra.submit(s, who, study, first, FINE)
        ra.submit(s, who, study, second, FINE)
        [progress] = rp.progress(s, who)
        assert rq.all_done(rq.queue(s, who, study))
        assert ri.load_item(s, who, study, first).skip_reason is None
    assert (progress.done, progress.skipped) == (2, 0)
    with Session(engine) as s:
        assert s.exec(select(RatingSkip)).all() == []


@pytest.mark.parametrize(("reason", "note", "message"), [
    ("bored", "", "unknown skip reason 'bored'"),
    ("other", " ", "please say in the note why you skip this item"),
    ("other", "x" * (ra.MAX_SKIP_NOTE + 1), "at most 2000 are kept"),
])
def test_a_skip_needs_a_known_reason_and_other_needs_a_note(queue_of_two, reason, note, message):
    engine, study, who, (first, _, _) = queue_of_two
    with pytest.raises(ValidationError, match=message), transaction(engine) as s:
        ra.skip(s, who, study, first, reason, note)
    with Session(engine) as s:
        assert s.exec(select(RatingSkip)).all() == []


def test_a_rated_or_unassigned_item_cannot_be_skipped(queue_of_two):
    engine, study, who, (first, _, unassigned) = queue_of_two
    with transaction(engine) as s:
        ra.submit(s, who, study, first, FINE)
    with pytest.raises(ValidationError, match="revise your rating instead"), transaction(engine) as s:
        ra.skip(s, who, study, first, "outside_expertise")
    with pytest.raises(AccessDenied), transaction(engine) as s:
        ra.skip(s, who, study, unassigned, "outside_expertise")
