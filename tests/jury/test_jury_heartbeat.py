"""A run's heartbeat covers its whole life (issue 19, fix 12): from the moment it is marked running until it is marked
finished, including the seconds spent importing litellm, copying reused verdicts and storing the last answers, so a
busy worker never reads "interrupted" (which the page, the CLI and a resume would act on)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from sqlmodel import Session, select
from support.fake_openai_server import FakeOpenAI
from support.helpers import study_named
from support.jury_support import fast_config, make_study

from medhelm_core.db.models import JuryRun, RunStatus
from medhelm_core.jury import run_jury, runner, store
from medhelm_core.jury.calls import connect


def test_a_worker_busy_before_its_first_call_is_never_read_as_interrupted(sqlite_engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    # The real beat is every 2 s and a run is stale after 10 s; here ten times faster, with as much slack.
    monkeypatch.setattr(runner, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(runner, "STOP_POLL_SECONDS", 0.05)
    monkeypatch.setattr(store, "HEARTBEAT_STALE", timedelta(seconds=1.0))
    def slow_import(config):  # importing litellm or the openai SDK under load: seconds before the first call
        time.sleep(2.0)
        return connect(config)

    monkeypatch.setattr(runner, "connect", slow_import)
    make_study(sqlite_engine, ["good"] * 2, name="busy")
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:  # what the page and `medhelm jury status` read, ten times a second
        while not done.is_set():
            with Session(sqlite_engine) as s:
                for run in s.exec(select(JuryRun)).all():
                    seen.append(store.effective_status(run))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with FakeOpenAI() as server:
            summary = run_jury(sqlite_engine, study_named(sqlite_engine, "busy"), fast_config(server.base_url))
    finally:
        done.set()
        watcher.join()
    assert summary.status == RunStatus.finished and summary.done == 2
    assert RunStatus.running in seen and RunStatus.interrupted not in seen
