"""The job queue in the database: enqueue, claim under a lease, renew it, and end a job once.

Claiming takes the oldest claimable job (queued, or running with an expired lease) with
``SELECT ... FOR UPDATE SKIP LOCKED``: on PostgreSQL any number of workers on any machines claim at once and
never the same job (a row another worker is claiming is skipped, not waited for). SQLite has no row locks;
there the claim takes the database's write lock (:func:`~medhelm_core.db.engine.hold_write_lock`), which is
just as safe and serialises the claims of the one worker the embedded database is meant for.

A lease is the promise "this worker is alive and working the job until ``lease_until``". The worker renews it
(every third of its length); a worker that dies, or is cut off from the database, stops renewing, and once
the lease has run out the job is claimable again. Every write a worker makes to its job (renew, progress,
finish) names the worker and the ``running`` status, so a worker that lost its job to another can no longer
change it. Lease times come from the workers' clocks: keep the machines on NTP (a lease is tens of seconds).
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from itertools import count
from typing import Any

from sqlalchemy import and_, or_, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from medhelm_core.db.audit import Actor, _who  # the one rule for an actor's name
from medhelm_core.db.engine import hold_write_lock, transaction
from medhelm_core.db.models import Job, JobKind, JobStatus, JuryRun, utcnow
from medhelm_core.errors import NotFoundError, ValidationError

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "ClaimedJob",
    "Lease",
    "cancel",
    "claim",
    "enqueue",
    "fail",
    "finish",
    "get_job",
    "live_job_for_run",
    "release",
    "renew",
    "set_progress",
    "worker_name",
]

#: how long a claim lasts without renewal: how long a dead worker's job waits before another worker resumes it
DEFAULT_LEASE_SECONDS = 30.0
#: a job whose worker died this many times is failed rather than claimed again (a job that kills its worker)
MAX_ATTEMPTS = 5
LIVE_STATUSES = (JobStatus.queued, JobStatus.running)
_worker_numbers = count(1)
_numbers_lock = threading.Lock()


def worker_name() -> str:
    """A name no other worker has now: ``host:pid:n`` (n tells apart the workers of one process)."""
    with _numbers_lock:
        n = next(_worker_numbers)
    return f"{socket.gethostname()}:{os.getpid()}:{n}"


@dataclass(frozen=True)
class ClaimedJob:
    """A job as its worker got it: what to do, and which claim this is."""

    id: int
    kind: str
    payload: dict[str, Any]
    worker: str
    attempts: int
    created_by: str
    study_id: int | None = None
    jury_run_id: int | None = None
    #: the worker that held it before, when this claim took over an expired lease
    previous_worker: str | None = None


class Lease(StrEnum):
    """What a renewal found: the job is still ours, someone asked to cancel it, or it is no longer ours."""

    held = "held"
    cancel = "cancel"
    lost = "lost"


def enqueue(
    session: Session,
    kind: JobKind | str,
    payload: dict[str, Any],
    *,
    study_id: int | None = None,
    jury_run_id: int | None = None,
    actor: Actor = None,
) -> Job:
    """Add a job to the queue in the caller's transaction (it is claimable once committed).

    A jury run has at most one live job: enqueueing it again returns the job already queued or running.

    Examples
    --------
    >>> job = enqueue(session, JobKind.metrics, {"rouge_l": True}, study_id=study.id)  # doctest: +SKIP
    >>> job.status  # doctest: +SKIP
    'queued'
    """
    try:
        kind = JobKind(kind)
    except ValueError:
        raise ValidationError(f"job kind {kind!r} unknown; use one of {', '.join(JobKind)}") from None
    if jury_run_id is not None:
        # Two enqueues of one run at once (two tabs, a double click): the run's row lock (SQLite: the write lock)
        # orders them, so the second finds the first one's job; the partial unique index backs this up.
        hold_write_lock(session)
        session.exec(select(JuryRun.id).where(JuryRun.id == jury_run_id).with_for_update()).first()
        live = live_job_for_run(session, jury_run_id)
        if live is not None:
            return live
    job = Job(kind=kind.value, payload=dict(payload), study_id=study_id, jury_run_id=jury_run_id,
              created_by=_who(actor)[1])
    session.add(job)
    session.flush()
    return job


def live_job_for_run(session: Session, jury_run_id: int) -> Job | None:
    """The queued or running job of a jury run, if any."""
    return session.exec(
        select(Job).where(Job.jury_run_id == jury_run_id, Job.status.in_(LIVE_STATUSES))
    ).first()


def get_job(session: Session, job_id: int) -> Job:
    """Job ``job_id``; :class:`NotFoundError` when there is none."""
    job = session.get(Job, job_id)
    if job is None:
        raise NotFoundError(f"no job with id {job_id}")
    return job


def claim(
    engine: Engine,
    worker: str,
    *,
    kinds: tuple[str, ...] | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
) -> ClaimedJob | None:
    """Claim the oldest claimable job of ``kinds`` (all when None) for ``worker``; None when there is none.

    A running job whose lease has expired is claimable: its worker died. A job claimed :data:`MAX_ATTEMPTS`
    times already is failed instead, and the next one is looked at.
    """
    while True:
        now = utcnow()
        with transaction(engine) as session:
            hold_write_lock(session)
            claimable = or_(Job.status == JobStatus.queued,
                            and_(Job.status == JobStatus.running, Job.lease_until < now))
            query = select(Job).where(claimable)
            if kinds:
                query = query.where(Job.kind.in_(list(kinds)))
            job = session.exec(query.order_by(Job.id).limit(1).with_for_update(skip_locked=True)).first()
            if job is None:
                return None
            previous = job.worker if job.status == JobStatus.running else None
            if job.cancel_requested or job.attempts >= MAX_ATTEMPTS:
                job.status = JobStatus.cancelled if job.cancel_requested else JobStatus.failed
                job.error = None if job.cancel_requested else (
                    f"claimed {job.attempts} times and never ended: its workers died (killed, out of memory?); "
                    "queue it again to retry")
                job.finished_at, job.lease_until = now, None
                session.add(job)
                continue
            job.status, job.worker, job.claimed_at = JobStatus.running, worker, now
            job.lease_until = now + timedelta(seconds=lease_seconds)
            job.attempts += 1
            session.add(job)
            return ClaimedJob(id=job.id, kind=job.kind, payload=dict(job.payload or {}), worker=worker,
                              attempts=job.attempts, created_by=job.created_by, study_id=job.study_id,
                              jury_run_id=job.jury_run_id, previous_worker=previous)


def _held(job_id: int, worker: str) -> Any:
    return and_(Job.id == job_id, Job.worker == worker, Job.status == JobStatus.running)


def renew(engine: Engine, job_id: int, worker: str, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> Lease:
    """Extend ``worker``'s lease on the job; say whether it is still held, asked to cancel, or lost."""
    with transaction(engine) as session:
        moved = session.exec(
            update(Job).where(_held(job_id, worker))
            .values(lease_until=utcnow() + timedelta(seconds=lease_seconds))
        ).rowcount
        if not moved:
            return Lease.lost
        asked = session.exec(select(Job.cancel_requested).where(Job.id == job_id)).one()
    return Lease.cancel if asked else Lease.held


def set_progress(engine: Engine, job_id: int, worker: str, progress: dict[str, Any]) -> bool:
    """Store where the job stands (for the pages); False when the job is no longer ``worker``'s."""
    with transaction(engine) as session:
        return bool(session.exec(update(Job).where(_held(job_id, worker)).values(progress=progress)).rowcount)


def _end(engine: Engine, job_id: int, worker: str, **values: Any) -> bool:
    with transaction(engine) as session:
        return bool(session.exec(update(Job).where(_held(job_id, worker)).values(**values)).rowcount)


def finish(engine: Engine, job_id: int, worker: str, result: dict[str, Any], *, output: bytes | None = None,
           status: JobStatus = JobStatus.finished) -> bool:
    """End the job as done (or ``cancelled``) with its result; False when it was no longer ``worker``'s."""
    return _end(engine, job_id, worker, status=status, result=result, output=output, finished_at=utcnow(),
                lease_until=None, error=None)


def fail(engine: Engine, job_id: int, worker: str, error: str) -> bool:
    """End the job as failed with a one-line reason (keys already redacted); False when it was not ours."""
    return _end(engine, job_id, worker, status=JobStatus.failed, error=error, finished_at=utcnow(),
                lease_until=None)


def release(engine: Engine, job_id: int, worker: str) -> bool:
    """Give the job back to the queue at once (a worker shutting down): another worker resumes it now rather
    than after the lease."""
    return _end(engine, job_id, worker, status=JobStatus.queued, lease_until=None)


def cancel(engine: Engine, job_id: int) -> str:
    """Cancel a job: a queued one ends now; a running one is asked to stop (its worker sees it at its next
    renewal and ends it after the calls in flight). Returns the job's status after the request."""
    with transaction(engine) as session:
        hold_write_lock(session)
        job = session.exec(select(Job).where(Job.id == job_id).with_for_update()).first()
        if job is None:
            raise NotFoundError(f"no job with id {job_id}")
        if job.status == JobStatus.queued:
            job.status, job.finished_at = JobStatus.cancelled, utcnow()
        elif job.status == JobStatus.running:
            job.cancel_requested = True
        session.add(job)
        return job.status
