"""What the model figures read: every score on the study's items (clinicians, the jury and each judge, ROUGE-L,
BERTScore) and how each item came to be rated, gold items left out."""

from __future__ import annotations

from sqlmodel import Session
from support.model_support import insert_jury, rate_first

from medhelm_core.db.engine import transaction
from medhelm_core.demo import ANNOTATIONS, DEMO_STUDY
from medhelm_core.frames import model_items_frame, model_scores_long, rating_design_frame
from medhelm_core.rating.gold import gold_item_ids, import_gold
from medhelm_core.studies import get_study


def test_model_frames_hold_every_source_and_the_design_without_gold_items(sqlite_demo_engine):
    with transaction(sqlite_demo_engine) as s:
        import_gold(s, get_study(s, DEMO_STUDY), ANNOTATIONS / "demo" / "gold.csv", actor="researcher")
    made = rate_first(sqlite_demo_engine, 4)
    run_id = insert_jury(sqlite_demo_engine)
    with Session(sqlite_demo_engine) as s:
        study = get_study(s, DEMO_STUDY)
        gold = gold_item_ids(s, study)
        items = model_items_frame(s, study)
        long, run = model_scores_long(s, study)
        design = rating_design_frame(s, study)
    assert run.id == run_id and len(items) == 48 - len(gold) and not set(items["item_id"]) & gold
    assert set(long["rater_kind"]) == {"clinician", "jury", "judge"} and not set(long["item_id"]) & gold
    assert set(long.loc[long["rater_kind"] == "judge", "rater_id"]) == {"openai/judge-a", "anthropic/judge-b"}
    rated = set(long.loc[long["rater_kind"] == "clinician", "item_id"])
    assert set(design.loc[design["rated"], "item_id"]) == rated and 0 < len(rated) <= made
    assert design["assigned"].all() and not design["drawn"].any() and design["draw_probability"].isna().all()
