"""What the pages and ``medhelm jobs`` show of the queue: a jury run's job in one sentence, and a list of jobs.
Read-only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.db.models import Job, JobStatus, utcnow
from medhelm_core.jobs.queue import LIVE_STATUSES

__all__ = ["JobNote", "jobs_rows", "run_job_note"]


@dataclass(frozen=True)
class JobNote:
    """Where a jury run's newest job stands: whether it is waiting or being worked, and a sentence saying so."""

    job_id: int
    status: str
    text: str
    error: str | None = None

    @property
    def live(self) -> bool:
        """True while the job is queued or running: the page keeps watching."""
        return self.status in LIVE_STATUSES


def _aware(when: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes (stored in UTC); PostgreSQL aware ones.
    return when if when is None or when.tzinfo is not None else when.replace(tzinfo=utcnow().tzinfo)


def run_job_note(session: Session, run_id: int, now: datetime | None = None) -> JobNote | None:
    """The newest job of jury run ``run_id`` in a sentence (None when the run was never queued).

    Examples
    --------
    >>> run_job_note(session, run_id).text  # doctest: +SKIP
    'job 4: queued, waiting for a worker (1 job ahead of it)'
    """
    job = session.exec(select(Job).where(Job.jury_run_id == run_id).order_by(Job.id.desc()).limit(1)).first()
    if job is None:
        return None
    now = now or utcnow()
    if job.status == JobStatus.queued:
        ahead = session.exec(select(func.count()).select_from(Job).where(
            Job.status.in_(LIVE_STATUSES), Job.id < job.id)).one()
        text = f"job {job.id}: queued, waiting for a worker ({ahead} job{'s' if ahead != 1 else ''} ahead of it)"
        if job.attempts:
            text += f"; given back by worker {job.worker}"
    elif job.status == JobStatus.running:
        lease = _aware(job.lease_until)
        text = f"job {job.id}: claimed by worker {job.worker} (attempt {job.attempts})"
        if lease is not None and lease < now:
            text += ("; its worker has not renewed its lease for "
                     f"{(now - lease).total_seconds():.0f} s: another worker takes it over")
        if job.cancel_requested:
            text += "; stopping"
    else:
        text = f"job {job.id}: {job.status}"
    return JobNote(job.id, job.status, text, job.error)


def jobs_rows(session: Session, *, live_only: bool = False, limit: int = 50) -> list[dict[str, Any]]:
    """The newest jobs, one plain row each (no payload, no file): for ``medhelm jobs list``."""
    query = select(Job).order_by(Job.id.desc()).limit(limit)
    if live_only:
        query = query.where(Job.status.in_(LIVE_STATUSES))
    return [{"id": j.id, "kind": j.kind, "status": j.status, "study_id": j.study_id, "jury_run_id": j.jury_run_id,
             "worker": j.worker, "attempts": j.attempts, "created_by": j.created_by,
             "created_at": j.created_at.isoformat() if j.created_at else None,
             "finished_at": j.finished_at.isoformat() if j.finished_at else None,
             "progress": j.progress, "error": j.error} for j in session.exec(query).all()]
