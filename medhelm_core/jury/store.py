"""Jury runs and verdicts in the database: find or open a run, plan what is left, write each verdict.

A run is identified by (study, config hash). Each verdict is written in its own transaction as it
arrives, with the run's counters bumped by atomic ``UPDATE ... SET n = n + 1`` in the same transaction,
so the page (or another process) can read progress at any moment, and a crash loses only calls in flight.

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
from functools import lru_cache
from typing import Any

from sqlalchemy import bindparam, insert, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, select

from medhelm_core.db.audit import record_event
from medhelm_core.db.engine import database_error, transaction
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


def open_run(session: Session, study: Study, config: JuryConfig, *, claim: bool = True) -> JuryRun:
    """Find this config's run in the study (to resume it) or create it; refuse one that is running.

    With ``claim`` (a worker about to call the judges) the run is marked ``running`` with a fresh heartbeat
    in the same transaction, so two starts of one configuration at once give one run with one worker: the
    study's row is locked first (on SQLite, the database's write lock), so the second start waits, then
    finds the first one's run running and is refused; the partial unique index on active runs
    (``uq_juryrun_one_active_per_config``) refuses a second active run even to a writer that skips the lock.

    The stored config is refreshed with this invocation's execution settings (concurrency, timeouts,
    API bases); its hash, and so every cache key, stays the same.
    """
    # A no-op update takes the study row's lock on PostgreSQL (one that does not block inserts referring to
    # the study) and the write lock on SQLite; held until commit, it orders concurrent starts of the study.
    session.exec(update(Study).where(Study.id == study.id).values(id=Study.id))
    run = find_run(session, study, config)
    marked_active = session.exec(
        select(JuryRun).where(JuryRun.study_id == study.id, JuryRun.config_hash == config.config_hash,
                              JuryRun.source == RunSource.litellm, JuryRun.status.in_(ACTIVE_STATUSES))
    ).all()
    busy = next((r for r in marked_active if effective_status(r) in ACTIVE_STATUSES), None)
    if busy is not None:
        raise _busy(busy)
    for dead in marked_active:
        if claim and dead is not run:  # a worker that died on another version of this hash: it holds the index
            dead.status = RunStatus.stopped
            session.add(dead)
    state = run_state(run) if run is not None else {}
    if claim:
        state = {**state, "heartbeat_at": utcnow().isoformat(), "error": None}
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


def _prompt_for(item: Item, config: JuryConfig) -> RenderedPrompt:
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
    items = study_items(session, study)
    if not items:
        raise ValidationError(f"study {study.name} has no items to judge; import some first")
    have: dict[tuple[int, str, int], JudgeVerdict] = {}
    if run is not None:
        for v in session.exec(select(JudgeVerdict).where(JudgeVerdict.jury_run_id == run.id)).all():
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


def _redo(verdict: JudgeVerdict, retry_failed: bool) -> bool:
    if verdict.status == VerdictStatus.ok.value:
        return False
    return retry_failed or not verdict.raw_response.strip()


def copy_reused(engine: Engine, run_id: int, reusable: list[tuple[WorkItem, int]]) -> int:
    """Copy verdicts with the same cache key from other runs into this run (no call, no cost)."""
    copied = 0
    for work, source_id in reusable:
        with transaction(engine) as session:
            src = session.get(JudgeVerdict, source_id)
            if src is None:
                continue
            outcome = VerdictOutcome(
                item_id=work.item_id, judge=work.judge.model, cache_key=work.cache_key, status=src.status,
                scores=dict(src.scores), explanations=dict(src.explanations), prompt=src.prompt,
                raw_response=src.raw_response, error=None, latency_seconds=None, sample=work.sample,
            )
        if record_verdict(engine, run_id, outcome) is not None:
            copied += 1
    return copied


@dataclass
class VerdictOutcome:
    """What one judge call produced, ready to be stored."""

    item_id: int
    judge: str
    cache_key: str
    status: str
    scores: dict[str, float]
    explanations: dict[str, str]
    prompt: str
    raw_response: str
    error: str | None
    latency_seconds: float | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    sample: int = 0


def record_verdict(engine: Engine, run_id: int, outcome: VerdictOutcome) -> str | None:
    """Write one verdict and bump the run's counters, in one transaction.

    Returns ``"new"``, ``"replaced"`` (a failed verdict tried again) or None when the run already held
    a verdict that is ok.

    A failed verdict is replaced by a later attempt; a verdict that is ok is never overwritten (another
    worker got there first). Tokens and cost accumulate over attempts: they are what was spent.
    """
    failed = outcome.status != VerdictStatus.ok.value
    params = {
        "w_run": run_id, "w_item": outcome.item_id, "w_judge": outcome.judge, "w_sample": outcome.sample,
        "v_cache_key": outcome.cache_key,
        "v_status": outcome.status, "v_scores": outcome.scores, "v_explanations": outcome.explanations,
        "v_prompt": outcome.prompt, "v_raw_response": outcome.raw_response, "v_error": outcome.error,
        "v_latency_seconds": outcome.latency_seconds, "v_created_at": utcnow(),
        "v_prompt_tokens": outcome.prompt_tokens, "v_completion_tokens": outcome.completion_tokens,
        "v_cost_usd": outcome.cost_usd,
    }
    replace_failed, insert_new, bump_run = _verdict_statements()
    try:
        with engine.begin() as conn:
            was_failed = bool(conn.execute(replace_failed, params).rowcount)
            if not was_failed:
                # Raises IntegrityError when the run already holds an ok verdict for this item and judge.
                conn.execute(insert_new, params)
            conn.execute(bump_run, {**params, "d_done": 0 if was_failed else 1,
                                    "d_failed": int(failed) - int(was_failed)})
    except IntegrityError:
        return None  # the verdict is there already (ok), written by this run before or by another worker
    except OperationalError as exc:
        raise database_error(exc) from exc
    return "replaced" if was_failed else "new"


@lru_cache(maxsize=1)
def _verdict_statements() -> tuple[Any, Any, Any]:
    """The three statements of :func:`record_verdict`, built once with bound parameters.

    This runs once per verdict and is the writer's whole cost; building statements per call (or going
    through the ORM) costs several times more CPU than executing them.
    """
    t, r = JudgeVerdict.__table__, JuryRun.__table__
    fields = ("cache_key", "status", "scores", "explanations", "prompt", "raw_response", "error",
              "latency_seconds", "created_at")
    spent = ("prompt_tokens", "completion_tokens", "cost_usd")
    replace_failed = (
        update(t)
        .where(t.c.jury_run_id == bindparam("w_run"), t.c.item_id == bindparam("w_item"),
               t.c.judge == bindparam("w_judge"), t.c.sample == bindparam("w_sample"),
               t.c.status != VerdictStatus.ok.value)
        .values({**{f: bindparam(f"v_{f}", type_=t.c[f].type) for f in fields},
                 **{f: t.c[f] + bindparam(f"v_{f}", type_=t.c[f].type) for f in spent}})
    )
    insert_new = insert(t).values(
        jury_run_id=bindparam("w_run"), item_id=bindparam("w_item"), judge=bindparam("w_judge"),
        sample=bindparam("w_sample"), **{f: bindparam(f"v_{f}", type_=t.c[f].type) for f in (*fields, *spent)},
    )
    bump_run = (
        update(r)
        .where(r.c.id == bindparam("w_run"))
        .values(calls_done=r.c.calls_done + bindparam("d_done"), calls_failed=r.c.calls_failed + bindparam("d_failed"),
                **{f: r.c[f] + bindparam(f"v_{f}", type_=r.c[f].type) for f in spent})
    )
    return replace_failed, insert_new, bump_run


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
