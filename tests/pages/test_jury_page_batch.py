"""The Jury page's Batch API switch: the estimate shows the batch price, and the queued run goes through the
provider's Files and Batches API (the loopback server's), its verdicts stored as the batch ends."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest
from support.fake_openai_server import FakeOpenAI
from support.jury_support import PRICED, make_study, verdicts

from medhelm_core.accounts import auth
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import JuryBatch, JuryRun
from medhelm_core.jobs import WorkerOptions, run_worker
from medhelm_core.jobs.queue import live_job_for_run
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "jury.py")


@pytest.fixture
def page_db(sqlite_engine, monkeypatch):
    with transaction(sqlite_engine) as s:
        add_user(s, "researcher", "researcher", "researcher-demo")
    make_study(sqlite_engine, ["good"] * 4, name="demo")
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_engine.url))
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    shutdown = threading.Event()  # the app's own worker, as `medhelm demo` runs it
    worker = threading.Thread(target=run_worker, args=(sqlite_engine, WorkerOptions(poll_seconds=0.05)),
                              kwargs={"shutdown": shutdown})
    worker.start()
    yield sqlite_engine
    shutdown.set()
    worker.join(30)


def test_the_batch_switch_prices_the_batch_api_and_runs_through_it(page_db):
    with FakeOpenAI() as server:
        at = AppTest.from_file(PAGE, default_timeout=30)
        with transaction(page_db) as s:
            at.session_state[TOKEN_KEY] = auth.sign_in(s, "researcher", "researcher-demo").token
        at.run()
        at.selectbox[0].select("demo").run()
        at.text_area(key="jury_judges").input(f"{PRICED} @ {server.base_url}").run()
        live = at.info[0].value
        at.toggle(key="jury_batch").set_value(True).run()
        assert not at.exception and not at.error
        batch = at.info[0].value
        assert "at batch prices" in batch and "at batch prices" not in live
        assert f"batch price from litellm's price map for {PRICED}" in batch
        next(b for b in at.button if b.label == "Start the jury").click().run()
        run_id = at.session_state["jury_run"]
        deadline = time.monotonic() + 60
        while True:
            with Session(page_db) as s:
                if live_job_for_run(s, run_id) is None:
                    run = s.get(JuryRun, run_id)
                    rows = s.exec(select(JuryBatch)).all()
                    break
            assert time.monotonic() < deadline, "the batch run did not end"
            time.sleep(0.05)
    assert (run.status, run.calls_done, run.calls_failed) == ("finished", 4, 0)
    assert len(server.batches.created) == 1 and sorted(server.batches.submitted.values()) == [1] * 4
    assert [r.status for r in rows] == ["collected"] and len(verdicts(page_db)) == 4
    assert not [c for c in server.calls if c["model"] != PRICED.split("/", 1)[1]]
