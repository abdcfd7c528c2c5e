"""What each kind of job does: one handler per :class:`~medhelm_core.db.models.JobKind`, and how to queue each.

A handler gets a :class:`JobContext` (the engine, the claimed job, a stop switch) and returns a
:class:`JobOutcome`. Every handler resumes: a jury run from its stored verdicts, a metric batch from the scores
already stored with the same settings, a report is simply built again. So a job claimed again after its worker
died loses only what was in flight. The stop switch is set when the job is cancelled, when the worker shuts
down (SIGTERM) and when the worker lost its lease; a handler stops soon after, keeping what it has stored.

The ``enqueue_*`` functions are what the pages and the CLI call: they check the request once, at the boundary,
and add the job in the caller's transaction.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from medhelm_core.db.audit import Actor
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Job, JobKind, JuryRun, RunStatus, Study
from medhelm_core.errors import MedhelmError, NotFoundError, ValidationError
from medhelm_core.jobs.queue import ClaimedJob, enqueue, set_progress
from medhelm_core.studies import get_study_by_id

if TYPE_CHECKING:
    from medhelm_core.jury.config import JuryConfig

__all__ = ["HANDLERS", "JobContext", "JobOutcome", "JobStopped", "enqueue_jury_run", "enqueue_metrics",
           "enqueue_report", "stop_jury_run"]

#: at most one progress write per job in this many seconds (the pages poll once a second)
PROGRESS_EVERY_SECONDS = 1.0


class JobStopped(Exception):
    """The job was asked to stop (cancelled, the worker shutting down, its lease lost) before it was done."""


@dataclass
class JobContext:
    """What a handler works with: the database, its job, and the switch that asks it to stop."""

    engine: Engine
    job: ClaimedJob
    stop: threading.Event = field(default_factory=threading.Event)
    _last_progress: float = 0.0

    @property
    def holder(self) -> str:
        """The job's name as the holder of what it works on (a jury run): the same for every claim of it."""
        return f"job:{self.job.id}"

    def check(self) -> None:
        """Raise :class:`JobStopped` when asked to stop: called between units of work that are stored."""
        if self.stop.is_set():
            raise JobStopped

    def progress(self, force: bool = False, **values: Any) -> None:
        """Store where the job stands for the pages, at most once per :data:`PROGRESS_EVERY_SECONDS`."""
        now = time.monotonic()
        if force or now - self._last_progress >= PROGRESS_EVERY_SECONDS:
            self._last_progress = now
            set_progress(self.engine, self.job.id, self.job.worker, values)


@dataclass
class JobOutcome:
    """How a handler ended: its result for the job row, a file it made, whether it stopped before the end."""

    result: dict[str, Any]
    summary: str
    output: bytes | None = None
    stopped: bool = False


def _study(session: Session, job: ClaimedJob) -> Study:
    if job.study_id is None:
        raise ValidationError(f"job {job.id} names no study")
    return get_study_by_id(session, job.study_id)


# --- jury runs ----------------------------------------------------------------------------------------------

def enqueue_jury_run(
    engine: Engine, study: Study, config: JuryConfig, *, retry_failed: bool = False, batch: bool = False,
    actor: Actor = None,
) -> tuple[int, int]:
    """Queue a jury run (or its resume) for ``config``: returns (job id, run id) at once.

    The run is created (``pending``) now, so the page can show it while it waits for a worker; a run that
    already has a live job gets that job back. Raises :class:`~medhelm_core.errors.RunBusyError` when the
    run is running right now (its job's worker, or ``medhelm jury run`` in a terminal).
    """
    from medhelm_core.jury.runner import prepare_run

    run_id = prepare_run(engine, study, config)
    with transaction(engine) as session:
        job = enqueue(session, JobKind.jury_run, {"retry_failed": bool(retry_failed), "batch": bool(batch)},
                      study_id=study.id, jury_run_id=run_id, actor=actor)
        return job.id, run_id


def run_jury_job(ctx: JobContext) -> JobOutcome:
    """Run (or resume) the job's jury run, as ``medhelm jury run`` (``--batch``) does: live calls through
    :func:`~medhelm_core.jury.runner.run_jury`, or the providers' batch APIs through
    :func:`~medhelm_core.jury.batch.run_jury_batch` for a job queued in batch mode.

    The config is the one stored in the run (written when the job was queued); the keys come from this
    worker's environment. The job's name is the run's holder, so its next worker takes over at once.
    """
    from medhelm_core.jury.calls import redact, secret_values
    from medhelm_core.jury.run_versions import stored_config

    job = ctx.job
    with transaction(ctx.engine) as session:
        study = _study(session, job)
        run = session.get(JuryRun, job.jury_run_id) if job.jury_run_id is not None else None
        if run is None:
            raise NotFoundError(f"job {job.id}: its jury run {job.jury_run_id} no longer exists")
        config = stored_config(session, study, run)
    if job.payload.get("batch"):
        from medhelm_core.jury.batch import run_jury_batch as run
    else:
        from medhelm_core.jury.runner import run_jury as run

    def on_progress(p: Any) -> None:
        ctx.progress(done=p.done, failed=p.failed, planned=p.planned, calls_made=p.calls_made)

    try:
        summary = run(ctx.engine, study, config, retry_failed=bool(job.payload.get("retry_failed")), stop=ctx.stop,
                      on_progress=on_progress, actor=job.created_by, holder=ctx.holder)
    except MedhelmError:
        raise
    except Exception as exc:  # the run row holds the redacted error too; the job says it in one line
        raise MedhelmError(redact(f"{type(exc).__name__}: {exc}", secret_values(config))) from None
    mode = "batch run" if job.payload.get("batch") else "run"
    text = (f"{mode} {summary.run_id} {summary.status}: {summary.done} of {summary.planned} verdicts, "
            f"{summary.calls_made} calls, {summary.failed} failed")
    return JobOutcome(summary.to_dict(), text, stopped=summary.status == RunStatus.stopped)


# --- metric batches -----------------------------------------------------------------------------------------

#: the settings a metrics job takes, as ``medhelm metrics`` names them
METRIC_SETTINGS = ("rouge_l", "bertscore", "stemmer", "model", "layer", "idf", "batch_size")


def enqueue_metrics(session: Session, study: Study, *, actor: Actor = None, **settings: Any) -> Job:
    """Queue ROUGE-L and/or BERTScore for ``study`` (``rouge_l``, ``bertscore``, ``stemmer``, ``model``, ``layer``,
    ``idf``, ``batch_size``, as ``medhelm metrics`` takes them); the settings are checked now."""
    from medhelm_core.metrics import metric_specs

    unknown = set(settings) - set(METRIC_SETTINGS)
    if unknown:
        raise ValidationError(f"metrics job: unknown setting(s) {', '.join(sorted(unknown))}")
    metric_specs(**_spec_settings(settings))  # refuses a bad model, layer or combination here, not in a worker
    return enqueue(session, JobKind.metrics, settings, study_id=study.id, actor=actor)


def _spec_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The metric specs' settings; with no metric named, ROUGE and, where the extra is installed, BERTScore (as
    ``medhelm metrics`` does: a lean install computes ROUGE rather than fail)."""
    from medhelm_core.metrics import bertscore_available

    rouge_l, bertscore = bool(settings.get("rouge_l")), bool(settings.get("bertscore"))
    if not rouge_l and not bertscore:
        rouge_l, bertscore = True, bertscore_available()
    return {"rouge_l": rouge_l, "bertscore": bertscore, "use_stemmer": bool(settings.get("stemmer", True)),
            "model": settings.get("model"), "layer": settings.get("layer"), "idf": bool(settings.get("idf"))}


def run_metrics_job(ctx: JobContext) -> JobOutcome:
    """Compute the job's metrics; each batch is stored as it is done, so a stop or a crash keeps them."""
    from medhelm_core.metrics import compute_metrics, metric_specs

    specs = metric_specs(**_spec_settings(ctx.job.payload))
    with transaction(ctx.engine) as session:
        study = _study(session, ctx.job)

    def on_progress(p: Any) -> None:
        ctx.progress(family=p.family, done=p.done, total=p.total)
        ctx.check()  # between batches: what is stored stays, the rest waits for the next claim

    try:
        report = compute_metrics(ctx.engine, study, specs, batch_size=int(ctx.job.payload.get("batch_size") or 32),
                                 progress=on_progress)
    except JobStopped:
        return JobOutcome({}, "stopped between batches", stopped=True)
    result = {"items": report.items, "without_reference": report.without_reference, "device": report.device,
              "metrics": [{"family": m.family, "scored": m.scored, "already_done": m.already_done}
                          for m in report.metrics]}
    scored = ", ".join(f"{m.family} {m.scored} scored" for m in report.metrics)
    return JobOutcome(result, f"{report.items} items: {scored}")


# --- report builds ------------------------------------------------------------------------------------------

def enqueue_report(session: Session, study: Study, *, protocol: str = "medhelm", benchmarks: tuple[str, ...] = (),
                   models: tuple[str, ...] = (), jury_run_id: int | None = None, item_texts: bool = True,
                   n_resamples: int = 2000, actor: Actor = None) -> Job:
    """Queue the calibration report of ``study``; the job's ``output`` holds the zip once it is built."""
    from medhelm_core.report import ReportOptions

    ReportOptions(protocol=protocol, benchmarks=benchmarks, models=models, jury_run_id=jury_run_id,
                  n_resamples=n_resamples)  # checks them now, not in a worker
    payload = {"protocol": protocol, "benchmarks": list(benchmarks), "models": list(models),
               "jury_run_id": jury_run_id, "item_texts": bool(item_texts), "n_resamples": int(n_resamples)}
    return enqueue(session, JobKind.report, payload, study_id=study.id, actor=actor)


def run_report_job(ctx: JobContext) -> JobOutcome:
    """Build the report (HTML, PDF, data bundle) and keep it as a zip in the job row, where every app replica
    can hand it out (a file on the worker's disk would be on another machine)."""
    from medhelm_core.report import ReportOptions, write_report, zip_folder

    p = ctx.job.payload
    options = ReportOptions(protocol=p.get("protocol", "medhelm"), benchmarks=tuple(p.get("benchmarks") or ()),
                            models=tuple(p.get("models") or ()), jury_run_id=p.get("jury_run_id"),
                            item_texts=bool(p.get("item_texts", True)), n_resamples=int(p.get("n_resamples", 2000)))
    with tempfile.TemporaryDirectory() as tmp, transaction(ctx.engine) as session:
        study = _study(session, ctx.job)
        files = write_report(session, study, Path(tmp), options, actor=ctx.job.created_by)
        archive = zip_folder(Path(tmp))
        name = study.name
    result = {"filename": f"report-{name}.zip", "bytes": len(archive), "nothing_to_show": files.nothing_to_show}
    return JobOutcome(result, f"report of {name}: {len(archive):,} bytes", output=archive)


#: the handler of each job kind
HANDLERS: dict[str, Callable[[JobContext], JobOutcome]] = {
    JobKind.jury_run: run_jury_job,
    JobKind.metrics: run_metrics_job,
    JobKind.report: run_report_job,
}


def stop_jury_run(engine: Engine, run_id: int) -> bool:
    """Stop a jury run wherever it is: its queued job is cancelled now, its running job's worker stops after the
    calls in flight (through the run's row, as ``medhelm jury stop`` does). False when there was nothing to stop."""
    from medhelm_core.jobs.queue import cancel, live_job_for_run
    from medhelm_core.jury.store import request_stop

    with transaction(engine) as session:
        job = live_job_for_run(session, run_id)
    cancelled = cancel(engine, job.id) if job is not None else None
    return request_stop(engine, run_id) or cancelled is not None
