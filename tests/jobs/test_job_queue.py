"""The job queue: each job is claimed by one worker at a time, a dead worker's job is claimed again once its lease
has run out, a worker that lost its job can no longer change it, and a jury run has one live job."""

from __future__ import annotations

import threading
import time

import pytest
from sqlmodel import Session, select
from support.helpers import study_named
from support.jury_support import fast_config, make_study

from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Job, JobKind, JobStatus
from medhelm_core.jobs import enqueue, enqueue_jury_run
from medhelm_core.jobs.queue import MAX_ATTEMPTS, Lease, cancel, claim, fail, finish, release, renew


def queue_jobs(engine, n: int) -> list[int]:
    with transaction(engine) as session:
        jobs = [enqueue(session, JobKind.report, {"n": i}) for i in range(n)]
        session.flush()
        return [j.id for j in jobs]


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)  # SQLite has one worker
def test_two_workers_racing_for_the_queue_claim_each_job_once(engine):
    ids = queue_jobs(engine, 120)
    claims: dict[str, list[int]] = {"w1": [], "w2": [], "w3": []}
    start = threading.Barrier(len(claims))

    def work(name: str) -> None:
        own = make_engine(engine.url.render_as_string(hide_password=False))  # a process of its own, as it were
        start.wait()
        while (job := claim(own, name, lease_seconds=30)) is not None:
            claims[name].append(job.id)
            assert finish(own, job.id, name, {"by": name})
        own.dispose()

    threads = [threading.Thread(target=work, args=(name,)) for name in claims]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    taken = [i for got in claims.values() for i in got]
    assert sorted(taken) == ids  # every job once: none twice, none missed
    assert sum(1 for got in claims.values() if got) >= 2  # they did race
    with Session(engine) as s:
        rows = s.exec(select(Job)).all()
    assert {r.status for r in rows} == {JobStatus.finished} and {r.attempts for r in rows} == {1}
    assert all(r.result["by"] == r.worker for r in rows)


def test_a_dead_workers_job_is_claimed_again_once_its_lease_has_run_out(engine):
    [job_id] = queue_jobs(engine, 1)
    first = claim(engine, "dead", lease_seconds=0.5)
    assert first.id == job_id and first.attempts == 1
    assert claim(engine, "alive", lease_seconds=30) is None  # the lease holds
    time.sleep(0.7)
    second = claim(engine, "alive", lease_seconds=30)
    assert (second.id, second.attempts, second.previous_worker) == (job_id, 2, "dead")
    # The dead worker, back from the dead, can neither renew, nor report, nor end the job.
    assert renew(engine, job_id, "dead") == Lease.lost
    assert not finish(engine, job_id, "dead", {}) and not fail(engine, job_id, "dead", "x")
    assert renew(engine, job_id, "alive") == Lease.held
    assert finish(engine, job_id, "alive", {"ok": True})
    with Session(engine) as s:
        job = s.get(Job, job_id)
    assert (job.status, job.worker, job.result) == (JobStatus.finished, "alive", {"ok": True})


def test_a_job_given_back_is_claimed_at_once_and_one_that_keeps_killing_its_worker_fails(engine):
    [job_id] = queue_jobs(engine, 1)
    job = claim(engine, "w", lease_seconds=30)
    assert release(engine, job.id, "w")
    assert claim(engine, "v", lease_seconds=30).id == job_id  # no wait for the lease
    for _ in range(MAX_ATTEMPTS - 2):  # claims 3, 4 and 5
        with transaction(engine) as s:  # its worker dies, again and again
            s.get(Job, job_id).lease_until = s.get(Job, job_id).claimed_at
        assert claim(engine, "v", lease_seconds=30) is not None
    with transaction(engine) as s:
        s.get(Job, job_id).lease_until = s.get(Job, job_id).claimed_at
    assert claim(engine, "v", lease_seconds=30) is None
    with Session(engine) as s:
        job = s.get(Job, job_id)
    assert job.status == JobStatus.failed and "claimed 5 times and never ended" in job.error


def test_cancel_ends_a_queued_job_and_asks_a_running_one_to_stop(engine):
    first, second = queue_jobs(engine, 2)
    assert claim(engine, "w").id == first
    assert cancel(engine, second) == JobStatus.cancelled  # never claimed
    assert claim(engine, "v") is None
    assert cancel(engine, first) == JobStatus.running  # its worker sees it at its next renewal
    assert renew(engine, first, "w") == Lease.cancel


def test_a_jury_run_has_one_live_job(engine):
    make_study(engine, ["good"] * 2, name="one")
    config = fast_config("http://127.0.0.1:9/v1")
    study = study_named(engine, "one")
    first = enqueue_jury_run(engine, study, config, actor="cli")
    again = enqueue_jury_run(engine, study, config, actor="cli")
    assert first == again
    with Session(engine) as s:
        assert len(s.exec(select(Job)).all()) == 1
        job = s.get(Job, first[0])
    assert (job.kind, job.status, job.jury_run_id, job.created_by) == ("jury_run", "queued", first[1], "cli")


def test_a_queued_jobs_next_worker_takes_its_run_over_at_once_and_nobody_else_does(engine):
    from medhelm_core.errors import RunBusyError
    from medhelm_core.jury.store import open_run

    make_study(engine, ["good"], name="held")
    config = fast_config("http://127.0.0.1:9/v1")
    with transaction(engine) as s:  # job 1's worker claims the run, then dies: its heartbeat is still fresh
        open_run(s, study_named(engine, "held"), config, holder="job:1")
    for other in (None, "job:2"):  # a terminal's `medhelm jury run`, another job: refused while it is fresh
        with pytest.raises(RunBusyError), transaction(engine) as s:
            open_run(s, study_named(engine, "held"), config, holder=other)
    with transaction(engine) as s:  # job 1's next worker (the lease said the last one is gone): at once
        run = open_run(s, study_named(engine, "held"), config, holder="job:1")
        assert run.status == "running"
