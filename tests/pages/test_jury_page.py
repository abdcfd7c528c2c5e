"""The Jury page: researchers only; estimate, start (a queued job, worked here by a worker thread as the app's own
worker does), progress from the database, stop and resume, results per item and criterion with failures shown,
recorded runs labelled, model text as text."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest
from support.fake_openai_server import FakeOpenAI
from support.helpers import study_named
from support.jury_support import LOCAL_A, LOCAL_B, fast_config, make_study, verdicts

from medhelm_core.accounts import auth
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, JuryRun
from medhelm_core.importers import import_paths
from medhelm_core.jobs import WorkerOptions, run_worker
from medhelm_core.jobs.queue import live_job_for_run
from medhelm_core.jury import run_jury
from medhelm_core.studies import get_or_create_study
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "jury.py")


@pytest.fixture
def demo_db(sqlite_engine, monkeypatch):
    """Two accounts and a 48-item study like the demo's (seeding the whole demo costs seconds per test)."""
    with transaction(sqlite_engine) as s:
        add_user(s, "researcher", "researcher", "researcher-demo")
        add_user(s, "clinician1", "clinician", "clinician1-demo")
    make_study(sqlite_engine, ["good"] * 48, name="demo")
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_engine.url))
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    shutdown = threading.Event()  # the app's own worker, as `medhelm demo` runs it
    worker = threading.Thread(target=run_worker, args=(sqlite_engine, WorkerOptions(poll_seconds=0.05)),
                              kwargs={"shutdown": shutdown})
    worker.start()
    yield sqlite_engine
    shutdown.set()
    worker.join(30)


def open_page(engine, username="researcher", password="researcher-demo", study: str | None = None) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=30)
    with transaction(engine) as s:
        at.session_state[TOKEN_KEY] = auth.sign_in(s, username, password).token
    at.run()
    if study is not None:
        at.selectbox[0].select(study).run()
    return at


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def wait_for_run(engine, run_id: int, timeout: float = 30) -> JuryRun:
    """The run once its job has ended (the worker thread works it)."""
    deadline = time.monotonic() + timeout
    while True:
        with Session(engine) as s:
            if live_job_for_run(s, run_id) is None:
                return s.get(JuryRun, run_id)
        assert time.monotonic() < deadline, f"run {run_id} did not end in {timeout} s"
        time.sleep(0.05)


def test_clinicians_cannot_open_the_jury_page(demo_db):
    at = open_page(demo_db, "clinician1", "clinician1-demo")
    assert [e.value for e in at.error] == ["Your account cannot open this page."]
    assert not at.text_area and not at.button


def test_a_recorded_run_is_labelled_as_recorded(demo_db, medhelm_ratings_csv):
    with transaction(demo_db) as s:
        study, _ = get_or_create_study(s, "medhelm-validation")
        import_paths(s, study, [medhelm_ratings_csv], "medhelm-ratings")
    at = open_page(demo_db, study="medhelm-validation")
    assert not at.exception
    assert "recorded" in at.dataframe[0].value["source"].iloc[0]
    assert any("Recorded jury scores" in w.value for w in at.warning)


def test_the_estimate_then_a_background_run_fills_every_verdict(demo_db):
    with FakeOpenAI() as server:
        at = open_page(demo_db, study="demo")
        at.text_area(key="jury_judges").input(f"{LOCAL_A} @ {server.base_url}").run()
        assert not at.exception and not at.error
        assert at.info[0].value.startswith("48 calls to make (48 verdicts planned")
        assert not server.calls  # the estimate calls nobody
        button(at, "Start the jury").click().run()
        run_id = at.session_state["jury_run"]
        run = wait_for_run(demo_db, run_id)
        assert (run.status, run.calls_done, run.calls_failed) == ("finished", 48, 0)
        assert len(server.calls) == 48
        at = open_page(demo_db, study="demo")  # a fresh session (a browser reload) reads it all from the database
    assert not at.exception
    assert "finished: 48 of 48 verdicts" in at.get("progress")[0].proto.text
    assert "48 of 48 items have a jury score" in at.caption[-1].value
    items = at.dataframe[1].value
    assert set(items["jury_score"]) == {4.0} and set(items["n_judges"]) == {1}
    shown = [t.value for t in at.text]
    assert f"{LOCAL_A}: 4. accuracy looks like 4." in shown  # judge text drawn with st.text
    assert not any("looks like" in m.value for m in at.markdown)
    assert any("jury mean 4.00 over 1 judges" in m.value for m in at.markdown)


def test_failed_verdicts_are_counted_and_shown_with_their_raw_text(demo_db):
    with FakeOpenAI() as server:
        make_study(demo_db, ["garbage", "good"], name="scripted")
        config = fast_config(server.base_url, (LOCAL_A, LOCAL_B))
        run_jury(demo_db, study_named(demo_db, "scripted"), config)
        at = open_page(demo_db, study="scripted")
        assert not at.exception
        assert "1 of 2 items have a jury score" in at.caption[-1].value
        assert "2 failed verdicts" in at.caption[-1].value
        assert any("Failed verdicts" in m.value for m in at.markdown)
        assert any("I would rather not give numbers." in c.value for c in at.code)
        assert any("no jury score (no surviving judge)" in m.value for m in at.markdown)
        assert not [b for b in at.button if b.label == "Resume"]  # nothing is left to do ...
        calls = len(server.calls)
        button(at, "Ask again where a verdict failed").click().run()  # ... but failures can be asked again
        run = wait_for_run(demo_db, at.session_state["jury_run"])
        assert len(server.calls) - calls == 4 and (run.calls_done, run.calls_failed) == (4, 2)


def test_stop_then_resume_from_the_page(demo_db):
    # Each call takes 0.25 s at concurrency 1, so the run outlasts opening the page and pressing Stop even on
    # a loaded machine (at 0.05 s it sometimes finished first).
    with FakeOpenAI(latency=0.25) as server:
        make_study(demo_db, ["good"] * 20, name="slow")
        at = open_page(demo_db, study="slow")
        at.text_area(key="jury_judges").input(f"{LOCAL_A} @ {server.base_url}").run()
        at.number_input[1].set_value(1).run()  # concurrency 1: the run takes a couple of seconds
        button(at, "Start the jury").click().run()
        run_id = at.session_state["jury_run"]
        deadline = time.monotonic() + 30
        while len(verdicts(demo_db)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        at = open_page(demo_db, study="slow")
        button(at, "Stop").click().run()
        run = wait_for_run(demo_db, run_id)
        assert run.status == "stopped" and 2 <= run.calls_done < 20
        at = open_page(demo_db, study="slow")
        assert "stopped" in at.get("progress")[0].proto.text
        button(at, "Resume").click().run()
        run = wait_for_run(demo_db, run_id)
        assert (run.status, run.calls_done) == ("finished", 20)
        assert len(server.calls) == 20


# --- prompt and rubric versions ----------------------------------------------------------------------------

def selectbox(at: AppTest, label: str):
    return next(s for s in at.selectbox if s.label == label)


def test_an_edited_template_is_saved_as_a_new_version_and_chosen(demo_db):
    from medhelm_core.db.models import AuditEvent
    from medhelm_core.jury.prompt import DEFAULT_TEMPLATE
    from medhelm_core.jury.templates import list_template_versions

    at = open_page(demo_db, study="demo")
    assert not at.exception
    assert selectbox(at, "Version of medhelm").value.startswith("v1: bundled default")
    assert any(c.value.strip() == DEFAULT_TEMPLATE.strip() for c in at.code)  # the template text, as code
    at.text_area(key="jury_prompt_edit_medhelm v1").input(DEFAULT_TEMPLATE + "\nBe strict.\n").run()
    assert any("until the edits are saved" in c.value for c in at.caption)
    at.text_input(key="jury_prompt_note").input("stricter accuracy").run()
    button(at, "Save as new version").click().run()
    assert not at.exception and [s.value for s in at.success] == ["Saved medhelm v2."]
    assert selectbox(at, "Version of medhelm").value == "v2: stricter accuracy (researcher)"
    assert at.text_area(key="jury_prompt_edit_medhelm v2").value.endswith("Be strict.\n")
    assert button(at, "Save as new version").disabled  # nothing edited yet
    with Session(demo_db) as s:
        versions = list_template_versions(s, "medhelm")
        saved = s.exec(select(AuditEvent).where(AuditEvent.action == "prompt_template.saved")).all()
    assert [(v.version, v.created_by) for v in versions] == [(1, "system"), (2, "researcher")]
    assert [e.actor for e in saved] == ["system", "researcher"]


def test_a_broken_template_is_refused_on_the_page_and_nothing_is_saved(demo_db):
    from medhelm_core.jury.templates import list_template_versions

    at = open_page(demo_db, study="demo")
    at.text_area(key="jury_prompt_edit_medhelm v1").input("Rate $response_block").run()
    assert any("needs $criteria" in e.value for e in at.error)  # the preview says so at once
    button(at, "Save as new version").click().run()
    assert not at.exception and not at.success
    with Session(demo_db) as s:
        assert [v.version for v in list_template_versions(s, "medhelm")] == [1]


def test_the_preview_shows_the_prompt_for_an_item_as_text(demo_db):
    hostile = "**not bold** <b>not html</b>"
    with transaction(demo_db) as s:
        study, _ = get_or_create_study(s, "hostile")
        s.add(Item(study_id=study.id, benchmark="medi_qa", instance_id="x1", model="m", input_text="Q?",
                   output_text=hostile, reference_text=None))
    at = open_page(demo_db, study="hostile")
    assert not at.exception
    preview = selectbox(at, "Preview the prompt for item")
    assert preview.format_func(preview.value) == "medi_qa / x1 / m"
    assert any(hostile in c.value and "<question_" in c.value for c in at.code)
    assert not any("not bold" in m.value for m in at.markdown)


def test_a_run_from_the_page_records_the_chosen_versions_and_the_table_shows_them(demo_db):
    from dataclasses import replace

    from medhelm_core.jury.prompt import DEFAULT_TEMPLATE
    from medhelm_core.jury.templates import save_template_version
    from medhelm_core.rubric import rubric_spec, save_rubric_version
    from medhelm_core.studies import get_study

    make_study(demo_db, ["good"] * 3, name="versions")
    with transaction(demo_db) as s:
        study = get_study(s, "versions")
        own = rubric_spec(s, study.rubric_id)
        save_rubric_version(s, study, replace(own, criteria=(replace(own.criteria[0], label="Medical accuracy"),
                                                             *own.criteria[1:])))
        save_template_version(s, "medhelm", DEFAULT_TEMPLATE + "\nBe strict.\n", note="stricter")
    with FakeOpenAI() as server:
        at = open_page(demo_db, study="versions")
        selectbox(at, "Rubric version the judges see").select("medhelm v2").run()
        assert any("Medical accuracy" in c.value and "Be strict." in c.value for c in at.code)  # the preview
        at.text_area(key="jury_judges").input(f"{LOCAL_A} @ {server.base_url}").run()
        button(at, "Start the jury").click().run()
        run = wait_for_run(demo_db, at.session_state["jury_run"])
        assert all("Medical accuracy" in c["messages"][0]["content"] for c in server.calls)
    assert (run.config["prompt_name"], run.config["prompt_version"], run.config["rubric"]["version"]) == (
        "medhelm", 2, 2)
    at = open_page(demo_db, study="versions")
    runs = at.dataframe[0].value
    assert runs[["judges", "rubric", "prompt"]].values.tolist() == [[LOCAL_A, "medhelm v2", "medhelm v2"]]


def test_failed_runs_are_hidden_until_asked_for_and_runs_are_labelled_by_their_judges(demo_db):
    from medhelm_core.db.models import JudgeVerdict, RunStatus
    from medhelm_core.figures.choices import version_names

    with transaction(demo_db) as s:
        study = study_named(demo_db, "demo")
        item_id = s.exec(select(Item.id).where(Item.study_id == study.id)).first()
        good = JuryRun(study_id=study.id, name="judges that answered", status=RunStatus.finished,
                       config={"judges": [{"model": "openai/gpt-4o-2024-05-13"}, {"model": "local/b"}],
                               "rubric": {"name": "medhelm", "version": 1}})
        bad = JuryRun(study_id=study.id, name="a key that was missing", status=RunStatus.failed,
                      config={"judges": [{"model": "openai/gpt-4o-2024-05-13"}]})
        s.add_all([good, bad])
        s.flush()
        s.add(JudgeVerdict(jury_run_id=good.id, item_id=item_id, judge="local/b", scores={"accuracy": 4}))
        good_id, bad_id = good.id, bad.id
    at = open_page(demo_db)
    assert not at.exception
    assert list(at.dataframe[0].value["run"]) == [good_id]
    show = at.toggle(key="jury_show_failed")
    assert show.label == "Show failed runs (1)"
    show.set_value(True).run()
    assert list(at.dataframe[0].value["run"]) == [bad_id, good_id]
    with Session(demo_db) as s:
        assert version_names(s, study_named(demo_db, "demo")) == {
            good_id: f"run {good_id}: gpt-4o + b (prompt unknown, rubric medhelm v1)"}
