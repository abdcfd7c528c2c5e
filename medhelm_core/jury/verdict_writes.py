"""Writing verdicts: many in one transaction, each once, with the run's counters and the figures' data version.

Split from :mod:`medhelm_core.jury.store` (which re-exports these names), which plans and tracks runs: this is
the jury's one write path for verdicts, used by the live runner, the batch mode and the copy of reused verdicts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError

from medhelm_core.db.data_versions import bump_items
from medhelm_core.db.engine import database_error
from medhelm_core.db.models import JudgeVerdict, JuryRun, VerdictStatus, utcnow


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
    """Write one verdict and bump the run's counters, in one transaction: :func:`record_verdicts` of one."""
    return record_verdicts(engine, run_id, [outcome])[0]


def record_verdicts(engine: Engine, run_id: int, outcomes: Sequence[VerdictOutcome]) -> list[str | None]:
    """Write verdicts and bump the run's counters by their sums, all in one transaction.

    Returns, per outcome, ``"new"``, ``"replaced"`` (a failed verdict tried again) or None when the run already
    held a verdict that is ok.

    A failed verdict is replaced by a later attempt; a verdict that is ok is never overwritten (another
    worker got there first). Tokens and cost accumulate over attempts: they are what was spent.

    Why many at once: a commit is the writer's main cost (on SQLite a sync of the write-ahead log, on PostgreSQL a
    round trip and a WAL flush), so the runner's writer stores every verdict that arrived while it wrote the last
    ones in one transaction: at 400 verdicts a second, a dozen or so per commit instead of one. New verdicts go in
    as one multi-row insert that skips the rows already there; only those are looked at again, one by one.
    A batch that breaks another rule (its run or an item deleted meanwhile) is written verdict by verdict, so
    that the others are kept.
    """
    if not outcomes:
        return []
    try:
        return _write_verdicts(engine, run_id, outcomes)
    except IntegrityError:
        if len(outcomes) == 1:
            return [None]  # the run or the item is gone: nothing to store it under
        return [record_verdicts(engine, run_id, [outcome])[0] for outcome in outcomes]
    except OperationalError as exc:
        raise database_error(exc) from exc


def _verdict_params(run_id: int, outcome: VerdictOutcome, now: datetime) -> dict[str, Any]:
    return {
        "w_run": run_id, "w_item": outcome.item_id, "w_judge": outcome.judge, "w_sample": outcome.sample,
        "v_cache_key": outcome.cache_key,
        "v_status": outcome.status, "v_scores": outcome.scores, "v_explanations": outcome.explanations,
        "v_prompt": outcome.prompt, "v_raw_response": outcome.raw_response, "v_error": outcome.error,
        "v_latency_seconds": outcome.latency_seconds, "v_created_at": now,
        "v_prompt_tokens": outcome.prompt_tokens, "v_completion_tokens": outcome.completion_tokens,
        "v_cost_usd": outcome.cost_usd,
    }


def _write_verdicts(engine: Engine, run_id: int, outcomes: Sequence[VerdictOutcome]) -> list[str | None]:
    insert_new, replace_failed, bump_run = _verdict_statements(engine.dialect.name)
    now = utcnow()
    params = [_verdict_params(run_id, o, now) for o in outcomes]
    with _verdict_transaction(engine) as conn:
        inserted = {tuple(row) for row in conn.execute(insert_new, params)}
        written: list[str | None] = []
        claimed: set[tuple[int, str, int]] = set()
        for outcome, values in zip(outcomes, params, strict=True):
            key = (outcome.item_id, outcome.judge, outcome.sample)
            if key in inserted and key not in claimed:
                claimed.add(key)  # the same verdict twice in one batch: the second is an attempt on the first
                written.append("new")
            elif conn.execute(replace_failed, values).rowcount:
                written.append("replaced")
            else:
                written.append(None)
        kept = [(o, w) for o, w in zip(outcomes, written, strict=True) if w is not None]
        if kept:
            conn.execute(bump_run, {
                "w_run": run_id,
                "d_done": sum(w == "new" for _, w in kept),
                "d_failed": sum(int(o.status != VerdictStatus.ok.value) - int(w == "replaced") for o, w in kept),
                "v_prompt_tokens": sum(o.prompt_tokens for o, _ in kept),
                "v_completion_tokens": sum(o.completion_tokens for o, _ in kept),
                "v_cost_usd": sum(o.cost_usd for o, _ in kept),
            })
            bump_items(conn, {o.item_id for o, _ in kept})  # a bare connection: the figures' data version
    return written


@contextmanager
def _verdict_transaction(engine: Engine) -> Iterator[Connection]:
    """``engine.begin()``, except that on SQLite the commit does not wait for the disk (``synchronous=NORMAL`` for
    this transaction only, the connection's own setting restored after).

    Why: a judge's slot is held until its verdicts are stored, so every millisecond a commit waits for fsync is a
    millisecond each of those calls is not made; on a busy disk fsync takes 2 to 60 ms (docs/benchmarks.md). In
    WAL mode a commit without it survives the process being killed (``kill -9``, what the resume guarantee is
    about) and keeps the database consistent; only an OS crash or power loss can undo the last commits, and a
    verdict undone so is asked again on resume, like a call in flight. Other writes (ratings) keep full sync.
    """
    if engine.dialect.name != "sqlite":
        with engine.begin() as conn:
            yield conn
        return
    with engine.connect() as conn:
        before = conn.exec_driver_sql("PRAGMA synchronous").scalar()
        conn.exec_driver_sql("PRAGMA synchronous=NORMAL")
        conn.commit()  # Python's sqlite3 opened no transaction for the pragmas: this ends SQLAlchemy's
        try:
            with conn.begin():
                yield conn
        finally:
            try:
                conn.exec_driver_sql(f"PRAGMA synchronous={int(before)}")
                conn.commit()
            except Exception:  # noqa: BLE001 - a connection that cannot be put back as it was is dropped
                conn.invalidate()


@lru_cache(maxsize=4)
def _verdict_statements(dialect: str) -> tuple[Any, Any, Any]:
    """The statements of :func:`record_verdicts`, built once per dialect with bound parameters.

    The insert skips (``ON CONFLICT DO NOTHING``) a verdict the run holds already and returns the keys of the rows
    it wrote, so one multi-row statement tells which verdicts were new. Building statements per call (or going
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
    upsert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    insert_new = (
        upsert(t)
        .values(jury_run_id=bindparam("w_run"), item_id=bindparam("w_item"), judge=bindparam("w_judge"),
                sample=bindparam("w_sample"),
                **{f: bindparam(f"v_{f}", type_=t.c[f].type) for f in (*fields, *spent)})
        .on_conflict_do_nothing(index_elements=["jury_run_id", "item_id", "judge", "sample"])
        .returning(t.c.item_id, t.c.judge, t.c.sample)
    )
    bump_run = (
        update(r)
        .where(r.c.id == bindparam("w_run"))
        .values(calls_done=r.c.calls_done + bindparam("d_done"), calls_failed=r.c.calls_failed + bindparam("d_failed"),
                **{f: r.c[f] + bindparam(f"v_{f}", type_=r.c[f].type) for f in spent})
    )
    return insert_new, replace_failed, bump_run
