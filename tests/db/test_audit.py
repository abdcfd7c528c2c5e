"""The audit trail: every rating revision, assignment change, import, export and account change is recorded
(who, when, what) in the same transaction as the change, and `medhelm audit export` writes it out."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.accounts.auth import Principal
from medhelm_core.accounts.users import add_user, disable_user, set_password
from medhelm_core.cli import main
from medhelm_core.db.audit import audit_events, record_event
from medhelm_core.db.engine import transaction
from medhelm_core.db.migrate import current_revision, head_revision, upgrade_database
from medhelm_core.db.models import AuditEvent, Item, RatingSubmission
from medhelm_core.errors import InputFileError, ValidationError
from medhelm_core.export import export_study
from medhelm_core.importers import import_paths
from medhelm_core.rating.assignment import assign_balanced, reassign
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import default_rubric
from medhelm_core.studies import get_or_create_study

RUBRIC = default_rubric()
SCORES = {"accuracy": 4, "completeness": 3, "clarity": 5}


def events(engine, action=None):
    with Session(engine) as s:
        query = select(AuditEvent).order_by(AuditEvent.id)
        if action:
            query = query.where(AuditEvent.action == action)
        return list(s.exec(query).all())


@pytest.fixture
def study_setup(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        items = [Item(study_id=study.id, benchmark="b", instance_id=str(i), model="m", input_text="q",
                      output_text="a") for i in range(4)]
        s.add_all(items)
        raters = [add_user(s, f"doc{i}", "clinician", None) for i in range(3)]
    return engine, study, items, raters


def test_every_rating_revision_is_audited_with_the_rater(study_setup):
    engine, study, items, raters = study_setup
    for scores, rid in ((SCORES, "r1"), ({**SCORES, "accuracy": 2}, "r2"), ({**SCORES, "accuracy": 2}, "r2")):
        with transaction(engine) as s:
            record_rating(s, item=items[0], rater=raters[0], rubric=RUBRIC, scores=scores, comment="dose of x",
                          request_id=rid)
    rows = events(engine, "rating.submitted")
    assert [e.details["revision"] for e in rows] == [1, 2]  # the repeated request wrote nothing, audited nothing
    assert {(e.actor, e.user_id, e.study_id) for e in rows} == {("doc0", raters[0].id, study.id)}
    assert rows[1].details["scores"]["accuracy"] == 2 and rows[1].details["item_id"] == items[0].id
    assert "dose" not in json.dumps(rows[1].details)  # free text a clinician typed stays out of the trail


def test_an_audit_row_rolls_back_with_its_change(study_setup):
    engine, _, items, raters = study_setup
    before = len(events(engine))
    with pytest.raises(RuntimeError):
        with transaction(engine) as s:
            record_rating(s, item=items[0], rater=raters[0], rubric=RUBRIC, scores=SCORES)
            raise RuntimeError("the database went away after the rating was written")
    with pytest.raises(ValidationError):
        with transaction(engine) as s:
            record_rating(s, item=items[0], rater=raters[0], rubric=RUBRIC, scores={"accuracy": 9})
    with Session(engine) as s:
        assert s.exec(select(func.count(RatingSubmission.id))).one() == 0
    assert len(events(engine)) == before


def test_assignment_changes_are_audited_with_who_made_them(study_setup):
    engine, study, items, raters = study_setup
    researcher = Principal(99, "dr.res", "Dr Res", "researcher")
    with transaction(engine) as s:
        plan = assign_balanced(s, study, overlap=2, actor=researcher)
    with transaction(engine) as s:
        assign_balanced(s, study, overlap=2, actor=researcher)  # nothing left to add: no event
    (balanced,) = events(engine, "assignment.balanced")
    assert len(plan.new) == 8
    assert (balanced.actor, balanced.user_id, balanced.details["added"]) == ("dr.res", 99, 8)
    item_id, user_id = plan.new[0]
    source = next(r for r in raters if r.id == user_id)
    taken = {u for i, u in plan.new if i == item_id}
    target = next(r for r in raters if r.id not in taken)
    with transaction(engine) as s:
        reassign(s, study, item_id, source.username, target.username)
    (moved,) = events(engine, "assignment.moved")
    assert moved.actor == "cli" and moved.details == {"item_id": item_id, "from_user": source.username,
                                                      "to_user": target.username}


def test_imports_are_audited_once_and_failed_or_repeated_ones_not(engine, tmp_path):
    good = tmp_path / "items.jsonl"
    good.write_text(json.dumps({"benchmark": "b", "instance_id": "1", "model": "m", "input": "q",
                                "output": "a"}) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    for paths in ([good], [good], [good, bad]):
        try:
            with transaction(engine) as s:
                study, _ = get_or_create_study(s, "imp")
                study_id = study.id
                import_paths(s, study, paths, actor="dr.res")
        except InputFileError:
            pass
    (event,) = events(engine, "import")
    assert event.actor == "dr.res" and event.study_id == study_id
    assert event.details["items_created"] == 1 and event.details["files"] == [str(good)]


def test_exports_are_audited(study_setup, tmp_path):
    engine, study, _, _ = study_setup
    with transaction(engine) as s:
        export_study(s, study, tmp_path / "out", "jsonl", actor=Principal(7, "dr.res", "", "researcher"))
    (event,) = events(engine, "export")
    assert (event.actor, event.user_id, event.study_id, event.details["format"]) == ("dr.res", 7, study.id, "jsonl")
    assert event.details["rows"]["items.jsonl"] == 4


def test_account_changes_are_audited_without_secrets(engine):
    with transaction(engine) as s:
        add_user(s, "dr.new", "clinician", "s3cret-password", actor="admin")
        set_password(s, "dr.new", "an0ther-password", actor="admin")
        disable_user(s, "dr.new", actor="admin")
    rows = events(engine)
    assert [e.action for e in rows] == ["user.added", "user.password_changed", "user.disabled"]
    assert all(e.actor == "admin" for e in rows)
    dumped = json.dumps([e.details for e in rows])
    assert "s3cret" not in dumped and "an0ther" not in dumped and "argon2" not in dumped


def test_times_are_utc_and_details_are_plain_json(engine, tmp_path):
    with transaction(engine) as s:
        record_event(s, "export", actor=None, out=tmp_path, when=datetime(2026, 1, 1, tzinfo=UTC))
    with Session(engine) as s:
        (row,) = audit_events(s)
    assert row.actor == "system" and row.details["out"] == str(tmp_path)
    assert datetime.fromisoformat(row.at).utcoffset() == timedelta(0)


def test_upgrade_from_0002_keeps_data_and_adds_the_audit_table(database_url):
    from medhelm_core.db.engine import make_engine

    eng = make_engine(database_url)
    try:
        upgrade_database(eng, "0002")
        with transaction(eng) as s:
            s.exec(select(func.count(Item.id))).one()
        from sqlalchemy import text

        with eng.begin() as conn:
            conn.execute(text("INSERT INTO \"user\" (username, display_name, role, is_active, meta, created_at, "
                              "failed_logins) VALUES ('old', 'Old', 'clinician', true, '{}', '2026-01-01', 0)"))
        upgrade_database(eng)
        assert current_revision(eng) == head_revision()
        with transaction(eng) as s:
            disable_user(s, "old")
        assert [e.action for e in events(eng)] == ["user.disabled"]
    finally:
        eng.dispose()


def run_cli(capsys, url, *args):
    with pytest.raises(SystemExit) as exit_info:
        main(["--database-url", url, *args])
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def test_audit_export_cli_writes_csv_and_jsonl_and_filters(study_setup, tmp_path, capsys):
    engine, study, items, raters = study_setup
    url = engine.url.render_as_string(hide_password=False)
    with transaction(engine) as s:
        record_rating(s, item=items[0], rater=raters[0], rubric=RUBRIC, scores=SCORES)
        other, _ = get_or_create_study(s, "other")
        record_event(s, "export", actor="cli", study_id=other.id)

    code, out, err = run_cli(capsys, url, "audit", "export", "--out", str(tmp_path / "a.csv"), "--json")
    assert code == 0, err
    assert json.loads(out)["events"] == len(events(engine))
    with open(tmp_path / "a.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["action"] for r in rows][:3] == ["user.added"] * 3 and rows[-2]["actor"] == "doc0"
    assert json.loads(rows[-2]["details"])["scores"] == SCORES

    code, out, _ = run_cli(capsys, url, "audit", "export", "--study", "s", "--format", "jsonl")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["action"] for r in lines] == ["rating.submitted"] and lines[0]["study"] == "s"

    future = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    code, out, _ = run_cli(capsys, url, "audit", "export", "--since", future, "--json")
    assert code == 0 and json.loads(out) == []

    code, out, err = run_cli(capsys, url, "audit", "export", "--since", "last tuesday")
    assert code == 1 and err.startswith("error: --since 'last tuesday'") and len(err.splitlines()) == 1
    code, _, err = run_cli(capsys, url, "audit", "export", "--study", "nope")
    assert code == 1 and err.startswith("error:")
