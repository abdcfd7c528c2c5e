"""The review list's frame: each clinician's newest word on an item (a flag withdrawn in a revision is gone), skips
with their reasons, unsafe first; on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest

from medhelm_core.accounts.auth import Principal
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Assignment, Item
from medhelm_core.frames import filter_review, review_frame
from medhelm_core.rating import rater_actions as ra
from medhelm_core.studies import get_or_create_study, get_study

FINE = {"accuracy": 4, "completeness": 4, "clarity": 4}


@pytest.fixture
def said(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        items = [Item(study_id=study.id, benchmark=b, instance_id=str(i), model="m", input_text="q", output_text="a")
                 for i, b in enumerate(["b1", "b1", "b2", "b2"])]
        s.add_all(items)
        users = [add_user(s, name, "clinician", None) for name in ("ann", "bob")]
        s.flush()
        for user in users:
            for position, item in enumerate(items):
                s.add(Assignment(study_id=study.id, item_id=item.id, user_id=user.id, position=position))
        ann, bob = (Principal(u.id, u.username, u.display_name, u.role) for u in users)
        ids = [i.id for i in items]
        ra.submit(s, ann, study, ids[0], {"accuracy": 1}, comment="wrong drug", flag="unsafe")
        ra.submit(s, ann, study, ids[1], FINE, flag="unsafe")
        ra.submit(s, ann, study, ids[1], FINE)  # the revision withdraws the flag: no longer listed
        ra.submit(s, bob, study, ids[2], FINE, comment="fine, but long")
        ra.skip(s, bob, study, ids[3], "other", "I wrote this answer")
    return engine, ids


def test_newest_words_only_unsafe_first_then_skips_then_comments(said):
    engine, ids = said
    with transaction(engine) as s:
        frame = review_frame(s, get_study(s, "s"))
    assert list(frame["kind"]) == ["unsafe", "skip", "comment"]
    assert list(frame["item_id"]) == [ids[0], ids[3], ids[2]]
    assert list(frame["clinician"]) == ["ann", "bob", "bob"]
    assert list(frame["reason"]) == ["", "other", ""] and frame["comment"].iloc[1] == "I wrote this answer"
    assert frame["score_accuracy"].iloc[0] == 1 and not frame["repeat"].any()
    assert list(filter_review(frame, benchmarks=["b2"], kinds=["skip"])["item_id"]) == [ids[3]]


def test_a_study_with_nothing_said_gives_an_empty_frame_with_the_columns(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "quiet")
        frame = review_frame(s, study)
    assert frame.empty and {"kind", "item_id", "clinician", "comment", "reason"} <= set(frame.columns)
