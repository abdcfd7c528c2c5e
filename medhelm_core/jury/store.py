"""Jury runs and verdicts in the database: find or open a run, plan what is left, write each verdict.

A run is identified by (study, config hash). Verdicts are written as they arrive, those that arrive together
in one transaction (:func:`record_verdicts`), with the run's counters bumped by atomic ``UPDATE ... SET n = n + k``
in the same transaction, so the page (or another process) can read progress at any moment, and a crash loses
only calls in flight.

A verdict's cache key is a hash of (item, judge model, prompt template hash, rubric hash, temperature) and,
for repeated samples (``JuryConfig.samples`` > 1), the sample's index when it is not 0: sample 0 is the call
a one-sample jury makes, so its cached verdicts serve both.
Planning skips what the run already holds and copies verdicts with the same cache key from the study's
other runs instead of paying for them again.

The run's live state (heartbeat, planned calls, last error, models without a price) lives under
``config["state"]``; it is not part of the config hash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from medhelm_core.db.audit import record_event
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import (
    AuditAction,
    Item,
    JudgeVerdict,
    JuryRun,
    RunSource,
    RunStatus,
    Study,
    VerdictStatus,
    utcnow,
)
from medhelm_core.errors import NotFoundError, RunBusyError, ValidationError
from medhelm_core.jury.config import JudgeSpec, JuryConfig, sha256_json, stored_prompt
from medhelm_core.jury.prompt import RenderedPrompt, render_prompt
from medhelm_core.jury.verdict_writes import (  # noqa: F401 - written there, importable from here as before
    VerdictOutcome,
    record_verdict,
    record_verdicts,
)

#: A run whose worker has not written a heartbeat for this long is taken to be interrupted.
HEARTBEAT_STALE = timedelta(seconds=10)
#: a run in one of these has (or had, until its heartbeat went stale) a worker
ACTIVE_STATUSES = (RunStatus.running, RunStatus.stopping)


@dataclass(frozen=True)
class WorkItem:
    """One call to make: an item for a judge, with its prompt and cache key."""

    item_id: int
    judge: JudgeSpec
    cache_key: str
    prompt: RenderedPrompt = field(repr=False)
    #: which of the judge's repeated samples of this item (0 for a one-sample jury)
    sample: int = 0


@dataclass
class RunPlan:
    """What a run still needs: calls to make, verdicts reusable from other runs, and what is done."""

    run_id: int | None
    planned: int
    done: int
    todo: list[WorkItem]
    reusable: list[tuple[WorkItem, int]]  # (work, id of a verdict with the same cache key in another run)


def verdict_cache_key(item_id: int, judge: JudgeSpec, config: JuryConfig, sample: int = 0) -> str:
    """The cache key of one verdict: item, judge model, template hash, rubric hash and temperature, and the
    sample's index when it is not 0 (so sample 0 keeps the key of a one-sample jury)."""
    keyed: dict[str, Any] = {
        "item": item_id,
        "judge": judge.model,
        "prompt_template": config.template_hash,
        "rubric": config.rubric_hash,
        "temperature": judge.temperature,
    }
    if sample:
        keyed["sample"] = int(sample)
    return sha256_json(keyed)


def run_state(run: JuryRun) -> dict[str, Any]:
    """The run's live state (heartbeat, planned calls, error ...), empty for a new or recorded run."""
    return dict((run.config or {}).get("state") or {})


def effective_status(run: JuryRun, now: datetime | None = None) -> str:
    """The stored status, except that a running run with a stale heartbeat reads ``interrupted``."""
    if run.status not in ACTIVE_STATUSES:
        return run.status
    beat = run_state(run).get("heartbeat_at")
    if beat is None:
        return RunStatus.interrupted
    age = (now or utcnow()) - datetime.fromisoformat(beat)
    return RunStatus.interrupted if age > HEARTBEAT_STALE else run.status


def find_run(session: Session, study: Study, config: JuryConfig) -> JuryRun | None:
    """The study's run with this config hash and prompt version, if one was started before.

    Two template versions with the same text give the same hash but are two runs (each labelled with its
    version; the second copies the first's verdicts instead of asking again). A run stored before versions
    were recorded names no version and stays the run of its hash.
    """
    runs = session.exec(
        select(JuryRun)
        .where(JuryRun.study_id == study.id, JuryRun.config_hash == config.config_hash,
               JuryRun.source == RunSource.litellm)
        .order_by(JuryRun.id)
    ).all()
    wanted = (config.prompt_name or None, config.prompt_version)
    return next((r for r in runs if stored_prompt(r.config or {}) in (wanted, (None, None))), None)


def open_run(session: Session, study: Study, config: JuryConfig, *, claim: bool = True,
             holder: str | None = None) -> JuryRun:
    """Find this config's run in the study (to resume it) or create it; refuse one that is running.

    With ``claim`` (a worker about to call the judges) the run is marked ``running`` with a fresh heartbeat
    in the same transaction, so two starts of one configuration at once give one run with one worker: the
    study's row is locked first (on SQLite, the database's write lock), so the second start waits, then
    finds the first one's run running and is refused; the partial unique index on active runs
    (``uq_juryrun_one_active_per_config``) refuses a second active run even to a writer that skips the lock.

    The stored config is refreshed with this invocation's execution settings (concurrency, timeouts,
    API bases); its hash, and so every cache key, stays the same.

    ``holder`` names who works the run when that is not one process's life: a queued job (``job:12``). A run
    marked active by the same holder is taken over at once, heartbeat fresh or not: the job's lease has
    already said its last worker is gone (:mod:`medhelm_core.jobs`), so waiting out HEARTBEAT_STALE would only
    delay the resume. Without a holder (the CLI, a thread) a fresh heartbeat refuses the start.
    """
    # A no-op update takes the study row's lock on PostgreSQL (one that does not block inserts referring to
    # the study) and the write lock on SQLite; held until commit, it orders concurrent starts of the study.
    session.exec(update(Study).where(Study.id == study.id).values(id=Study.id))
    run = find_run(session, study, config)
    marked_active = session.exec(
        select(JuryRun).where(JuryRun.study_id == study.id, JuryRun.config_hash == config.config_hash,
                              JuryRun.source == RunSource.litellm, JuryRun.status.in_(ACTIVE_STATUSES))
    ).all()
    busy = next((r for r in marked_active if effective_status(r) in ACTIVE_STATUSES
                 and (holder is None or run_state(r).get("holder") != holder)), None)
    if busy is not None:
        raise _busy(busy)
    for dead in marked_active:
        if claim and dead is not run:  # a worker that died on another version of this hash: it holds the index
            dead.status = RunStatus.stopped
            session.add(dead)
    state = run_state(run) if run is not None else {}
    if claim:
        state = {**state, "heartbeat_at": utcnow().isoformat(), "error": None, "holder": holder}
    stored = {**config.to_dict(), "state": state}
    status = RunStatus.running if claim else RunStatus.pending
    if run is None:
        run = JuryRun(study_id=study.id, name=config.display_name(), source=RunSource.litellm,
                      config=stored, config_hash=config.config_hash, status=status)
    else:
        run.config = stored
        if claim:
            run.status, run.finished_at = status, None
    session.add(run)
    try:
        session.flush()
    except IntegrityError:
        raise RunBusyError(
            f"jury run {config.display_name()} is running right now in another process; stop it or let it "
            "finish"
        ) from None
    return run


def _busy(run: JuryRun) -> RunBusyError:
    return RunBusyError(
        f"jury run {run.id} ({run.name}) is running right now; stop it or let it finish (if its process "
        f"has died, it can be resumed {int(HEARTBEAT_STALE.total_seconds())} s after its last heartbeat)"
    )


def study_items(session: Session, study: Study) -> list[Item]:
    """The study's items in a stable order."""
    return list(session.exec(select(Item).where(Item.study_id == study.id).order_by(Item.id)).all())


def _prompt_for(item: Any, config: JuryConfig) -> RenderedPrompt:
    return render_prompt(
        config.prompt_template,
        config.rubric,
        benchmark=item.benchmark,
        input_text=item.input_text,
        output_text=item.output_text,
        reference_text=item.reference_text,
    )


def plan_run(
    session: Session, study: Study, config: JuryConfig, run: JuryRun | None, *, retry_failed: bool = False
) -> RunPlan:
    """Work out which (item, judge, sample) verdicts are still needed. Reads only; writes nothing.

    A verdict the run already holds is done; a failed one is done too (its raw answer is evidence) unless
    it failed without an answer from the judge (a network or server error) or ``retry_failed`` is set.
    """
    # Rows of the columns used, not ORM objects: building 10,000 Items (or a resumed run's verdicts, their
    # prompts included) costs more than rendering their prompts.
    items = session.exec(
        select(Item.id, Item.benchmark, Item.input_text, Item.output_text, Item.reference_text)
        .where(Item.study_id == study.id).order_by(Item.id)
    ).all()
    if not items:
        raise ValidationError(f"study {study.name} has no items to judge; import some first")
    have: dict[tuple[int, str, int], Any] = {}
    if run is not None:
        for v in session.exec(
            select(JudgeVerdict.item_id, JudgeVerdict.judge, JudgeVerdict.sample, JudgeVerdict.cache_key,
                   JudgeVerdict.status, JudgeVerdict.raw_response).where(JudgeVerdict.jury_run_id == run.id)
        ).all():
            have[(v.item_id, v.judge, v.sample)] = v
    wanted: list[WorkItem] = []
    done = 0
    prompts: dict[int, RenderedPrompt] = {}
    for item in items:
        for judge in config.judges:
            for sample in range(config.samples):
                existing = have.get((item.id, judge.model, sample))
                key = verdict_cache_key(item.id, judge, config, sample)
                if existing is not None and existing.cache_key == key and not _redo(existing, retry_failed):
                    done += 1
                    continue
                if item.id not in prompts:
                    prompts[item.id] = _prompt_for(item, config)
                wanted.append(WorkItem(item.id, judge, key, prompts[item.id], sample))
    reusable: list[tuple[WorkItem, int]] = []
    keys = [w.cache_key for w in wanted]
    found: dict[str, int] = {}
    for start in range(0, len(keys), 500):
        query = (
            select(JudgeVerdict.cache_key, JudgeVerdict.id)
            .join(JuryRun, JuryRun.id == JudgeVerdict.jury_run_id)
            .where(JuryRun.study_id == study.id, JuryRun.source == RunSource.litellm,
                   JudgeVerdict.status == VerdictStatus.ok.value,
                   JudgeVerdict.cache_key.in_(keys[start:start + 500]))
            .order_by(JudgeVerdict.id)
        )
        if run is not None:
            query = query.where(JudgeVerdict.jury_run_id != run.id)
        for key, vid in session.exec(query).all():
            found.setdefault(key, vid)
    todo: list[WorkItem] = []
    for work in wanted:
        source = found.get(work.cache_key)
        if source is not None:
            reusable.append((work, source))
        else:
            todo.append(work)
    return RunPlan(run.id if run else None, len(items) * len(config.judges) * config.samples, done, todo, reusable)


def _redo(verdict: Any, retry_failed: bool) -> bool:
    if verdict.status == VerdictStatus.ok.value:
        return False
    return retry_failed or not verdict.raw_response.strip()


def copy_reused(engine: Engine, run_id: int, reusable: list[tuple[WorkItem, int]]) -> int:
    """Copy verdicts with the same cache key from other runs into this run (no call, no cost), 500 per transaction."""
    copied = 0
    for start in range(0, len(reusable), 500):
        chunk = reusable[start:start + 500]
        with transaction(engine) as session:
            sources = {v.id: v for v in session.exec(
                select(JudgeVerdict).where(JudgeVerdict.id.in_([source for _, source in chunk]))).all()}
            outcomes = [
                VerdictOutcome(
                    item_id=work.item_id, judge=work.judge.model, cache_key=work.cache_key, status=src.status,
                    scores=dict(src.scores), explanations=dict(src.explanations), prompt=src.prompt,
                    raw_response=src.raw_response, error=None, latency_seconds=None, sample=work.sample,
                )
                for work, source in chunk if (src := sources.get(source)) is not None
            ]
        copied += sum(w is not None for w in record_verdicts(engine, run_id, outcomes))
    return copied


def _set_state(engine: Engine, run_id: int, status: str | None = None, *, audit_actor: Any = False,
               **state: Any) -> str:
    """Merge ``state`` into the run's live state (and set its status); return the status now stored.

    With ``audit_actor`` (anything but False) a ``jury.run`` audit event is written in the same transaction.
    """
    with transaction(engine) as session:
        run = session.get(JuryRun, run_id)
        if run is None:
            raise NotFoundError(f"no jury run with id {run_id}")
        if audit_actor is not False:
            config = run.config or {}
            prompt_name, prompt_version = stored_prompt(config)
            record_event(session, AuditAction.jury_run, actor=audit_actor, study_id=run.study_id, run_id=run.id,
                         run=run.name, judges=[j["model"] for j in config.get("judges", [])],
                         config_hash=run.config_hash, resumed=run.calls_done > 0,
                         rubric_version=(config.get("rubric") or {}).get("version"), prompt_name=prompt_name,
                         prompt_version=prompt_version)
        merged = {**run_state(run), **state}
        run.config = {**(run.config or {}), "state": merged}
        if status is not None:
            run.status = status
            if status in ACTIVE_STATUSES:
                run.finished_at = None
            elif status in (RunStatus.finished, RunStatus.stopped, RunStatus.failed):
                run.finished_at = utcnow()
        session.add(run)
        return run.status


def mark_running(engine: Engine, run_id: int, planned: int, actor: Any = None) -> None:
    """The run has a worker now: status ``running`` with a fresh heartbeat and no error; audited."""
    _set_state(engine, run_id, RunStatus.running, audit_actor=actor, heartbeat_at=utcnow().isoformat(), planned=planned,
               error=None)


def stored_status(engine: Engine, run_id: int) -> str:
    """The run's status as stored (a cheap read the worker polls for stop requests)."""
    with engine.connect() as conn:
        return conn.execute(select(JuryRun.status).where(JuryRun.id == run_id)).scalar_one()


def heartbeat(engine: Engine, run_id: int, **state: Any) -> str:
    """Say the worker is alive; returns the stored status (``stopping`` when a stop was asked for)."""
    return _set_state(engine, run_id, None, heartbeat_at=utcnow().isoformat(), **state)


def finish_run(engine: Engine, run_id: int, status: str, error: str | None = None, **state: Any) -> None:
    """Record how the worker ended: ``finished``, ``stopped`` or ``failed`` (with the error)."""
    _set_state(engine, run_id, status, heartbeat_at=None, error=error, **state)


def request_stop(engine: Engine, run_id: int) -> bool:
    """Ask the run's worker, wherever it runs, to stop after the calls in flight. False if not running."""
    with transaction(engine) as session:
        result = session.exec(
            update(JuryRun)
            .where(JuryRun.id == run_id, JuryRun.status == RunStatus.running)
            .values(status=RunStatus.stopping)
        )
        return bool(result.rowcount)


def planned_calls(session: Session, run: JuryRun) -> int:
    """How many verdicts the run needs in all: items times judges times samples (a recorded run: what it holds)."""
    if run.source != RunSource.litellm:
        return run.calls_done
    n_items = len(session.exec(select(Item.id).where(Item.study_id == run.study_id)).all())
    config = run.config or {}
    return n_items * len(config.get("judges", [])) * int(config.get("samples") or 1)
