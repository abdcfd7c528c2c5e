"""Run a jury over a study: plan, call the judges concurrently, write every verdict as it arrives.

Concurrency is bounded per judge (an :class:`asyncio.BoundedSemaphore` of the judge's ``concurrency``), so one
slow provider does not hold the others back. Finished calls go through a queue to writer threads; a writer takes
every verdict waiting and stores them in one transaction (:func:`~medhelm_core.jury.store.record_verdicts`), so
commits do not cap the rate at which verdicts arrive; the run's counters in the database are the progress that the
CLI, the page and ``medhelm jury status`` show. Judges are reached through :func:`~medhelm_core.jury.calls.connect`:
the openai SDK's client for OpenAI-compatible judges, litellm (imported only then) for the others.

Stopping: a stop request (``request_stop`` from the page, or ``stop`` set in this process) lets the calls
in flight finish and be written, then ends the run as ``stopped``. Ctrl-C cancels the calls in flight,
writes what already arrived, and ends the run as ``stopped``; a crash leaves it ``running`` with a stale
heartbeat, read as ``interrupted``. Any of them resumes with the same command: no verdict that was stored is
asked for again. What is asked again is what was in flight or waiting to be stored: a judge's calls not yet
stored are bounded by twice its concurrency, so a ``kill -9`` repeats at most that many calls per judge
(README, "The LLM jury").

One worker per run: starting a configuration that is running (here, in another thread or process) raises
:class:`~medhelm_core.errors.RunBusyError`, decided by the database (:func:`~medhelm_core.jury.store.open_run`).

Keys: whatever a judge or its server sends back goes through :func:`~medhelm_core.jury.calls.redact` (with
the value of every judge's key variable) before it is stored, as does the error a run ends with.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import JuryRun, RunStatus, Study, VerdictStatus
from medhelm_core.errors import MissingCredentialsError
from medhelm_core.jury.batch_store import refuse_live_run_with_open_batches
from medhelm_core.jury.calls import (
    Connections,
    check_config_holds_no_key,
    check_credentials,
    connect,
    judge_item,
    redact,
    redact_outcome,
    secret_values,
)
from medhelm_core.jury.config import JuryConfig
from medhelm_core.jury.cost import JuryEstimate, estimate_plan
from medhelm_core.jury.store import (
    VerdictOutcome,
    WorkItem,
    copy_reused,
    finish_run,
    heartbeat,
    mark_running,
    open_run,
    plan_run,
    record_verdicts,
    run_state,
    stored_status,
)
from medhelm_core.studies import get_study_by_id

HEARTBEAT_SECONDS = 2.0
#: answers asked for and not yet stored, per slot of a judge's concurrency: what a ``kill -9`` can make a resume repeat
UNSTORED_PER_SLOT = 2
#: At most this many verdicts in one write transaction (what a writer takes from the queue at once).
WRITE_BATCH = 200
#: How often the worker looks for a stop request in the database (a cheap read).
STOP_POLL_SECONDS = 0.25


@dataclass
class Progress:
    """Where a run stands, after each verdict: for a progress bar."""

    planned: int
    done: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    calls_made: int = 0

    def add(self, outcome: VerdictOutcome, written: str | None, calls_made: int) -> None:
        """Count one verdict as :func:`~medhelm_core.jury.store.record_verdicts` stored it (``written``: "new", a
        failed verdict "replaced", or None when it was stored already); a live run and a batch run count alike."""
        if written is None:
            return
        failed = int(outcome.status != VerdictStatus.ok.value)
        self.done += 1 if written == "new" else 0
        self.failed += failed if written == "new" else failed - 1
        self.prompt_tokens += outcome.prompt_tokens
        self.completion_tokens += outcome.completion_tokens
        self.cost_usd += outcome.cost_usd
        self.calls_made = calls_made


def read_progress(engine: Engine, run_id: int, planned: int) -> Progress:
    """The run's stored counters, where a resumed run's progress starts from."""
    with transaction(engine) as session:
        run = session.get(JuryRun, run_id)
        return Progress(planned, run.calls_done, run.calls_failed, run.prompt_tokens, run.completion_tokens,
                        run.cost_usd)


async def watch_run(engine: Engine, run_id: int, stop: threading.Event, quiet: asyncio.Event) -> None:
    """Until ``quiet`` is set: beat every HEARTBEAT_SECONDS, and watch for a stop request (from the page, through
    the database) every STOP_POLL_SECONDS, which sets ``stop``. A live run and a batch run keep their row alike."""
    last_beat = time.monotonic()
    while not quiet.is_set():
        try:
            await asyncio.wait_for(quiet.wait(), STOP_POLL_SECONDS)
            return
        except TimeoutError:
            pass
        try:
            if time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
                status = await asyncio.to_thread(heartbeat, engine, run_id)
                last_beat = time.monotonic()
            else:
                status = await asyncio.to_thread(stored_status, engine, run_id)
        except Exception:  # noqa: BLE001 - a busy database skips one beat, the next one will do
            continue
        if status == RunStatus.stopping:
            stop.set()


@dataclass
class RunSummary:
    """What a run did, for the CLI's ``--json`` and the page."""

    run_id: int
    study: str
    name: str
    status: str
    config_hash: str
    planned: int
    done: int
    failed: int
    calls_made: int
    reused: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    unpriced: list[str] = field(default_factory=list)
    elapsed_seconds: float = 0.0
    #: the judges, rubric version and prompt template version the run used (JuryConfig.versions + judges)
    versions: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (no keys: a config's key variables are names, never values)."""
        return asdict(self)


def summarize(engine: Engine, run_id: int, study_name: str, config: JuryConfig, *, planned: int, calls_made: int,
              reused: int, unpriced: list[str], started: float) -> RunSummary:
    """What a run did, read back from its row once it is finished (a live run and a batch run alike)."""
    with transaction(engine) as session:
        run = session.get(JuryRun, run_id)
        return RunSummary(
            run_id=run_id, study=study_name, name=run.name, status=run.status, config_hash=run.config_hash,
            planned=planned, done=run.calls_done, failed=run.calls_failed, calls_made=calls_made,
            reused=reused, prompt_tokens=run.prompt_tokens, completion_tokens=run.completion_tokens,
            cost_usd=run.cost_usd, unpriced=unpriced, elapsed_seconds=time.perf_counter() - started,
            versions={"judges": [j.model for j in config.judges], **config.versions},
        )


def estimate_run(engine: Engine, study: Study, config: JuryConfig, *, retry_failed: bool = False,
                 batch: bool = False) -> JuryEstimate:
    """Calls, tokens and cost a run would make now, taking what is done or reusable into account; with ``batch``,
    at the providers' batch prices (``--batch``).

    Writes nothing and calls nobody (``--dry-run``).
    """
    from medhelm_core.jury.store import find_run

    with transaction(engine) as session:
        target = get_study_by_id(session, study.id)
        plan = plan_run(session, target, config, find_run(session, target, config), retry_failed=retry_failed)
    return estimate_plan(plan, config, batch=batch)


def prepare_run(engine: Engine, study: Study, config: JuryConfig) -> int:
    """Create (or find) the run for this config and return its id, without calling anyone.

    Raises :class:`~medhelm_core.errors.RunBusyError` when it is running (the worker that starts it next
    claims it in the database, so of two starts at once one is refused).
    """
    check_config_holds_no_key(config)
    with transaction(engine) as session:
        return open_run(session, get_study_by_id(session, study.id), config, claim=False).id


def run_jury(
    engine: Engine,
    study: Study,
    config: JuryConfig,
    *,
    retry_failed: bool = False,
    stop: threading.Event | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    actor: Any = None,
    holder: str | None = None,
    batch: bool = False,
) -> RunSummary:
    """Run (or resume) the jury over every item of ``study``; see :func:`run_jury_async`.

    With ``batch`` the calls go through the providers' batch APIs instead
    (:func:`medhelm_core.jury.batch.run_jury_batch`, with its default limits).
    """
    if batch:
        from medhelm_core.jury.batch import run_jury_batch

        return run_jury_batch(engine, study, config, retry_failed=retry_failed, stop=stop, on_progress=on_progress,
                              actor=actor, holder=holder)
    return asyncio.run(run_jury_async(engine, study, config, retry_failed=retry_failed, stop=stop,
                                      on_progress=on_progress, actor=actor, holder=holder))


async def run_jury_async(
    engine: Engine,
    study: Study,
    config: JuryConfig,
    *,
    retry_failed: bool = False,
    stop: threading.Event | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    actor: Any = None,
    holder: str | None = None,
) -> RunSummary:
    """Run (or resume) the jury over every item of ``study`` and return what it did.

    Parameters
    ----------
    engine
        The database; verdicts are written as they arrive.
    study
        The study (read again in the run's own transactions, so a row from any session will do).
    config
        Judges, prompt template, rubric (the study's) and retry policy.
    retry_failed
        Also call again for verdicts that failed with an unreadable answer (those that failed with no
        answer, on a network or server error, are always retried).
    stop
        Set it to stop after the calls in flight (the page's Stop button also works through the database).
    on_progress
        Called after each write of verdicts (those that arrived together, stored in one transaction).
    actor
        Who started it, for the audit trail (a user, a principal, ``"cli"``).
    holder
        The queued job working the run (``job:12``), so that the job's next worker takes over at once a run
        its dead predecessor left marked running (:func:`~medhelm_core.jury.store.open_run`).

    Raises
    ------
    MissingCredentialsError
        A judge has no key; the message names the variable. The run is marked failed and can be resumed.
    RunBusyError
        The run is being worked on (by another thread or process); nothing is called.
    """
    started = time.perf_counter()
    check_config_holds_no_key(config)
    with transaction(engine) as session:
        target = get_study_by_id(session, study.id)
        run = open_run(session, target, config, holder=holder)
        plan = plan_run(session, target, config, run, retry_failed=retry_failed)
        refuse_live_run_with_open_batches(session, run.id)  # their calls would be paid for twice
        run_id, study_name = run.id, target.name
        unpriced_before = set(run_state(run).get("unpriced") or [])
    mark_running(engine, run_id, plan.planned, actor)
    job = _Job(engine, run_id, config, plan.planned, stop or threading.Event(), on_progress)
    # The heartbeat beats from the moment the run is marked running until it is marked finished: importing litellm,
    # copying reused verdicts and storing the last answers take seconds (many under load), and a run silent for
    # HEARTBEAT_STALE reads "interrupted" to the page, the CLI and a resume, which would take it over.
    quiet = asyncio.Event()
    beat = asyncio.create_task(watch_run(engine, run_id, job.stop, quiet))
    # Everything stored from here on (verdicts, the run's error) is redacted with these.
    status, error, reused = RunStatus.finished, None, 0
    try:
        job.judges = await asyncio.to_thread(connect, config)
        check_credentials(job.judges.litellm, config)
        reused = await asyncio.to_thread(copy_reused, engine, run_id, plan.reusable)
        job.progress = await asyncio.to_thread(read_progress, engine, run_id, plan.planned)
        job.report()
        await job.run(plan.todo)
        status = RunStatus.stopped if job.stopped or job.stop.is_set() else RunStatus.finished
    except MissingCredentialsError as exc:
        status, error = RunStatus.failed, redact(str(exc), job.secrets)
        raise
    except (asyncio.CancelledError, KeyboardInterrupt):
        status = RunStatus.stopped
        raise
    except BaseException as exc:
        status, error = RunStatus.failed, redact(f"{type(exc).__name__}: {exc}", job.secrets)
        raise
    finally:
        # Let the heartbeat end by itself rather than cancel it: a beat cancelled in flight would still write, after
        # finish_run, the run's state as it read it before (losing the error and the unpriced models).
        quiet.set()
        await asyncio.gather(beat, job.judges.aclose(), return_exceptions=True)
        finish_run(engine, run_id, status, error=error, unpriced=sorted(job.unpriced | unpriced_before))
    return summarize(engine, run_id, study_name, config, planned=plan.planned, calls_made=job.calls_made,
                     reused=reused, unpriced=sorted(job.unpriced | unpriced_before), started=started)


class _Job:
    """One invocation's calls, writers and heartbeat."""

    def __init__(self, engine: Engine, run_id: int, config: JuryConfig, planned: int,
                 stop: threading.Event, on_progress: Callable[[Progress], None] | None) -> None:
        self.engine, self.run_id, self.config, self.planned = engine, run_id, config, planned
        self.judges = Connections()
        self.stop, self.on_progress = stop, on_progress
        self.secrets = secret_values(config)
        self.stopped = False
        self.calls_made = 0
        self.unpriced: set[str] = set()
        self.progress = Progress(0, 0, 0, 0, 0, 0.0)
        # SQLite has one writer at a time; PostgreSQL takes a few in parallel.
        self.n_writers = 1 if engine.url.get_backend_name() == "sqlite" else 4
        self.fatal: BaseException | None = None

    def report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(**asdict(self.progress)))

    async def run(self, todo: list[WorkItem]) -> None:
        queue: asyncio.Queue[tuple[VerdictOutcome, asyncio.Future[None]] | None] = asyncio.Queue()
        limits = {j.model: (asyncio.BoundedSemaphore(j.concurrency), asyncio.BoundedSemaphore(UNSTORED_PER_SLOT
                                                                                              * j.concurrency))
                  for j in self.config.judges}
        writers = [asyncio.create_task(self._writer(queue)) for _ in range(self.n_writers)]
        calls = [asyncio.create_task(self._call(w, limits[w.judge.model], queue)) for w in todo]
        try:
            if calls:
                await asyncio.gather(*calls)
        except BaseException:
            for task in calls:
                task.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
            raise
        finally:
            # Whatever arrived is written before we return, even on Ctrl-C.
            for _ in writers:
                queue.put_nowait(None)
            await asyncio.shield(asyncio.gather(*writers, return_exceptions=True))
        if self.fatal is not None:
            raise self.fatal

    async def _call(self, work: WorkItem, limits: tuple[asyncio.Semaphore, asyncio.Semaphore],
                    queue: asyncio.Queue) -> None:
        calling, unstored = limits
        if self.stopped or self.stop.is_set():
            self.stopped = True
            return
        # Two bounds per judge: ``concurrency`` calls at the provider, and at most twice that asked for and not yet
        # stored. What a crash can lose (and a resume pays for again) is the second, never a backlog of answers
        # waiting for the writer; the first is released as soon as the answer is in, so the next call overlaps
        # the write (holding it until the commit made each call ~40 % slower at 100 ms latency).
        async with unstored:
            async with calling:
                if self.stopped or self.stop.is_set():
                    self.stopped = True
                    return
                self.calls_made += 1
                outcome = await judge_item(self.judges, self.config, work)
            stored = asyncio.get_running_loop().create_future()
            queue.put_nowait((redact_outcome(outcome, self.secrets), stored))
            await asyncio.shield(stored)

    async def _writer(self, queue: asyncio.Queue) -> None:
        """Store what arrives: every verdict waiting (up to WRITE_BATCH) in one transaction, then release their
        slots; ends at the ``None`` put in the queue for it."""
        while True:
            entries = [await queue.get()]
            while entries[-1] is not None and len(entries) < WRITE_BATCH and not queue.empty():
                entries.append(queue.get_nowait())
            last = entries[-1] is None
            batch = [e for e in entries if e is not None]
            if batch:
                await self._store(batch)
            if last:
                return

    async def _store(self, batch: list[tuple[VerdictOutcome, asyncio.Future[None]]]) -> None:
        outcomes = [outcome for outcome, _ in batch]
        try:
            written = await asyncio.to_thread(record_verdicts, self.engine, self.run_id, outcomes)
        except Exception as exc:  # noqa: BLE001 - a database error: stop calling, report it after the drain
            self.fatal = exc
            self.stopped = True
            return
        finally:
            for _, stored in batch:
                if not stored.done():
                    stored.set_result(None)
        try:
            for outcome, result in zip(outcomes, written, strict=True):
                self._count(outcome, result)
            self.report()
        except Exception as exc:  # noqa: BLE001 - a progress callback that failed: end the run with it
            self.fatal = self.fatal or exc
            self.stopped = True

    def _count(self, outcome: VerdictOutcome, written: str | None) -> None:
        if not outcome.cost_known:
            self.unpriced.add(outcome.judge)
        self.progress.add(outcome, written, self.calls_made)

