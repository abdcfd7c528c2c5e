"""Gold items: expected ranges are imported all or nothing, go to every clinician, and measure accuracy."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, select
from support.helpers import table_counts

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Assignment, GoldRange, Item, User
from medhelm_core.demo import ANNOTATIONS, DEMO_STUDY
from medhelm_core.errors import InputFileError
from medhelm_core.rating import rater_actions as ra
from medhelm_core.rating import rater_item as ri
from medhelm_core.rating.assignment import assign_balanced, study_clinicians
from medhelm_core.rating.gold import clear_gold, gold_item_ids, gold_ranges_frame, import_gold
from medhelm_core.rating.quality import study_rater_quality
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_study, get_study_by_id, plan_progress

DEMO_GOLD = ANNOTATIONS / "demo" / "gold.csv"


@pytest.fixture
def demo(demo_engine):
    return demo_engine


def write(tmp_path: Path, text: str, name: str = "gold.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_bundled_gold_file_imports_and_a_second_import_changes_nothing(demo):
    with transaction(demo) as s:
        first = import_gold(s, get_study(s, DEMO_STUDY), DEMO_GOLD)
    with transaction(demo) as s:
        again = import_gold(s, get_study(s, DEMO_STUDY), DEMO_GOLD)
    assert (first.rows, first.created, first.gold_items) == (5, 5, 3)
    assert (again.created, again.updated, again.unchanged) == (0, 0, 5)


@pytest.mark.parametrize(
    ("body", "line", "field", "reason"),
    [
        ("item_id,criterion,low,high\n999999,accuracy,1,2\n", 2, "item_id", "no item 999999"),
        ("benchmark,instance_id,model,criterion,low,high\nmedi_qa,nope,m,accuracy,1,2\n", 2, "instance_id", "no item"),
        ("item_id,criterion,low,high\n{id},tone,1,2\n", 2, "criterion", "unknown criterion 'tone'"),
        ("item_id,criterion,low,high\n{id},accuracy,0,2\n", 2, "low", "off the scale"),
        ("item_id,criterion,low,high\n{id},accuracy,4,2\n", 2, "low", "above high"),
        ("item_id,criterion,low,high\n{id},accuracy,x,2\n", 2, "low", "not a number"),
        ("item_id,criterion,low,high\n{id},accuracy,2.5,3\n", 2, "low", "not a whole number"),
        ("item_id,criterion,low,high\n{id},accuracy,1,2\n{id},accuracy,2,3\n", 3, "criterion", "second accuracy"),
        ("item_id,criterion,score\n{id},clarity,\n", 2, "score", "missing value"),
    ],
)
def test_a_bad_gold_file_names_line_and_field_and_stores_nothing(demo, tmp_path, body, line, field, reason):
    with Session(demo) as s:
        item_id = s.exec(select(Item.id).order_by(Item.id)).first()
    good = "item_id,criterion,low,high\n{id},clarity,3,5\n"
    with transaction(demo) as s:
        import_gold(s, get_study(s, DEMO_STUDY), write(tmp_path, good.format(id=item_id), "ok.csv"))
    before = table_counts(demo)
    path = write(tmp_path, body.format(id=item_id))
    with pytest.raises(InputFileError) as info, transaction(demo) as s:
        import_gold(s, get_study(s, DEMO_STUDY), path)
    assert (info.value.line, info.value.field) == (line, field)
    assert reason in str(info.value) and str(path) in str(info.value)
    assert table_counts(demo) == before


def test_a_single_expected_score_and_a_changed_range_are_stored(demo, tmp_path):
    with Session(demo) as s:
        item_id = s.exec(select(Item.id).order_by(Item.id)).first()
    with transaction(demo) as s:
        single = write(tmp_path, f"item_id,criterion,score,note\n{item_id},clarity,4,x\n")
        import_gold(s, get_study(s, DEMO_STUDY), single)
    with transaction(demo) as s:
        report = import_gold(s, get_study(s, DEMO_STUDY),
                             write(tmp_path, f"item_id,criterion,low,high\n{item_id},clarity,3,5\n", "b.csv"))
    with Session(demo) as s:
        row = s.exec(select(GoldRange)).one()
    assert report.updated == 1 and (row.low, row.high, row.note) == (3, 5, "")


def test_gold_items_go_to_every_clinician_and_others_keep_their_overlap(demo):
    with transaction(demo) as s:
        study = get_study(s, DEMO_STUDY)
        import_gold(s, study, DEMO_GOLD)
        assign_balanced(s, study, 2)
    with Session(demo) as s:
        study = get_study(s, DEMO_STUDY)
        gold = gold_item_ids(s, study)
        rows = s.exec(select(Assignment.item_id, Assignment.user_id).where(Assignment.study_id == study.id)).all()
        clinicians = [u.id for u in study_clinicians(s)]  # the demo's three, not MedHELM's recorded raters
    per_item: dict[int, set[int]] = {}
    for item, user in rows:
        per_item.setdefault(item, set()).add(user)
    assert all(per_item[i] == set(clinicians) for i in gold)
    assert all(len(users) == 2 for item, users in per_item.items() if item not in gold)


def test_gold_accuracy_is_the_share_of_scores_within_range_and_is_not_shown_to_the_clinician(demo):
    with transaction(demo) as s:
        study = get_study(s, DEMO_STUDY)
        import_gold(s, study, DEMO_GOLD)
        assign_balanced(s, study, 2)
        ranges = gold_ranges_frame(s, study)
        users = {u.username: u for u in s.exec(select(User)).all()}
    with Session(demo) as s:
        sid = get_study(s, DEMO_STUDY).id
    for name, good in (("clinician1", True), ("clinician2", False)):
        who = Principal(users[name].id, name, name, "clinician")
        for item_id, part in ranges.groupby("item_id"):
            scores = {"accuracy": 3, "completeness": 3, "clarity": 3}
            for rec in part.itertuples():
                scores[rec.criterion] = rec.low if good else (5 if rec.high < 4 else 1)
            with transaction(demo) as s:
                ra.submit(s, who, get_study_by_id(s, sid), int(item_id), scores)
            with Session(demo) as s:
                seen = ri.load_item(s, who, get_study_by_id(s, sid), int(item_id))
            assert not any("gold" in str(v).lower() for v in vars(seen).values())
    with Session(demo) as s:
        quality = study_rater_quality(s, get_study(s, DEMO_STUDY))
    overall = quality.gold[quality.gold["criterion"] == "all criteria"].set_index("rater_id")
    assert quality.n_gold_items == 3
    assert overall.loc["clinician1", "accuracy"] == 1.0 and overall.loc["clinician1", "n_scores"] == 5
    assert overall.loc["clinician2", "accuracy"] == 0.0 and overall.loc["clinician2", "mean_miss"] > 1


def test_gold_items_do_not_count_towards_the_plan_and_clearing_them_keeps_ratings(demo):
    with transaction(demo) as s:
        study = get_study(s, DEMO_STUDY)
        import_gold(s, study, DEMO_GOLD)
        progress = plan_progress(s, study, 2)
        removed = clear_gold(s, study)
        after = plan_progress(s, study, 2)
    assert progress.items_in_study == 45 and removed == 5 and after.items_in_study == 48


def test_gold_items_stay_out_of_the_agreement_figures_and_change_the_data_version(demo):
    from medhelm_core.figures import data_version, load_dashboard_data
    from medhelm_core.frames import scores_long_frame

    with Session(demo) as s:
        study = get_study(s, DEMO_STUDY)
        before = data_version(s, study)
    with transaction(demo) as s:
        study = get_study(s, DEMO_STUDY)
        import_gold(s, study, DEMO_GOLD)
        assign_balanced(s, study, 2, ["clinician1", "clinician2", "clinician3"])
        rubric = rubric_spec(s, study.rubric_id)
        for assignment in s.exec(select(Assignment).where(Assignment.study_id == study.id)).all():
            record_rating(s, item=s.get(Item, assignment.item_id), rater=s.get(User, assignment.user_id),
                          rubric=rubric, scores={"accuracy": 4, "completeness": 3, "clarity": 5})
    with Session(demo) as s:
        study = get_study(s, DEMO_STUDY)
        gold = {str(i) for i in gold_item_ids(s, study)}
        assert data_version(s, study) != before
        data = load_dashboard_data(s, study)
        long = scores_long_frame(s, study)
    assert data.gold_items == 3 and len(data.items) == 48
    shown = set(data.long["item_id"])  # the page's and the engine's frames: the same 45 items, no gold one
    assert shown == set(long["item_id"]) and len(shown) == 45 and not shown & gold
