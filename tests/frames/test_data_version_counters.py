"""The data version is a counter bumped by every write that can change a figure (ORM objects, Core bulk inserts
and updates through a session, the jury's bare-connection writer), per benchmark; a read bumps nothing, a rolled
back write bumps nothing, and reading it is one primary-key read."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, update
from sqlmodel import Session, select

from medhelm_core.accounts.users import add_user
from medhelm_core.db.data_versions import bump, others_scope, scope_version, study_versions
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import (
    GoldRange,
    Item,
    JudgeVerdict,
    JuryRun,
    MetricScore,
    Rating,
    RatingSubmission,
    Study,
    User,
    utcnow,
)
from medhelm_core.figures import data_version, load_dashboard_data
from medhelm_core.jury.store import VerdictOutcome, record_verdict
from medhelm_core.metrics.store import write_scores
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_or_create_study, update_settings


@pytest.fixture
def study(engine):
    """A study with two items in each of two benchmarks, a clinician and a jury run; returns its ids."""
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "counted")
        items = [Item(study_id=study.id, benchmark=f"b{i % 2}", instance_id=str(i), model="m", input_text="q",
                      output_text="a", reference_text="r") for i in range(4)]
        s.add_all(items)
        user = add_user(s, "dr-count", "clinician", "dr-count-password")
        run = JuryRun(study_id=study.id, name="jury", source="recorded", config={}, status="finished")
        s.add(run)
        s.flush()
        return {"study": study.id, "items": [i.id for i in items], "user": user.id, "run": run.id}


def versions(engine, ids) -> dict[str, int]:
    with Session(engine) as s:
        return {scope: version for scope, version, _ in study_versions(s, ids["study"])}


def version(engine, ids) -> tuple:
    with Session(engine) as s:
        return data_version(s, s.get(Study, ids["study"]))


def _rate(s: Session, ids, item_index: int, score: int) -> None:
    rubric = rubric_spec(s, s.get(Study, ids["study"]).rubric_id)
    record_rating(s, item=s.get(Item, ids["items"][item_index]), rater=s.get(User, ids["user"]), rubric=rubric,
                  scores=dict.fromkeys(rubric.criterion_names, score))


def test_a_rating_bumps_its_benchmark_only_and_a_read_bumps_nothing(engine, study):
    before = versions(engine, study)
    with transaction(engine) as s:
        _rate(s, study, 0, 4)  # item 0 is in b0
    after = versions(engine, study)
    assert after["b0"] == before.get("b0", 0) + 1
    assert after.get("b1") == before.get("b1") and after["*"] == before["*"]
    # Reads, a page's load included, leave every counter as it is.
    with Session(engine) as s:
        load_dashboard_data(s, s.get(Study, study["study"]))
        data_version(s, s.get(Study, study["study"]))
        s.commit()
    with transaction(engine) as s:
        s.exec(select(Rating)).all()
    assert versions(engine, study) == after


def test_a_rolled_back_write_bumps_nothing(engine, study):
    before = version(engine, study)
    with pytest.raises(RuntimeError), transaction(engine) as s:
        _rate(s, study, 1, 3)
        raise RuntimeError("rolled back")
    assert version(engine, study) == before


def test_each_kind_of_write_changes_the_version(engine, study):
    items = study["items"]
    now = utcnow()

    def changes(write) -> None:  # noqa: ANN001 - a function of a session
        before = version(engine, study)
        with transaction(engine) as s:
            write(s)
        assert version(engine, study) != before, write.__name__

    def rating(s):
        _rate(s, study, 2, 2)

    def revised_rating(s):
        _rate(s, study, 2, 5)

    def bulk_submissions_and_ratings(s):  # Core executemany through the session, as the importers' bulk paths
        s.execute(insert(RatingSubmission), [{"item_id": items[3], "rater_id": study["user"], "revision": 1,
                                              "scores": {"accuracy": 3}, "comment": "", "submitted_at": now}])
        sid = s.exec(select(RatingSubmission.id).where(RatingSubmission.item_id == items[3])).one()
        s.execute(insert(Rating), [{"item_id": items[3], "rater_id": study["user"], "criterion": "accuracy",
                                    "score": 3, "submission_id": sid, "updated_at": now}])

    def core_update_of_ratings(s):  # an update by a where clause: its study is not known, so every study's
        s.execute(update(Rating).where(Rating.item_id == items[3]).values(score=1))

    def metric_scores(s):
        write_scores(s, [(items[0], {"rougeL_f": 0.5})], {"family": "rougeL"}, "h1")

    def bulk_metric_scores(s):
        s.execute(insert(MetricScore), [{"item_id": i, "metric": "bertscore_f1", "value": 0.3, "settings": {},
                                         "settings_hash": "h2", "computed_at": now} for i in items])

    def gold_range(s):
        s.add(GoldRange(item_id=items[1], criterion="accuracy", low=1, high=2))

    def orm_verdict(s):
        s.add(JudgeVerdict(jury_run_id=study["run"], item_id=items[0], judge="j", scores={"accuracy": 4}))

    def bulk_verdicts(s):
        s.execute(insert(JudgeVerdict), [{"jury_run_id": study["run"], "item_id": i, "judge": "k",
                                          "scores": {"accuracy": 2}, "status": "ok", "cache_key": "",
                                          "explanations": {}, "prompt": "", "raw_response": "", "created_at": now}
                                         for i in items])

    def new_item(s):
        s.add(Item(study_id=study["study"], benchmark="b2", instance_id="new", model="m", input_text="q",
                   output_text="a", reference_text="r"))

    def bulk_items(s):
        s.execute(insert(Item), [{"study_id": study["study"], "benchmark": "b3", "instance_id": "bulk",
                                  "model": "m", "input_text": "q", "output_text": "a", "reference_text": "r",
                                  "meta": {}, "created_at": now}])

    def jury_run(s):
        s.get(JuryRun, study["run"]).status = "stopped"

    def study_settings(s):
        update_settings(s, s.get(Study, study["study"]), speed_threshold_seconds=7.0)

    def deleted_rating(s):
        s.delete(s.exec(select(Rating).where(Rating.item_id == items[2])).first())

    for write in (rating, revised_rating, bulk_submissions_and_ratings, core_update_of_ratings, metric_scores,
                  bulk_metric_scores, gold_range, orm_verdict, bulk_verdicts, new_item, bulk_items, jury_run,
                  study_settings, deleted_rating):
        changes(write)


def test_the_jury_writer_on_a_bare_connection_bumps_the_items_benchmark(engine, study):
    before = versions(engine, study)
    outcome = VerdictOutcome(item_id=study["items"][1], judge="j", sample=0, cache_key="k", status="ok",
                             scores={"accuracy": 5}, explanations={}, prompt="", raw_response="", error=None,
                             latency_seconds=0.1, prompt_tokens=0, completion_tokens=0, cost_usd=0.0)
    assert record_verdict(engine, study["run"], outcome) == "new"
    after = versions(engine, study)
    assert after["b1"] == before.get("b1", 0) + 1 and after["*"] == before["*"]


def test_bump_is_one_call_for_other_writers_and_scopes_split_the_version(engine, study):
    with engine.begin() as conn:
        bump(conn, study["study"], "b1")
    with Session(engine) as s:
        all_scopes = study_versions(s, study["study"])
    b1 = scope_version(all_scopes, "b1")
    assert {scope for scope, _, _ in b1} <= {"b1", "*", "?"} and any(scope == "b1" for scope, _, _ in b1)
    with engine.begin() as conn:
        bump(conn, study["study"], "b0")
    with Session(engine) as s:
        assert scope_version(study_versions(s, study["study"]), "b1") == b1  # b0's write leaves b1's figures


def test_only_writes_other_than_the_clinicians_ratings_bump_a_benchmarks_others_scope(engine, study):
    """A reload after a rating reads the clinicians' rows only when the benchmark's others scope stayed as it was:
    every write of its verdicts, metric scores or gold ranges (ORM, Core, the jury's bare connection) moves it."""
    items, now = study["items"], utcnow()
    others = others_scope("b0")

    def moved(write) -> tuple[bool, bool]:  # noqa: ANN001 - a function of a session
        before = versions(engine, study)
        with transaction(engine) as s:
            write(s)
        after = versions(engine, study)
        return after["b0"] != before.get("b0"), after.get(others) != before.get(others)

    assert moved(lambda s: _rate(s, study, 0, 4)) == (True, False)
    assert moved(lambda s: _rate(s, study, 0, 2)) == (True, False)  # a revision
    assert moved(lambda s: s.add(JudgeVerdict(jury_run_id=study["run"], item_id=items[0], judge="j",
                                              scores={"accuracy": 4}))) == (True, True)
    assert moved(lambda s: s.execute(insert(MetricScore), [
        {"item_id": items[2], "metric": "rougeL_f", "value": 0.3, "settings": {}, "settings_hash": "h",
         "computed_at": now}])) == (True, True)
    assert moved(lambda s: s.add(GoldRange(item_id=items[2], criterion="accuracy", low=1, high=2))) == (True, True)
    before = versions(engine, study)
    outcome = VerdictOutcome(item_id=items[0], judge="k", sample=0, cache_key="k2", status="ok",
                             scores={"accuracy": 5}, explanations={}, prompt="", raw_response="", error=None,
                             latency_seconds=0.1, prompt_tokens=0, completion_tokens=0, cost_usd=0.0)
    assert record_verdict(engine, study["run"], outcome) == "new"  # the jury's writer, on a bare connection
    after = versions(engine, study)
    assert after[others] == before[others] + 1 and after.get(others_scope("b1")) == before.get(others_scope("b1"))
