"""The Jury page: researchers only; estimate, start in the background, progress from the database, stop and
resume, results per item and criterion with failures shown, recorded runs labelled, model text as text."""

from __future__ import annotations

import time

import pytest
from conftest import REPO
from fake_openai_server import FakeOpenAI
from jury_support import LOCAL_A, LOCAL_B, fast_config, make_study, verdicts
from sqlmodel import Session
from streamlit.testing.v1 import AppTest

from medhelm_core import auth
from medhelm_core.db import transaction
from medhelm_core.importers import import_paths
from medhelm_core.jury import background, run_jury
from medhelm_core.models import JuryRun
from medhelm_core.studies import get_or_create_study
from medhelm_core.users import add_user
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
    return sqlite_engine


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
    assert background.wait(run_id, timeout)
    with Session(engine) as s:
        return s.get(JuryRun, run_id)


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
        run_jury(demo_db, "scripted", config)
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
    with FakeOpenAI(latency=0.05) as server:
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
