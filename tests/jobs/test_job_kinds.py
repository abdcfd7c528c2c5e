"""Each kind of job through a worker: a metric batch stores its scores, a report build keeps its zip in the job's
row (any app replica can hand it out), a jury job in batch mode goes through the batch runner, and a job that
fails says why in one line with no key in it."""

from __future__ import annotations

import io
import zipfile
from functools import partial

from sqlmodel import Session, select
from support.dashboard_support import add_small_study
from support.fake_openai_server import FakeOpenAI
from support.helpers import study_named
from support.jury_support import LOCAL_A, fast_config, make_study, the_run

from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Job, JobStatus, MetricScore
from medhelm_core.jobs import WorkerOptions, enqueue_jury_run, enqueue_metrics, enqueue_report, run_worker
from medhelm_core.jobs.overview import run_job_note
from medhelm_core.jury import batch
from medhelm_core.jury.batch_lines import BatchLimits


def work_the_queue(engine, **options) -> int:  # noqa: ANN001
    """One worker in this process, until the queue is empty."""
    done = 0
    while run_worker(engine, WorkerOptions(once=True, **options), say=lambda _: None):
        done += 1
    return done


def the_job(engine, job_id: int) -> Job:  # noqa: ANN001
    with Session(engine) as s:
        return s.get(Job, job_id)


def test_a_metrics_job_stores_the_scores_and_says_what_it_did(engine):
    make_study(engine, ["good"] * 5, name="m")
    with transaction(engine) as s:
        job_id = enqueue_metrics(s, study_named(engine, "m"), rouge_l=True, batch_size=2, actor="cli").id
    assert work_the_queue(engine) == 1
    job = the_job(engine, job_id)
    assert job.status == JobStatus.finished, job.error
    assert [(m["family"], m["scored"]) for m in job.result["metrics"]] == [("rougeL", 5), ("rougeLsum", 5)]
    assert job.progress["done"] == 5 or job.progress["family"]  # the last progress written
    with Session(engine) as s:
        assert len(s.exec(select(MetricScore)).all()) == 5 * 2 * 3  # two variants, F/P/R each


def test_a_report_job_keeps_its_zip_in_the_job_row(sqlite_engine):
    with transaction(sqlite_engine) as s:
        for name in ("clinician1", "clinician2"):
            add_user(s, name, "clinician", f"{name}-demo")
    add_small_study(str(sqlite_engine.url), "small")  # six items, two clinicians: the cheapest report there is
    with transaction(sqlite_engine) as s:
        job_id = enqueue_report(s, study_named(sqlite_engine, "small"), n_resamples=50, actor="researcher").id
    assert work_the_queue(sqlite_engine) == 1
    job = the_job(sqlite_engine, job_id)
    assert job.status == JobStatus.finished, job.error
    names = zipfile.ZipFile(io.BytesIO(job.output)).namelist()
    assert {"report.html", "report.pdf", "manifest.json"} <= set(names)
    assert job.result == {"filename": "report-small.zip", "bytes": len(job.output), "nothing_to_show": False}


def test_a_jury_job_in_batch_mode_goes_through_the_batch_runner(sqlite_engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setattr(batch, "BatchLimits", partial(BatchLimits, poll_seconds=0.05))  # poll the loopback often
    with FakeOpenAI() as server:
        make_study(sqlite_engine, ["good"] * 3, name="b")
        job_id, run_id = enqueue_jury_run(sqlite_engine, study_named(sqlite_engine, "b"),
                                          fast_config(server.base_url, (LOCAL_A,)), batch=True)
        assert work_the_queue(sqlite_engine) == 1
    job = the_job(sqlite_engine, job_id)
    assert job.status == JobStatus.finished, job.error
    assert the_run(sqlite_engine, run_id).calls_done == 3
    assert len(server.batches.created) == 1 and len(server.batches.submitted) == 3  # one batch, no live call
    assert job.result["status"] == "finished"


def test_a_failed_jury_job_says_why_in_one_line_and_the_page_shows_it(sqlite_engine, monkeypatch):
    monkeypatch.delenv("JUDGE_KEY", raising=False)
    make_study(sqlite_engine, ["good"] * 2, name="nokey")
    config = fast_config("http://127.0.0.1:9/v1", api_key_env="JUDGE_KEY")  # loopback, never called
    job_id, run_id = enqueue_jury_run(sqlite_engine, study_named(sqlite_engine, "nokey"), config)
    with Session(sqlite_engine) as s:
        assert run_job_note(s, run_id).text == "job 1: queued, waiting for a worker (0 jobs ahead of it)"
    assert work_the_queue(sqlite_engine) == 1
    job = the_job(sqlite_engine, job_id)
    assert job.status == JobStatus.failed and "JUDGE_KEY" in job.error and "\n" not in job.error
    with Session(sqlite_engine) as s:
        note = run_job_note(s, run_id)
    assert (note.live, note.error) == (False, job.error)
