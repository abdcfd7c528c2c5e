"""Versions of the judges' prompt template and rubric: stored once, never changed, recorded by every run."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import select
from sqlmodel import Session
from support.fake_openai_server import FakeOpenAI
from support.helpers import study_named
from support.jury_support import LOCAL_A, LOCAL_B, fast_config, make_study

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import AuditEvent, JuryRun, PromptTemplate
from medhelm_core.errors import NotFoundError, ValidationError
from medhelm_core.jury import run_jury
from medhelm_core.jury.config import JudgeSpec, JuryConfig, build_config, stored_prompt
from medhelm_core.jury.prompt import DEFAULT_TEMPLATE
from medhelm_core.jury.run_versions import preview_items, preview_prompt, run_versions, stored_config
from medhelm_core.jury.templates import (
    ensure_default_template,
    get_template_version,
    latest_template_version,
    list_template_versions,
    save_template_version,
    template_for_text,
)
from medhelm_core.rubric import (
    compatible_rubric_versions,
    default_rubric,
    judge_rubric,
    parse_rubric,
    rubric_spec,
    save_rubric_version,
    store_rubric,
    version_differences,
)
from medhelm_core.studies import get_study

STRICT = DEFAULT_TEMPLATE + "\nBe strict: a single clinically important error caps accuracy at 2.\n"


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")


def events(engine, action: str) -> list[AuditEvent]:
    with Session(engine) as session:
        return list(session.scalars(select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.id)))


def reworded(spec, **changes):
    """The rubric with its first criterion changed (wording, or scale when asked)."""
    first = replace(spec.criteria[0], **changes)
    return replace(spec, criteria=(first, *spec.criteria[1:]))


# --- prompt templates --------------------------------------------------------------------------------------

def test_the_bundled_template_is_medhelm_v1_stored_once(engine):
    with transaction(engine) as s:
        first = ensure_default_template(s)
    with transaction(engine) as s:
        again = ensure_default_template(s)
        listed = list_template_versions(s)
    assert (first.label, first.text, first.created_by) == ("medhelm v1", DEFAULT_TEMPLATE, "system")
    assert again == first and [v.label for v in listed] == ["medhelm v1"]


def test_an_edit_is_the_next_version_and_the_old_one_stays_as_it_was(engine):
    with transaction(engine) as s:
        v2, created = save_template_version(s, "medhelm", STRICT, note="stricter accuracy", actor="dr-lee")
    with transaction(engine) as s:
        v1 = get_template_version(s, "medhelm", 1)
        latest = latest_template_version(s)
    assert created and v2.label == "medhelm v2" and (v2.note, v2.created_by) == ("stricter accuracy", "dr-lee")
    assert v1.text == DEFAULT_TEMPLATE and latest == v2


def test_saving_the_latest_text_again_adds_no_version(engine):
    with transaction(engine) as s:
        save_template_version(s, "medhelm", STRICT, actor="cli")
    with transaction(engine) as s:
        same, created = save_template_version(s, "medhelm", STRICT, note="pressed twice", actor="cli")
        assert not created and same.version == 2
        assert [v.version for v in list_template_versions(s, "medhelm")] == [1, 2]
    assert [e.details["version"] for e in events(engine, "prompt_template.saved")] == [1, 2]


def test_going_back_to_an_older_text_is_a_new_version_that_names_the_same_text(engine):
    with transaction(engine) as s:
        save_template_version(s, "medhelm", STRICT)
        back, created = save_template_version(s, "medhelm", DEFAULT_TEMPLATE, note="revert")
    assert created and back.version == 3 and back.text_hash == get_version_hash(engine, 1)


def get_version_hash(engine, version: int) -> str:
    with Session(engine) as s:
        return get_template_version(s, "medhelm", version).text_hash


def test_a_stored_version_cannot_be_changed(engine):
    with transaction(engine) as s:
        save_template_version(s, "medhelm", STRICT)
    with pytest.raises(ValidationError, match="cannot change; save a new version"):
        with transaction(engine) as s:
            row = s.exec(select(PromptTemplate).where(PromptTemplate.version == 2)).scalars().one()
            row.text = DEFAULT_TEMPLATE + "\nsneaky"
    with Session(engine) as s:
        assert get_template_version(s, "medhelm", 2).text == STRICT


def test_a_broken_template_or_name_is_refused_and_nothing_is_stored(engine):
    with pytest.raises(ValidationError, match="needs \\$criteria"):
        with transaction(engine) as s:
            save_template_version(s, "medhelm", "$response_block $output_format")
    with pytest.raises(ValidationError, match="template name"):
        with transaction(engine) as s:
            save_template_version(s, "my prompt", STRICT)
    with Session(engine) as s:
        assert s.exec(select(PromptTemplate)).all() == []
    with pytest.raises(NotFoundError, match="no version 7"):
        with transaction(engine) as s:
            get_template_version(s, "medhelm", 7)


def test_a_new_version_and_its_audit_event_commit_or_roll_back_together(engine):
    with pytest.raises(RuntimeError):
        with transaction(engine) as s:
            save_template_version(s, "medhelm", STRICT, actor="cli")
            raise RuntimeError("the caller's transaction fails after the save")
    assert events(engine, "prompt_template.saved") == []
    with Session(engine) as s:
        assert s.exec(select(PromptTemplate)).all() == []
    with transaction(engine) as s:
        save_template_version(s, "medhelm", STRICT, actor="cli")
    saved = events(engine, "prompt_template.saved")
    assert [(e.actor, e.details["name"], e.details["version"]) for e in saved] == [
        ("system", "medhelm", 1), ("cli", "medhelm", 2)]


def test_a_template_from_a_file_reuses_the_version_that_holds_its_text(engine):
    with transaction(engine) as s:
        save_template_version(s, "medhelm", STRICT)
        found, created = template_for_text(s, "medhelm", DEFAULT_TEMPLATE)
        assert (found.version, created) == (1, False)
        other, created = template_for_text(s, "terse", STRICT, note="from jury.toml")
        assert (other.label, created) == ("terse v1", True)


# --- rubric versions ---------------------------------------------------------------------------------------

def test_new_rubric_wording_is_the_next_version_for_the_judges_only(engine):
    make_study(engine, ["good"])
    with transaction(engine) as s:
        study = get_study(s, "s")
        own = rubric_spec(s, study.rubric_id)
        clearer = reworded(own, label="Medical accuracy", anchors={1: "Dangerous.", 5: "Flawless."})
        v2, created = save_rubric_version(s, study, clearer, actor="cli")
        again, created_again = save_rubric_version(s, study, replace(clearer, version=9))
    assert created and not created_again and (v2.version, again.version) == (2, 2)
    with Session(engine) as s:
        study = get_study(s, "s")
        assert rubric_spec(s, study.rubric_id).version == 1  # clinicians keep rating on v1
        assert [r.version for r in compatible_rubric_versions(s, study)] == [1, 2]
        assert judge_rubric(s, study, 2).criteria[0].label == "Medical accuracy"
        assert judge_rubric(s, study) == own
    assert [e.details["version"] for e in events(engine, "rubric.version_saved")] == [2]


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: reworded(r, scale_max=10), "criterion 'accuracy' has the scale 1 to 10"),
    (lambda r: replace(r, criteria=r.criteria[:2]), "criterion 'clarity' of the study's rubric is missing"),
    (lambda r: replace(r, criteria=(*r.criteria, replace(r.criteria[0], name="safety"))),
     "criterion 'safety' is not in the study's rubric"),
    (lambda r: replace(r, name="other"), "it is rubric 'other'"),
])
def test_a_version_with_other_criteria_or_scales_is_refused_naming_the_criterion(engine, change, message):
    make_study(engine, ["good"])
    with pytest.raises(ValidationError, match=message):
        with transaction(engine) as s:
            study = get_study(s, "s")
            save_rubric_version(s, study, change(rubric_spec(s, study.rubric_id)))


def test_an_incompatible_version_of_the_same_name_is_not_offered_to_the_judges(engine):
    make_study(engine, ["good"])
    with transaction(engine) as s:
        wide = reworded(default_rubric(), scale_max=10)
        store_rubric(s, replace(wide, version=5))  # another study's rubric, same name
        study = get_study(s, "s")
        assert [r.version for r in compatible_rubric_versions(s, study)] == [1]
        with pytest.raises(ValidationError, match="criterion 'accuracy' has the scale 1 to 10"):
            judge_rubric(s, study, 5)
        with pytest.raises(NotFoundError, match="no version 4"):
            judge_rubric(s, study, 4)
    assert version_differences(default_rubric(), default_rubric()) == []


# --- configs record versions -------------------------------------------------------------------------------

RUBRIC = parse_rubric({"name": "r", "version": 1, "criteria": [
    {"name": "accuracy", "label": "Accuracy", "description": "Is it right", "anchors": {"1": "wrong", "5": "right"}},
    {"name": "clarity"}]})


def test_existing_config_hashes_are_unchanged():
    # Hashes of configs made before versions were recorded: cached verdicts and runs must still match.
    assert build_config(RUBRIC, ["openai/a", "openai/b"]).config_hash == (
        "3605e949788447d23c38ca4af5c17816e598675a0c20112bb28a707f3c138afe")
    assert build_config(RUBRIC, ["openai/a"], temperature=0.3).config_hash == (
        "93898350c06d0148b7933b410898e5d58199fc00124a6bc0b7861034a39cd565")
    assert JuryConfig(judges=(JudgeSpec("openai/gpt-4o"),), rubric=default_rubric()).config_hash == (
        "0ba75357a40a5e5fd09243635710aed3636702dc47fbc1ff6c933210cd8a8992")


def test_a_config_records_its_versions_outside_the_hash(engine):
    with transaction(engine) as s:
        v2, _ = save_template_version(s, "medhelm", STRICT)
        v3, _ = save_template_version(s, "medhelm", DEFAULT_TEMPLATE)
    bundled = build_config(RUBRIC, ["openai/a"])
    assert bundled.prompt_label == "medhelm v1" and bundled.versions["rubric_version"] == 1
    same_text = build_config(RUBRIC, ["openai/a"], template=v3)
    assert same_text.prompt_label == "medhelm v3" and same_text.config_hash == bundled.config_hash
    stricter = build_config(RUBRIC, ["openai/a"], template=v2)
    assert stricter.config_hash != bundled.config_hash
    stored = stricter.to_dict()
    assert (stored["prompt_name"], stored["prompt_version"]) == ("medhelm", 2)
    rebuilt = JuryConfig.from_dict(stored, RUBRIC)
    assert (rebuilt.config_hash, rebuilt.prompt_label) == (stricter.config_hash, "medhelm v2")
    assert stored_prompt({"prompt_template": DEFAULT_TEMPLATE}) == ("medhelm", 1)  # a run from before versions
    custom = replace(bundled, prompt_template=STRICT + "\n", prompt_name="", prompt_version=None)
    assert custom.prompt_label == "custom (not stored)"


# --- runs against the loopback server ---------------------------------------------------------------------

def test_a_new_prompt_version_runs_as_a_second_run_that_records_v2(engine, server):
    study = make_study(engine, ["good", "good", "good"])
    first = run_jury(engine, study_named(engine, study), fast_config(server.base_url, (LOCAL_A, LOCAL_B)))
    with transaction(engine) as s:
        v2, _ = save_template_version(s, "medhelm", STRICT, note="stricter", actor="cli")
    server.calls.clear()
    second = run_jury(engine, study_named(engine, study),
                      fast_config(server.base_url, (LOCAL_A, LOCAL_B)).with_template(v2))
    assert second.run_id != first.run_id and second.calls_made == 6 and second.reused == 0
    assert all("Be strict" in c["messages"][0]["content"] for c in server.calls)
    assert second.versions["prompt_version"] == 2 and second.versions["judges"] == [LOCAL_A, LOCAL_B]
    with Session(engine) as s:
        runs = {r.id: r for r in s.exec(select(JuryRun)).scalars()}
        labels = {rid: run_versions(run, s).label for rid, run in runs.items()}
    assert runs[second.run_id].config["prompt_version"] == 2 and runs[first.run_id].config["prompt_version"] == 1
    assert labels[second.run_id] == (f"run {second.run_id}: {LOCAL_A} + {LOCAL_B}; rubric medhelm v1; "
                                     "prompt medhelm v2")
    again = run_jury(engine, study_named(engine, study),
                     fast_config(server.base_url, (LOCAL_A, LOCAL_B)).with_template(v2))
    assert again.run_id == second.run_id and again.calls_made == 0  # the same version resumes its run


def test_a_version_with_the_same_text_is_its_own_run_and_shares_the_cached_verdicts(engine, server):
    study = make_study(engine, ["good", "good"])
    first = run_jury(engine, study_named(engine, study), fast_config(server.base_url))
    with transaction(engine) as s:
        save_template_version(s, "medhelm", STRICT)
        v3, _ = save_template_version(s, "medhelm", DEFAULT_TEMPLATE, note="back to v1's text")
    server.calls.clear()
    third = run_jury(engine, study_named(engine, study), fast_config(server.base_url).with_template(v3))
    assert third.run_id != first.run_id and (third.calls_made, third.reused, third.done) == (0, 2, 2)
    assert third.config_hash == first.config_hash and not server.calls


def test_a_run_from_before_versions_is_resumed_and_labelled_medhelm_v1(engine, server):
    study = make_study(engine, ["good"])
    first = run_jury(engine, study_named(engine, study), fast_config(server.base_url))
    with transaction(engine) as s:
        run = s.get(JuryRun, first.run_id)
        run.config = {k: v for k, v in run.config.items() if k not in ("prompt_name", "prompt_version")}
    with Session(engine) as s:
        assert run_versions(s.get(JuryRun, first.run_id)).prompt_label == "medhelm v1"
    assert run_jury(engine, study_named(engine, study), fast_config(server.base_url)).run_id == first.run_id


def test_judges_see_the_rubric_version_chosen_and_a_resume_keeps_it(engine, server):
    study = make_study(engine, ["good", "good"])
    with transaction(engine) as s:
        target = get_study(s, study)
        v2, _ = save_rubric_version(s, target, reworded(rubric_spec(s, target.rubric_id),
                                                        description="Judge correctness against current guidelines."))
    config = replace(fast_config(server.base_url), rubric=v2)
    summary = run_jury(engine, study_named(engine, study), config)
    assert all("current guidelines" in c["messages"][0]["content"] for c in server.calls)
    with Session(engine) as s:
        target = get_study(s, study)
        run = s.get(JuryRun, summary.run_id)
        assert run.config["rubric"]["version"] == 2 and run_versions(run).rubric_label == "medhelm v2"
        resumed = stored_config(s, target, run)
    assert resumed.rubric == v2 and resumed.config_hash == run.config_hash


def test_the_preview_is_the_prompt_a_judge_gets(engine, server):
    study = make_study(engine, ["good"])
    run_jury(engine, study_named(engine, study), fast_config(server.base_url))
    with Session(engine) as s:
        target = get_study(s, study)
        ((item_id, label),) = preview_items(s, target)
        rendered = preview_prompt(s, target, item_id, DEFAULT_TEMPLATE, rubric_spec(s, target.rubric_id))
        with pytest.raises(ValidationError, match="needs \\$criteria"):
            preview_prompt(s, target, item_id, "$response_block $output_format", default_rubric())
    assert label == "medi_qa / i0 / model-x" and rendered.text == server.calls[0]["messages"][0]["content"]
