"""`medhelm worker` processes against PostgreSQL and the loopback judge server: a worker killed mid-job (SIGKILL)
loses only its calls in flight, another worker resumes the job once its lease has run out, every verdict is stored
once; the job goes on with no web process at all; SIGTERM gives the job in hand back to the queue at once."""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest
from sqlmodel import Session, select
from support.fake_openai_server import FakeOpenAI
from support.helpers import study_named
from support.job_support import start_worker, stop_workers, the_job, wait_until
from support.jury_support import LOCAL_A, fast_config, make_study, the_run, verdicts

from medhelm_core.db.models import JobStatus, JudgeVerdict
from medhelm_core.jobs import enqueue_jury_run

LEASE = 2.0
CONCURRENCY = 4
#: workers on several machines is the PostgreSQL deployment (SQLite has the app's one worker: test_app_worker.py)
pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


@pytest.fixture
def pg_engine(engine):
    return engine


def test_a_worker_killed_mid_job_is_resumed_by_another_and_every_verdict_is_stored_once(pg_engine):
    n = 60
    with FakeOpenAI(latency=0.15) as server:
        make_study(pg_engine, ["good"] * n, name="big")
        job_id, run_id = enqueue_jury_run(pg_engine, study_named(pg_engine, "big"),
                                          fast_config(server.base_url, (LOCAL_A,), concurrency=CONCURRENCY))
        workers = [start_worker(pg_engine), start_worker(pg_engine)]
        try:
            wait_until(lambda: the_run(pg_engine, run_id).calls_done >= 12, 40, "verdicts", workers)
            holder = the_job(pg_engine, job_id).worker
            victim = next(w for w in workers if w.pid == worker_pid(holder))
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            killed_at, before = time.monotonic(), the_run(pg_engine, run_id).calls_done
            assert before < n, "the job was done before the kill: make it slower"
            survivor = next(w for w in workers if w is not victim)
            wait_until(lambda: the_job(pg_engine, job_id).status == JobStatus.finished, 40, "the resume",
                       [survivor])
            took_over = time.monotonic() - killed_at
        finally:
            logs = stop_workers(workers)
    job, run = the_job(pg_engine, job_id), the_run(pg_engine, run_id)
    assert (job.attempts, run.status, run.calls_done, run.calls_failed) == (2, "finished", n, 0)
    assert job.worker != holder and f":{survivor.pid}:" in job.worker
    rows = verdicts(pg_engine)
    assert len(rows) == n and len({(v.item_id, v.judge) for v in rows}) == n
    # The server was asked again only what was in flight when the worker died.
    repeats = sum(count - 1 for count in Counter((c["model"], str(c["messages"])) for c in server.calls).values())
    assert repeats <= CONCURRENCY
    assert took_over < LEASE + 15  # the lease, the survivor's start of litellm, the rest of the calls
    assert f"job {job_id} jury_run" in logs[workers.index(survivor)]  # one line per job


def test_sigterm_gives_the_job_back_at_once_and_it_goes_on_with_no_web_process(pg_engine):
    n = 40
    with FakeOpenAI(latency=0.15) as server:
        make_study(pg_engine, ["good"] * n, name="term")
        job_id, run_id = enqueue_jury_run(pg_engine, study_named(pg_engine, "term"),
                                          fast_config(server.base_url, (LOCAL_A,), concurrency=2))
        # A long lease: the other worker can only take the job this soon if it is given back.
        workers = [start_worker(pg_engine, lease=60), start_worker(pg_engine, lease=60)]
        try:
            wait_until(lambda: the_run(pg_engine, run_id).calls_done >= 6, 40, "verdicts", workers)
            holder = the_job(pg_engine, job_id).worker
            first = next(w for w in workers if w.pid == worker_pid(holder))
            first.send_signal(signal.SIGTERM)
            assert first.wait(15) == 0  # a clean exit after the calls in flight
            log = first.stderr.read()
            assert "given back to the queue" in log and f"job {job_id} jury_run" in log
            stopped_at = the_run(pg_engine, run_id).calls_done
            other = next(w for w in workers if w is not first)
            wait_until(lambda: the_job(pg_engine, job_id).status == JobStatus.finished, 30, "the other worker",
                       [other])
        finally:
            stop_workers(workers)
    job, run = the_job(pg_engine, job_id), the_run(pg_engine, run_id)
    assert (job.attempts, run.status, run.calls_done) == (2, "finished", n)
    assert f":{other.pid}:" in job.worker and stopped_at < n
    with Session(pg_engine) as s:
        assert len(s.exec(select(JudgeVerdict)).all()) == n
    assert len(server.calls) == n  # a clean stop asks nothing twice


def worker_pid(worker: str) -> int:
    """The process id in a worker's name (``host:pid:n``)."""
    return int(worker.split(":")[-2])
