"""The worker loop: claim a job, keep its lease while a handler works it, end it once, log one line.

``medhelm worker`` runs :func:`run_worker` in its main thread; the app runs it in a thread of its own on the
embedded SQLite database (:mod:`medhelm_core.jobs.app_worker`). Shutting down (``shutdown`` set, by SIGTERM in
the CLI) stops the job in hand after its calls in flight and gives it back to the queue, so another worker
resumes it at once instead of after the lease.

How a job ends:

- the handler returned: ``finished`` with its result (and file);
- it stopped on a cancel, or because its jury run was stopped from elsewhere: ``cancelled``;
- it stopped because the worker is shutting down: back to ``queued``;
- the lease was lost (the worker was cut off long enough for another to claim the job): nothing is written,
  the job is the other worker's now;
- it raised: ``failed`` with one line (a :class:`~medhelm_core.errors.MedhelmError`'s message as it is).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from medhelm_core.db.models import JobStatus
from medhelm_core.errors import MedhelmError, ValidationError
from medhelm_core.jobs.handlers import HANDLERS, JobContext, JobOutcome, JobStopped
from medhelm_core.jobs.queue import DEFAULT_LEASE_SECONDS, ClaimedJob, Lease, claim, fail, finish, release, renew
from medhelm_core.jobs.queue import worker_name as new_worker_name

__all__ = ["WorkerOptions", "run_worker", "work_one"]

log = logging.getLogger("medhelm.worker")

#: how often the lease keeper looks for a shutdown, between renewals
WATCH_SECONDS = 0.2


@dataclass(frozen=True)
class WorkerOptions:
    """What a worker takes and how: job kinds (all when empty), seconds between looks at an empty queue, the
    lease's length, and whether to stop after one job."""

    kinds: tuple[str, ...] = ()
    poll_seconds: float = 2.0
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    once: bool = False


def run_worker(
    engine: Engine,
    options: WorkerOptions = WorkerOptions(),
    *,
    shutdown: threading.Event | None = None,
    say: Callable[[str], None] = log.info,
    name: str | None = None,
) -> int:
    """Take jobs until ``shutdown`` is set (or, with ``once``, after one job or none); returns jobs worked.

    A database that cannot be reached is said once and tried again every ``poll_seconds``.
    """
    shutdown = shutdown or threading.Event()
    name = name or new_worker_name()
    kinds = tuple(options.kinds) or None
    worked, unreachable = 0, False
    say(f"worker {name}: taking {', '.join(kinds) if kinds else 'every kind of'} job(s), "
        f"lease {options.lease_seconds:g} s")
    while not shutdown.is_set():
        try:
            job = claim(engine, name, kinds=kinds, lease_seconds=options.lease_seconds)
        except Exception as exc:  # noqa: BLE001 - the database is down or not migrated: wait, do not die
            if not unreachable:
                say(f"worker {name}: cannot take jobs now ({exc}); trying again every {options.poll_seconds:g} s")
            unreachable = True
            shutdown.wait(options.poll_seconds)
            continue
        unreachable = False
        if job is None:
            if options.once:
                break
            shutdown.wait(options.poll_seconds)
            continue
        try:
            say(work_one(engine, job, options.lease_seconds, shutdown))
        except Exception as exc:  # noqa: BLE001 - its end could not be written: its lease runs out, another resumes it
            say(f"job {job.id} {job.kind}: could not record how it ended ({exc}); it is resumed after its lease")
        worked += 1
        if options.once:
            break
    say(f"worker {name}: stopped after {worked} job(s)")
    return worked


class _LeaseKeeper(threading.Thread):
    """Renews the job's lease every third of its length; sets the job's stop switch on a cancel, a shutdown or
    a lost lease, and remembers which."""

    def __init__(self, engine: Engine, job: ClaimedJob, lease_seconds: float, stop: threading.Event,
                 shutdown: threading.Event) -> None:
        super().__init__(name=f"lease-job-{job.id}", daemon=True)
        self.engine, self.job, self.lease_seconds = engine, job, lease_seconds
        self.stop, self.shutdown = stop, shutdown
        self.done = threading.Event()
        self.why: str | None = None  # "cancel", "shutdown" or "lost"

    def run(self) -> None:
        every = self.lease_seconds / 3
        next_renewal = time.monotonic() + every
        while not self.done.wait(min(WATCH_SECONDS, every)):
            if self.shutdown.is_set() and self.why is None:
                self._ask_stop("shutdown")
            if time.monotonic() < next_renewal:
                continue
            try:
                lease = renew(self.engine, self.job.id, self.job.worker, self.lease_seconds)
            except Exception:  # noqa: BLE001 - a missed renewal; the lease outlasts two more tries
                log.warning("job %s: could not renew its lease", self.job.id, exc_info=True)
                next_renewal = time.monotonic() + min(1.0, every)
                continue
            next_renewal = time.monotonic() + every
            if lease == Lease.lost:
                self.why = "lost"  # wins over everything: the job is someone else's now
                self.stop.set()
            elif lease == Lease.cancel and self.why is None:
                self._ask_stop("cancel")

    def _ask_stop(self, why: str) -> None:
        self.why = why
        self.stop.set()


def work_one(engine: Engine, job: ClaimedJob, lease_seconds: float = DEFAULT_LEASE_SECONDS,
             shutdown: threading.Event | None = None) -> str:
    """Work one claimed job to its end (see the module's docstring) and return the log line that says how."""
    shutdown = shutdown or threading.Event()
    started = time.monotonic()
    ctx = JobContext(engine, job)
    keeper = _LeaseKeeper(engine, job, lease_seconds, ctx.stop, shutdown)
    keeper.start()
    outcome: JobOutcome | None = None
    error: str | None = None
    try:
        handler = HANDLERS.get(job.kind)
        if handler is None:
            raise ValidationError(f"this worker knows no job kind {job.kind!r} (an older release?)")
        outcome = handler(ctx)
    except JobStopped:
        outcome = JobOutcome({}, "stopped", stopped=True)
    except MedhelmError as exc:
        error = str(exc)
    except Exception as exc:  # noqa: BLE001 - any failure ends the job as failed, in one line
        error = f"{type(exc).__name__}: {exc}"
    finally:
        keeper.done.set()
        keeper.join()
    ended = _end(engine, job, outcome, error, keeper.why)
    took = time.monotonic() - started
    where = f" study {job.study_id}" if job.study_id is not None else ""
    what = outcome.summary if outcome is not None else error
    return f"job {job.id} {job.kind}{where} attempt {job.attempts}: {ended} in {took:.1f} s: {what}"


def _end(engine: Engine, job: ClaimedJob, outcome: JobOutcome | None, error: str | None, why: str | None) -> str:
    """Write how the job ended; returns the word for the log."""
    if why == "lost":
        return "lost its lease (another worker has it)"
    if error is not None:
        return JobStatus.failed if fail(engine, job.id, job.worker, error) else "lost"
    assert outcome is not None
    if outcome.stopped and why == "shutdown":
        return "given back to the queue" if release(engine, job.id, job.worker) else "lost"
    status = JobStatus.cancelled if outcome.stopped else JobStatus.finished
    kept = finish(engine, job.id, job.worker, outcome.result, output=outcome.output, status=status)
    return status if kept else "lost"
