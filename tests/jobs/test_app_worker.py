"""On the embedded SQLite default the app works queued jobs itself (so `medhelm demo` stays one command), and a
restart of the web process during a jury run loses nothing: the job goes back to the queue and the next start of
the app resumes it."""

from __future__ import annotations

import signal
import time

from conftest import REPO
from support.fake_openai_server import FakeOpenAI
from support.helpers import start_app, study_named
from support.job_support import the_job, wait_until
from support.jury_support import LOCAL_A, fast_config, make_study, the_run, verdicts

from medhelm_core.db.models import JobStatus
from medhelm_core.jobs import enqueue_jury_run
from medhelm_core.settings import app_worker_enabled


def stop_app(process) -> None:  # noqa: ANN001 - a Popen
    process.send_signal(signal.SIGTERM)  # what a supervisor's restart sends
    process.wait(30)


def test_the_apps_own_worker_resumes_a_jury_run_across_a_restart_of_the_web_process(sqlite_engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")  # the app's environment: on SQLite the app is the worker
    monkeypatch.delenv("MEDHELM_APP_WORKER", raising=False)
    url = str(sqlite_engine.url)
    assert app_worker_enabled(url)
    n = 24
    with FakeOpenAI(latency=0.15) as server:
        make_study(sqlite_engine, ["good"] * n, name="demo")
        job_id, run_id = enqueue_jury_run(sqlite_engine, study_named(sqlite_engine, "demo"),
                                          fast_config(server.base_url, (LOCAL_A,), concurrency=2))
        _, app = start_app(REPO, url)
        try:
            wait_until(lambda: the_run(sqlite_engine, run_id).calls_done >= 4, 40, "the app's worker", [app])
        finally:
            stop_app(app)
        job = the_job(sqlite_engine, job_id)
        assert job.status == JobStatus.queued, "the stopping app gives its job back"
        between = the_run(sqlite_engine, run_id).calls_done
        time.sleep(0.5)
        assert the_run(sqlite_engine, run_id).calls_done == between < n  # nothing works it while no app runs
        _, app = start_app(REPO, url)
        try:
            wait_until(lambda: the_job(sqlite_engine, job_id).status == JobStatus.finished, 40, "the resume", [app])
        finally:
            stop_app(app)
    job, run = the_job(sqlite_engine, job_id), the_run(sqlite_engine, run_id)
    assert (job.attempts, run.status, run.calls_done) == (2, "finished", n)
    rows = verdicts(sqlite_engine)
    assert len(rows) == n and len({(v.item_id, v.judge) for v in rows}) == n
    assert len(server.calls) == n  # a clean restart asks nothing twice
