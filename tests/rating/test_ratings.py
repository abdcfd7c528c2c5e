"""Ratings keep every revision, refuse incomplete or off-scale scores, and never write twice."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, Rating, RatingSubmission
from medhelm_core.errors import ValidationError
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import default_rubric
from medhelm_core.studies import get_or_create_study

RUBRIC = default_rubric()


@pytest.fixture
def setup(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        item = Item(study_id=study.id, benchmark="b", instance_id="1", model="m", input_text="q", output_text="a")
        s.add(item)
        rater = add_user(s, "doc", "clinician", None)
    return engine, item, rater


def test_a_revision_keeps_the_old_version(setup):
    engine, item, rater = setup
    with transaction(engine) as s:
        record_rating(s, item=item, rater=rater, rubric=RUBRIC, scores={"accuracy": 4, "completeness": 3, "clarity": 5})
    with transaction(engine) as s:
        record_rating(s, item=item, rater=rater, rubric=RUBRIC, scores={"accuracy": 2, "completeness": 3, "clarity": 5},
                      comment="missed the dose error")
    with Session(engine) as s:
        history = s.exec(select(RatingSubmission).order_by(RatingSubmission.revision)).all()
        current = {r.criterion: r.score for r in s.exec(select(Rating)).all()}
    assert [h.revision for h in history] == [1, 2]
    assert history[0].scores["accuracy"] == 4 and history[1].scores["accuracy"] == 2
    assert current == {"accuracy": 2, "completeness": 3, "clarity": 5}


def test_the_same_request_never_writes_twice(setup):
    engine, item, rater = setup
    for _ in range(2):
        with transaction(engine) as s:
            record_rating(s, item=item, rater=rater, rubric=RUBRIC,
                          scores={"accuracy": 4, "completeness": 3, "clarity": 5}, request_id="click-1")
    with Session(engine) as s:
        assert len(s.exec(select(RatingSubmission)).all()) == 1


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ({"accuracy": 4, "completeness": 3}, "Clarity left empty"),
        ({"accuracy": 6, "completeness": 3, "clarity": 5}, "outside the scale 1 to 5"),
        ({"accuracy": 3.5, "completeness": 3, "clarity": 5}, "not a whole number"),
        ({"accuracy": 3, "completeness": 3, "clarity": 5, "empathy": 2}, "not in rubric"),
    ],
)
def test_bad_scores_are_refused_and_nothing_is_written(setup, scores, message):
    engine, item, rater = setup
    with pytest.raises(ValidationError, match=message):
        with transaction(engine) as s:
            record_rating(s, item=item, rater=rater, rubric=RUBRIC, scores=scores)
    with Session(engine) as s:
        assert s.exec(select(RatingSubmission)).all() == []


def test_a_flag_allows_leaving_scores_out(setup):
    engine, item, rater = setup
    with transaction(engine) as s:
        sub, written = record_rating(s, item=item, rater=rater, rubric=RUBRIC, scores={}, flag="unreadable")
    assert written and sub.flag == "unreadable"
