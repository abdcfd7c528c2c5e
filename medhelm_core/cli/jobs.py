"""``medhelm worker`` and ``medhelm jobs``: work queued jobs in a process of their own, and look at the queue.

A worker needs the same ``MEDHELM_DATABASE_URL`` as the app and, for jury runs, the judges' keys in its own
environment (the app's keys are not sent to it).
"""

from __future__ import annotations

import signal
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import JobKind
from medhelm_core.errors import ValidationError

jobs_app = typer.Typer(help="The job queue that `medhelm worker` processes take from.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")


def _say(line: str) -> None:
    print(f"{datetime.now(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} {line}", file=sys.stderr, flush=True)


@app.command("worker")
def worker_cmd(
    ctx: typer.Context,
    once: bool = typer.Option(False, "--once", help="Work one job (if any is queued), then exit."),
    kinds: list[str] = typer.Option([], "--kind", "-k", help=f"Job kind to take (repeatable; default all: "
                                    f"{', '.join(JobKind)})."),
    poll: float = typer.Option(2.0, "--poll", help="Seconds between looks at an empty queue."),
    lease: float = typer.Option(30.0, "--lease", help="Seconds a claim lasts unrenewed: how soon another worker "
                                "resumes a job whose worker died."),
) -> None:
    """Take jobs (jury runs, metric batches, report builds) from the database until stopped.

    Run any number of them, on any machines, against PostgreSQL; on SQLite the app already runs one. Logs one
    line per job on stderr. SIGTERM (or Ctrl-C) ends it cleanly: the job in hand stops after its calls in
    flight and goes back to the queue, where another worker resumes it.
    """
    from medhelm_core.jobs import WorkerOptions, run_worker

    unknown = [k for k in kinds if k not in {k.value for k in JobKind}]
    if unknown:
        raise ValidationError(f"--kind {unknown[0]!r} unknown; use one of {', '.join(JobKind)}")
    if poll <= 0 or lease < 1:
        raise ValidationError("--poll must be more than 0 seconds and --lease at least 1 second")
    engine = engine_for(ctx)
    if engine.url.get_backend_name() == "sqlite":
        _say("worker: on SQLite the app (serve.py) runs a worker already, and one worker is the rule: SQLite has no "
             "row locks, so workers take turns rather than work side by side")
    shutdown = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if shutdown.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now
        _say(f"worker: {signal.Signals(signum).name}: stopping after the calls in flight")
        shutdown.set()

    before = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        run_worker(engine, WorkerOptions(kinds=tuple(kinds), poll_seconds=poll, lease_seconds=lease, once=once),
                   shutdown=shutdown, say=_say)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@jobs_app.command("list")
def jobs_list(
    ctx: typer.Context,
    live: bool = typer.Option(False, "--live", help="Only queued and running jobs."),
    limit: int = typer.Option(50, "--limit", help="How many of the newest jobs."),
    as_json: bool = JsonOption,
) -> None:
    """The newest jobs: kind, status, study, worker, attempts, progress and error."""
    from medhelm_core.jobs import jobs_rows

    with transaction(engine_for(ctx)) as session:
        rows = jobs_rows(session, live_only=live, limit=limit)
    lines = [f"{r['id']:>5} {r['kind']:<9} {r['status']:<9} study {r['study_id']} attempts {r['attempts']} "
             f"{r['worker'] or '-'}" + (f": {r['error']}" if r["error"] else "") for r in rows]
    emit(rows, as_json, "\n".join(lines) or "no jobs")


@jobs_app.command("cancel")
def jobs_cancel(ctx: typer.Context, job_id: int = typer.Argument(..., help="Job id."),
                as_json: bool = JsonOption) -> None:
    """Cancel a job: a queued one at once, a running one after its calls in flight."""
    from medhelm_core.jobs import cancel

    status = cancel(engine_for(ctx), job_id)
    emit({"id": job_id, "status": status}, as_json,
         f"job {job_id}: {'stopping' if status == 'running' else status}")


@jobs_app.command("metrics")
def jobs_metrics(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    rouge_l: bool = typer.Option(False, "--rouge-l", help="ROUGE-L and ROUGE-Lsum."),
    bertscore: bool = typer.Option(False, "--bertscore", help="BERTScore (the bundled model)."),
    as_json: bool = JsonOption,
) -> None:
    """Queue `medhelm metrics` for a worker (both metrics unless one is named)."""
    from medhelm_core.jobs import enqueue_metrics
    from medhelm_core.studies import get_study

    with transaction(engine_for(ctx)) as session:
        job = enqueue_metrics(session, get_study(session, study), rouge_l=rouge_l, bertscore=bertscore, actor="cli")
        job_id = job.id
    emit({"id": job_id}, as_json, f"job {job_id} queued: metrics of study {study}")


@jobs_app.command("report")
def jobs_report(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    as_json: bool = JsonOption,
) -> None:
    """Queue the calibration report of a study (the study's saved view); fetch it with `medhelm jobs output`."""
    from medhelm_core.jobs import enqueue_report
    from medhelm_core.studies import agreement_view, get_study

    with transaction(engine_for(ctx)) as session:
        target = get_study(session, study)
        protocol, benchmarks = agreement_view(target)
        job_id = enqueue_report(session, target, protocol=protocol, benchmarks=tuple(benchmarks), actor="cli").id
    emit({"id": job_id}, as_json, f"job {job_id} queued: report of study {study}")


@jobs_app.command("output")
def jobs_output(
    ctx: typer.Context,
    job_id: int = typer.Argument(..., help="Job id."),
    out: Path = typer.Option(..., "--out", "-o", help="File to write (never overwritten)."),
) -> None:
    """Write the file a finished job made (a report's zip)."""
    from medhelm_core.jobs import get_job

    with transaction(engine_for(ctx)) as session:
        job = get_job(session, job_id)
        data = job.output
    if data is None:
        raise ValidationError(f"job {job_id} has no file (status {job.status})")
    if out.exists():
        raise ValidationError(f"--out {out} exists; give a new file name")
    out.write_bytes(data)
    typer.echo(f"wrote {out} ({len(data):,} bytes)")
