"""Work taken off the web process: a job queue in the database and the workers that take from it.

- :mod:`~medhelm_core.jobs.queue`: enqueue, claim under a lease (``FOR UPDATE SKIP LOCKED`` on PostgreSQL),
  renew, finish, fail, give back, cancel.
- :mod:`~medhelm_core.jobs.handlers`: what each kind of job does (jury runs, metric batches, report builds)
  and how the pages and the CLI queue each.
- :mod:`~medhelm_core.jobs.worker`: the loop of ``medhelm worker``.
- :mod:`~medhelm_core.jobs.app_worker`: the app's own worker thread on the embedded SQLite database.
- :mod:`~medhelm_core.jobs.overview`: what the pages and ``medhelm jobs`` show of the queue.

Importing this package imports neither litellm nor the metrics' or the report's libraries; working a job does.
"""

from medhelm_core.jobs.handlers import enqueue_jury_run, enqueue_metrics, enqueue_report, stop_jury_run
from medhelm_core.jobs.overview import JobNote, jobs_rows, run_job_note
from medhelm_core.jobs.queue import DEFAULT_LEASE_SECONDS, cancel, claim, enqueue, get_job
from medhelm_core.jobs.worker import WorkerOptions, run_worker, work_one

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "JobNote",
    "WorkerOptions",
    "cancel",
    "claim",
    "enqueue",
    "enqueue_jury_run",
    "enqueue_metrics",
    "enqueue_report",
    "get_job",
    "jobs_rows",
    "run_job_note",
    "run_worker",
    "stop_jury_run",
    "work_one",
]
