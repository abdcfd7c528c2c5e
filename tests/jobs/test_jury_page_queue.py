"""The Jury page queues a run as a job and says so while no worker has it yet: queued, and how many jobs are ahead;
Stop cancels the queued job before any judge is called; the run then resumes from the page like any other."""

from __future__ import annotations

from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest
from support.fake_openai_server import FakeOpenAI
from support.jury_support import LOCAL_A, make_study

from medhelm_core.accounts import auth
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Job, JobStatus, JuryRun
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "jury.py")


def open_page(engine) -> AppTest:  # noqa: ANN001
    at = AppTest.from_file(PAGE, default_timeout=30)
    with transaction(engine) as s:
        at.session_state[TOKEN_KEY] = auth.sign_in(s, "researcher", "researcher-demo").token
    at.run()
    at.selectbox[0].select("q").run()
    return at


def test_a_run_waits_in_the_queue_visibly_and_stop_cancels_it_before_any_call(sqlite_engine, monkeypatch):
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_engine.url))
    with transaction(sqlite_engine) as s:
        add_user(s, "researcher", "researcher", "researcher-demo")
    make_study(sqlite_engine, ["good"] * 3, name="q")
    with FakeOpenAI() as server:  # no worker runs in this test: the job waits
        at = open_page(sqlite_engine)
        at.text_area(key="jury_judges").input(f"{LOCAL_A} @ {server.base_url}").run()
        next(b for b in at.button if b.label == "Start the jury").click().run()
        assert not at.exception and not at.error
        run_id = at.session_state["jury_run"]
        at = open_page(sqlite_engine)  # a reload: all of it comes from the database
        assert any(c.value.startswith("job 1: queued, waiting for a worker (0 jobs ahead of it)") for c in at.caption)
        assert "pending: 0 of 3 verdicts" in at.get("progress")[0].proto.text
        next(b for b in at.button if b.label == "Stop").click().run()
        assert not at.exception
        with Session(sqlite_engine) as s:
            job = s.exec(select(Job)).one()
            run = s.get(JuryRun, run_id)
        assert (job.status, job.attempts, run.calls_done) == (JobStatus.cancelled, 0, 0)
        assert not server.calls
        at = open_page(sqlite_engine)
        assert [b.label for b in at.button if b.label == "Resume"] == ["Resume"]
