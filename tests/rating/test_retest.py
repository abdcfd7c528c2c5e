"""Test-retest: rated items come back later, unannounced, never twice in a row, and never as a second rater."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.accounts.users import add_user
from medhelm_core.agreement.pairs import most_shared_pair
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.migrate import upgrade_database
from medhelm_core.db.models import Assignment, Item, Rating, RatingSubmission
from medhelm_core.errors import ValidationError
from medhelm_core.frames import clinician_ratings_frame
from medhelm_core.rating import progress as rp
from medhelm_core.rating import queue as rq
from medhelm_core.rating import rater_actions as ra
from medhelm_core.rating import rater_item as ri
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.rating.quality import study_rater_quality
from medhelm_core.rating.retest import chosen_for_retest, retest_pairs
from medhelm_core.studies import get_or_create_study, get_study, get_study_by_id, update_settings

SCORES = {"accuracy": 4, "completeness": 3, "clarity": 5}


def build(engine, n_items: int = 24, clinicians: tuple[str, ...] = ("doc",), share: float = 0.5, gap: int = 3,
          overlap: int = 1) -> dict[str, Principal]:
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "retest")
        study.order_seed = 20251204  # which items come back is drawn from the seed: the same draw in every run
        for i in range(n_items):
            s.add(Item(study_id=study.id, benchmark="medi_qa", instance_id=str(i), model="m", input_text=f"q{i}",
                       output_text=f"a{i}"))
        users = [add_user(s, name, "clinician", None) for name in clinicians]
        s.flush()
        assign_balanced(s, study, overlap)
        update_settings(s, study, retest_share=share, retest_gap=gap)
        return {u.username: Principal(u.id, u.username, u.username, "clinician") for u in users}


def study_id(engine) -> int:
    with Session(engine) as s:
        return get_study(s, "retest").id


def rate_through(engine, who: Principal, scores_for=lambda item, retest: SCORES, skip_every: int = 0,
                 shown: list[tuple[int, bool]] | None = None) -> list[tuple[int, bool]]:
    """Work through the queue as the Rate page does: start at the first open item, and after each submission go
    where the page goes (:func:`rating_queue.next_open`). ``skip_every`` presses Next (leaving an item unrated)
    before every n-th submission. Returns the (item, retest) submitted, in order; ``shown`` collects every
    item displayed, skipped ones included."""
    sid = study_id(engine)
    shown = [] if shown is None else shown
    submitted: list[tuple[int, bool]] = []
    with Session(engine) as s:
        entries = rq.queue(s, who, get_study_by_id(s, sid))
    index = rq.first_open(entries)
    for step in range(1000):
        if all(e.rated for e in entries):
            break
        shown.append((entries[index].item_id, entries[index].retest))
        if skip_every and step % skip_every == skip_every - 1 and index + 1 < len(entries):
            index += 1  # Next
            shown.append((entries[index].item_id, entries[index].retest))
        entry = entries[index]
        with transaction(engine) as s:
            ra.submit(s, who, get_study_by_id(s, sid), entry.item_id, scores_for(entry.item_id, entry.retest),
                      retest=entry.retest)
        submitted.append((entry.item_id, entry.retest))
        with Session(engine) as s:
            entries = rq.queue(s, who, get_study_by_id(s, sid))
        index = rq.next_open(entries, index)
    return submitted


def test_chosen_items_come_back_later_in_the_queue_and_never_twice_in_a_row(engine):
    who = build(engine)["doc"]
    shown = rate_through(engine, who)
    repeats = [item for item, retest in shown if retest]
    assert 5 <= len(repeats) <= 19  # about half of 24, each decided by a stable draw
    assert all(a[0] != b[0] for a, b in zip(shown, shown[1:], strict=False))
    for item in repeats:
        first, again = shown.index((item, False)), shown.index((item, True))
        others_left = sum(1 for i, r in shown[first + 1 :] if not r) if first + 1 < len(shown) else 0
        assert again - first - 1 >= min(3, others_left)  # the gap, or every other item left
    with Session(engine) as s:
        queue = rq.queue(s, who, get_study(s, "retest"))
    assert all(a.item_id != b.item_id for a, b in zip(queue, queue[1:], strict=False))


def test_the_items_that_come_back_follow_the_studys_share_and_are_reproducible():
    drawn = [chosen_for_retest(1234, 7, item, 0.1) for item in range(5000)]
    assert 0.08 < sum(drawn) / len(drawn) < 0.12
    assert drawn == [chosen_for_retest(1234, 7, item, 0.1) for item in range(5000)]
    assert not any(chosen_for_retest(1234, 7, item, 0.0) for item in range(100))


def test_a_repeat_is_never_counted_as_a_second_rater(engine):
    people = build(engine, clinicians=("doc", "nurse"), overlap=1)
    for who in people.values():
        rate_through(engine, who, scores_for=lambda item, retest: {"accuracy": 2 if retest else 4,
                                                                    "completeness": 3, "clarity": 5})
    with Session(engine) as s:
        study = get_study(s, "retest")
        current = clinician_ratings_frame(s, study)
        repeats = s.exec(select(RatingSubmission).where(RatingSubmission.retest == True)).all()  # noqa: E712
        ratings = s.exec(select(Rating)).all()
    assert repeats, "the study should have had repeats"
    assert not current.duplicated(["item_id", "rater_id", "criterion"]).any()
    assert set(current["score"][current["criterion"] == "accuracy"]) == {4.0}  # the repeat changed nothing
    assert len(ratings) == 24 * 3  # overlap 1: one clinician per item, three criteria
    assert most_shared_pair(current[["rater_id", "item_id"]]) is None  # no item has two raters


def test_a_repeat_starts_blank_and_keeps_its_own_revisions(engine):
    who = build(engine, share=0.5)["doc"]
    rate_through(engine, who)
    sid = study_id(engine)
    with Session(engine) as s:
        repeat = s.exec(select(Assignment).where(Assignment.retest == True)).first()  # noqa: E712
        first_view = ri.load_item(s, who, get_study_by_id(s, sid), repeat.item_id)
    assert first_view.scores == SCORES
    with transaction(engine) as s:
        ra.submit(s, who, get_study_by_id(s, sid), repeat.item_id, {"accuracy": 1, "completeness": 1, "clarity": 1},
                  retest=True)
    with Session(engine) as s:
        again = ri.load_item(s, who, get_study_by_id(s, sid), repeat.item_id, retest=True)
        revisions = s.exec(select(RatingSubmission.revision).where(
            RatingSubmission.item_id == repeat.item_id, RatingSubmission.retest == True  # noqa: E712
        ).order_by(RatingSubmission.revision)).all()
        original = ri.load_item(s, who, get_study_by_id(s, sid), repeat.item_id)
    assert again.scores == {"accuracy": 1, "completeness": 1, "clarity": 1} and again.revision == 2
    assert list(revisions) == [1, 2]
    assert original.scores == SCORES  # the first rating is untouched


def test_a_fresh_repeat_shows_none_of_the_first_rating(engine):
    who = build(engine, share=0.5, gap=1)["doc"]
    sid = study_id(engine)
    with Session(engine) as s:
        entries = rq.queue(s, who, get_study_by_id(s, sid))
    for entry in entries:
        with transaction(engine) as s:
            ra.submit(s, who, get_study_by_id(s, sid), entry.item_id, SCORES, comment="the dose is wrong")
        with Session(engine) as s:
            repeat = s.exec(select(Assignment).where(Assignment.retest == True)).first()  # noqa: E712
        if repeat is not None:
            break
    with Session(engine) as s:
        view = ri.load_item(s, who, get_study_by_id(s, sid), repeat.item_id, retest=True)
    assert view.scores == {} and view.comment == "" and view.flag is None and view.revision == 0


def test_retest_off_schedules_nothing_and_a_flagged_rating_is_not_repeated(engine):
    who = build(engine, share=0.0)["doc"]
    rate_through(engine, who)
    with Session(engine) as s:
        assert not s.exec(select(Assignment).where(Assignment.retest == True)).all()  # noqa: E712
    sid = study_id(engine)
    with transaction(engine) as s:
        update_settings(s, get_study(s, "retest"), retest_share=0.5, retest_gap=1)
        s.add(Item(study_id=sid, benchmark="medi_qa", instance_id="new", model="m", input_text="q", output_text="a"))
        s.flush()
        assign_balanced(s, get_study(s, "retest"), 1)
    with Session(engine) as s:
        new_item = s.exec(select(Item.id).where(Item.instance_id == "new")).one()
    with transaction(engine) as s:
        ra.submit(s, who, get_study_by_id(s, sid), new_item, {}, flag="cannot_judge")
    with Session(engine) as s:
        assert not s.exec(select(Assignment).where(Assignment.retest == True)).all()  # noqa: E712


def test_progress_counts_a_repeat_as_one_more_item_to_do(engine):
    who = build(engine, share=0.5)["doc"]
    sid = study_id(engine)
    with Session(engine) as s:
        before = rp.progress(s, who)[0]
    shown = rate_through(engine, who)
    with Session(engine) as s:
        after = rp.progress(s, who)[0]
    assert (before.done, before.assigned) == (0, 24)
    assert after.done == after.assigned == len(shown) > 24
    with Session(engine) as s:
        assert all(e.rated for e in rq.queue(s, who, get_study_by_id(s, sid)))


def test_intra_rater_agreement_compares_the_repeat_with_the_first_rating(engine):
    who = build(engine, share=0.5)["doc"]
    rate_through(engine, who, scores_for=lambda item, retest: {
        "accuracy": (item % 5) + 1, "completeness": (item % 5) + 1 if retest else (item % 4) + 1, "clarity": 3})
    with Session(engine) as s:
        study = get_study(s, "retest")
        pairs = retest_pairs(s, study)
        quality = study_rater_quality(s, study)
    assert not pairs.empty and set(pairs["criterion"]) == {"accuracy", "completeness", "clarity"}
    table = quality.retest.set_index(["clinician", "criterion"])
    assert table.loc[("doc", "accuracy"), "exact"] == 1.0
    assert table.loc[("doc", "accuracy"), "icc_a1"] == pytest.approx(1.0)
    assert table.loc[("doc", "completeness"), "exact"] < 1.0
    assert quality.n_retest_pairs == pairs["item_id"].nunique()


def test_the_first_rating_is_the_one_made_before_the_repeat(engine):
    who = build(engine, share=0.5)["doc"]
    rate_through(engine, who)
    sid = study_id(engine)
    with Session(engine) as s:
        item = s.exec(select(Assignment.item_id).where(Assignment.retest == True)).first()  # noqa: E712
    with transaction(engine) as s:  # a revision of the first rating after the repeat was rated
        ra.submit(s, who, get_study_by_id(s, sid), item, {"accuracy": 1, "completeness": 1, "clarity": 1})
    with Session(engine) as s:
        pairs = retest_pairs(s, get_study(s, "retest"))
    row = pairs[(pairs["item_id"] == str(item)) & (pairs["criterion"] == "accuracy")].iloc[0]
    assert (row["first"], row["repeat"]) == (4.0, 4.0)


def test_the_retest_share_and_gap_are_checked(engine):
    build(engine)
    with transaction(engine) as s:
        study = get_study(s, "retest")
        for share in (-0.1, 0.9, float("nan"), "lots"):
            with pytest.raises(ValidationError, match="retest share"):
                update_settings(s, study, retest_share=share)
        for gap in (0, -2, 1.5, True):
            with pytest.raises(ValidationError, match="retest gap"):
                update_settings(s, study, retest_share=0.1, retest_gap=gap)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_items=st.integers(2, 14), share=st.sampled_from([0.2, 0.5]), gap=st.integers(1, 6),
       skip_every=st.sampled_from([0, 2, 3]))
def test_no_item_is_ever_shown_twice_in_a_row_whatever_the_order_of_rating(tmp_path_factory, n_items, share, gap,
                                                                            skip_every):
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('retest') / 'r.db'}")
    upgrade_database(engine)
    who = build(engine, n_items=n_items, share=share, gap=gap)["doc"]
    shown: list[tuple[int, bool]] = []
    rate_through(engine, who, skip_every=skip_every, shown=shown)
    assert all(a[0] != b[0] for a, b in zip(shown, shown[1:], strict=False))
    with Session(engine) as s:
        queue = rq.queue(s, who, get_study(s, "retest"))
    assert all(a.item_id != b.item_id for a, b in zip(queue, queue[1:], strict=False))
    assert len([e for e in queue if e.retest]) == len({e.item_id for e in queue if e.retest})
    frame = pd.DataFrame([(e.item_id, e.retest) for e in queue], columns=["item", "retest"])
    assert not frame.duplicated().any()
    engine.dispose()
