"""A jury run through the providers' batch APIs (``medhelm jury run --batch``): half the price, results within 24 h.

The calls a run still needs are written as JSON Lines (:mod:`~medhelm_core.jury.batch_lines`), split to the
provider's limits per judge (a batch holds one model), uploaded through litellm's Files API and submitted through
its Batches API (OpenAI, Azure OpenAI and OpenAI-compatible servers that serve ``/v1/files`` and ``/v1/batches``).
The run then polls each batch and, as one ends, stores its results through the same path as live calls
(:func:`~medhelm_core.jury.store.record_verdict`), every answer parsed by :func:`~medhelm_core.jury.parse.parse_verdict`
and redacted. A request's ``custom_id`` is the verdict's cache key.

Anthropic's Message Batches are refused: the installed litellm retrieves them and downloads their results but does
not create them (``litellm.acreate_batch`` has no Anthropic route), and the Anthropic SDK is not a dependency.

Never twice: each batch's row (input file id, cache keys, a token) is stored before the batch is created, and the
token goes with the batch as metadata. A resumed run first waits for the batches it holds, then, for a row without a
batch id (a crash between the provider accepting the batch and the id being stored), looks the batch up among the
provider's batches by token or input file before creating it; only calls in no stored batch are submitted.

Stop, Ctrl-C, crash: nothing new is submitted and the run ends ``stopped`` (a crash: ``interrupted``); the batches
already submitted are left running at the provider, not cancelled (the provider bills what it completes either way,
and a cancelled batch's finished results would be thrown away), and the same command collects them later, within the
provider's retention of results (30 days at OpenAI). While batches wait, a live run of that configuration is refused
(:func:`~medhelm_core.jury.batch_store.refuse_live_run_with_open_batches`): it would pay for those calls again.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.engine import Engine

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import JuryBatch, RunStatus, Study
from medhelm_core.errors import MissingCredentialsError, ValidationError
from medhelm_core.jury import batch_store, runner
from medhelm_core.jury.batch_lines import (
    BatchLimits,
    missing_result,
    outcome_from_result,
    read_jsonl,
    request_line,
    split_lines,
)
from medhelm_core.jury.calls import (
    api_key_for,
    check_config_holds_no_key,
    check_credentials,
    load_litellm,
    redact,
    redact_outcome,
    secret_values,
)
from medhelm_core.jury.config import JudgeSpec, JuryConfig
from medhelm_core.jury.cost import batch_price_per_token
from medhelm_core.jury.runner import Progress, RunSummary
from medhelm_core.jury.store import (
    VerdictOutcome,
    WorkItem,
    copy_reused,
    finish_run,
    mark_running,
    open_run,
    plan_run,
    record_verdict,
    run_state,
)
from medhelm_core.studies import get_study_by_id

#: the provider's statuses after which a batch changes no more
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
#: polls in a row that may fail (a network blip, a 5xx) before the run gives up with the error
MAX_POLL_FAILURES = 5
#: how far back to look among the provider's batches for one whose id was never stored
LOOKUP_PAGES = 20


@dataclass(frozen=True)
class BatchTarget:
    """Where one judge's batches go: litellm's provider, the model name the provider knows, the base and key."""

    provider: str
    model: str
    api_base: str | None
    api_key: str | None

    @property
    def url(self) -> str:
        """The request path inside a batch line (Azure's batch lines name no version prefix)."""
        return "/chat/completions" if self.provider == "azure" else "/v1/chat/completions"

    def params(self) -> dict[str, Any]:
        """What every litellm files and batches call of this judge takes."""
        return {"custom_llm_provider": self.provider, "api_base": self.api_base, "api_key": self.api_key}


def batch_target(litellm: Any, judge: JudgeSpec) -> BatchTarget:
    """Where the judge's batches go, or a :class:`ValidationError` for a provider batch mode cannot reach."""
    try:
        model, provider, _, api_base = litellm.get_llm_provider(model=judge.model, api_base=judge.api_base)
    except Exception:  # noqa: BLE001 - litellm raises several types for a name it cannot place
        raise ValidationError(f"judge {judge.model}: litellm cannot tell its provider; batch mode needs an OpenAI, "
                              "Azure OpenAI or OpenAI-compatible judge") from None
    if provider == "anthropic":
        raise ValidationError(
            f"judge {judge.model}: batch mode cannot send Anthropic judges: the installed litellm retrieves Anthropic "
            "Message Batches but cannot create them; run this judge without --batch"
        )
    if provider not in ("openai", "azure", "hosted_vllm", "litellm_proxy", "custom_openai") and not judge.api_base:
        raise ValidationError(f"judge {judge.model}: batch mode supports OpenAI, Azure OpenAI and OpenAI-compatible "
                              f"servers (with --api-base), not provider {provider}; run it without --batch")
    openai_style = "azure" if provider == "azure" else "openai"
    return BatchTarget(openai_style, model, judge.api_base or api_base, api_key_for(judge, litellm))


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


async def find_submitted(litellm: Any, target: BatchTarget, row: JuryBatch) -> Any | None:
    """The provider's batch made from this row (same token in its metadata, or same input file), if one exists.

    A row without a batch id is one whose batch may have been accepted just before a crash; this is asked before
    creating it, so a resumed run never submits its calls twice.
    """
    after = None
    for _ in range(LOOKUP_PAGES):
        page = await litellm.alist_batches(limit=100, after=after, **target.params())
        data = list(_field(page, "data") or [])
        for batch in data:
            metadata = _field(batch, "metadata") or {}
            if metadata.get("medhelm_token") == row.token or _field(batch, "input_file_id") == row.input_file_id:
                return batch
        oldest = min((int(_field(b, "created_at") or 0) for b in data), default=0)
        if not data or not _field(page, "has_more") or oldest < row.created_at.timestamp() - 3600:
            return None
        after = _field(page, "last_id") or _field(data[-1], "id")
    return None


def run_jury_batch(
    engine: Engine,
    study: Study,
    config: JuryConfig,
    *,
    retry_failed: bool = False,
    stop: threading.Event | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    actor: Any = None,
    holder: str | None = None,
    limits: BatchLimits | None = None,
) -> RunSummary:
    """Run (or resume) the jury over ``study`` through the providers' batch APIs; returns when every batch has ended
    and its results are stored, or on a stop (the batches then stay at the provider for the next invocation).

    Same arguments as :func:`~medhelm_core.jury.runner.run_jury` (``holder``: the queued job working the run), plus
    ``limits`` (requests and bytes per batch, the longest wait between polls). Raises :class:`ValidationError` for a
    judge whose provider batch mode cannot reach (before anything is stored or sent), and what ``run_jury`` raises.
    """
    return asyncio.run(_BatchRun(engine, config, stop, on_progress, limits or BatchLimits()).run(
        study, retry_failed=retry_failed, actor=actor, holder=holder))


class _BatchRun:
    """One invocation of a batch run: submit what no batch holds, then poll and collect until none is open."""

    def __init__(self, engine: Engine, config: JuryConfig, stop: threading.Event | None,
                 on_progress: Callable[[Progress], None] | None, limits: BatchLimits) -> None:
        self.engine, self.config, self.limits, self.on_progress = engine, config, limits, on_progress
        self.stop = stop or threading.Event()
        self.secrets = secret_values(config)
        self.litellm: Any = None
        self.targets: dict[str, BatchTarget] = {}
        self.work: dict[str, WorkItem] = {}
        self.run_id = 0
        self.calls_made = 0
        self.unpriced: set[str] = set()
        self.progress = Progress(0, 0, 0, 0, 0, 0.0)

    async def run(self, study: Study, *, retry_failed: bool, actor: Any, holder: str | None) -> RunSummary:
        started = time.perf_counter()
        check_config_holds_no_key(self.config)
        self.litellm = await asyncio.to_thread(load_litellm)
        check_credentials(self.litellm, self.config)
        self.targets = {j.model: batch_target(self.litellm, j) for j in self.config.judges}
        with transaction(self.engine) as session:
            target = get_study_by_id(session, study.id)
            run = open_run(session, target, self.config, holder=holder)
            plan = plan_run(session, target, self.config, run, retry_failed=retry_failed)
            self.run_id, study_name = run.id, target.name
            unpriced_before = set(run_state(run).get("unpriced") or [])
        mark_running(self.engine, self.run_id, plan.planned, actor)
        self.work = {w.cache_key: w for w in plan.todo}
        quiet = asyncio.Event()
        beat = asyncio.create_task(runner.watch_run(self.engine, self.run_id, self.stop, quiet))
        status, error, reused = RunStatus.finished, None, 0
        try:
            reused = await asyncio.to_thread(copy_reused, self.engine, self.run_id, plan.reusable)
            self.progress = await asyncio.to_thread(runner.read_progress, self.engine, self.run_id, plan.planned)
            self._report()
            await self._submit_unplaced()
            await self._collect_all()
            status = RunStatus.stopped if self.stop.is_set() else RunStatus.finished
        except MissingCredentialsError as exc:
            status, error = RunStatus.failed, redact(str(exc), self.secrets)
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            status = RunStatus.stopped
            raise
        except BaseException as exc:
            status, error = RunStatus.failed, redact(f"{type(exc).__name__}: {exc}", self.secrets)
            raise
        finally:
            quiet.set()
            await asyncio.gather(beat, return_exceptions=True)
            finish_run(self.engine, self.run_id, status, error=error, unpriced=sorted(self.unpriced | unpriced_before))
        return runner.summarize(self.engine, self.run_id, study_name, self.config, planned=plan.planned,
                                calls_made=self.calls_made, reused=reused,
                                unpriced=sorted(self.unpriced | unpriced_before), started=started)

    def _open_rows(self) -> list[JuryBatch]:
        with transaction(self.engine) as session:
            rows = batch_store.open_batches(session, self.run_id)
            for row in rows:
                session.expunge(row)
            return rows

    async def _submit_unplaced(self) -> None:
        """Create the batches of stored rows that have none, then submit every call no stored batch holds."""
        rows = self._open_rows()
        for row in rows:
            if row.batch_id is None and not self.stop.is_set():
                await self._create(row)
        placed = {key for row in rows for key in row.custom_ids}
        for judge in self.config.judges:
            target = self.targets[judge.model]
            lines = [(key, request_line(w, judge, target.model, target.url)) for key, w in self.work.items()
                     if w.judge.model == judge.model and key not in placed]
            for chunk in split_lines(lines, self.limits):
                if self.stop.is_set():
                    return
                token = uuid.uuid4().hex
                data = b"".join(line for _, line in chunk)
                uploaded = await self.litellm.acreate_file(
                    file=(f"medhelm-run{self.run_id}-{token[:12]}.jsonl", data, "application/jsonl"), purpose="batch",
                    **target.params())
                row_id = await asyncio.to_thread(batch_store.record_upload, self.engine, self.run_id, judge.model,
                                                 token, [key for key, _ in chunk], str(uploaded.id))
                with transaction(self.engine) as session:
                    row = session.get(JuryBatch, row_id)
                    session.expunge(row)
                await self._create(row, look_up=False)

    async def _create(self, row: JuryBatch, *, look_up: bool = True) -> None:
        """Create the row's batch, unless (``look_up``: a row from before a restart) the provider already has it."""
        target = self.targets[row.judge]
        batch = await find_submitted(self.litellm, target, row) if look_up else None
        if batch is None:
            batch = await self.litellm.acreate_batch(
                completion_window="24h", endpoint=target.url, input_file_id=row.input_file_id,
                metadata={"medhelm_token": row.token, "medhelm_run": str(self.run_id)}, **target.params())
            self.calls_made += len(row.custom_ids)
        await asyncio.to_thread(batch_store.record_submitted, self.engine, row.id, str(_field(batch, "id")),
                                _field(batch, "status"))

    async def _collect_all(self) -> None:
        """Poll the open batches until every one has ended and its results are stored (or a stop)."""
        delay, failures = min(1.0, self.limits.poll_seconds), 0
        while not self.stop.is_set():
            rows = [r for r in self._open_rows() if r.batch_id is not None]
            if not rows:
                return
            try:
                for row in rows:
                    if self.stop.is_set():
                        return
                    await self._poll(row)
                failures = 0
            except (MissingCredentialsError, ValidationError):
                raise
            except Exception:
                failures += 1
                if failures >= MAX_POLL_FAILURES:
                    raise
            if any(r.batch_id is not None for r in self._open_rows()):
                await self._sleep(delay)
                delay = min(self.limits.poll_seconds, delay * 2)

    async def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stop.is_set() and time.monotonic() < end:
            await asyncio.sleep(min(runner.STOP_POLL_SECONDS, max(0.0, end - time.monotonic())))

    async def _poll(self, row: JuryBatch) -> None:
        target = self.targets[row.judge]
        # Without the flag litellm downloads a completed batch's whole output file at every retrieve, to log its cost
        # (up to 200 MB each time); the verdicts' cost is counted here, from each line's usage.
        batch = await self.litellm.aretrieve_batch(batch_id=row.batch_id, **target.params(),
                                                   litellm_metadata={"batch_ignore_default_logging": True})
        provider_status = str(_field(batch, "status"))
        if provider_status not in TERMINAL:
            await asyncio.to_thread(batch_store.record_provider_status, self.engine, row.id, provider_status)
            return
        seen: set[str] = set()
        price = self._price(row.judge)
        for file_field in ("output_file_id", "error_file_id"):
            file_id = _field(batch, file_field)
            if not file_id:
                continue
            content = await self.litellm.afile_content(file_id=file_id, **target.params())
            for entry in read_jsonl(content.content, f"{file_field} {file_id} of batch {row.batch_id}"):
                key = str(entry.get("custom_id"))
                if key in seen or key not in row.custom_ids:
                    continue
                seen.add(key)
                if key in self.work:
                    await self._store(outcome_from_result(self.work[key], entry, self.config, price))
        for key in row.custom_ids:
            if key not in seen and key in self.work:
                await self._store(missing_result(self.work[key], str(row.batch_id), provider_status))
        errors = _field(batch, "errors")
        await asyncio.to_thread(batch_store.mark_collected, self.engine, row.id, provider_status,
                                redact(str(errors), self.secrets) if errors else None)

    def _price(self, model: str) -> tuple[float, float] | None:
        price = batch_price_per_token(model)
        if price is None:
            self.unpriced.add(model)
            return None
        return price[0], price[1]

    async def _store(self, outcome: VerdictOutcome) -> None:
        outcome = redact_outcome(outcome, self.secrets)
        written = await asyncio.to_thread(record_verdict, self.engine, self.run_id, outcome)
        self.work.pop(outcome.cache_key, None)
        if written is None:
            return
        self.progress.add(outcome, written, self.calls_made)
        self._report()

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(**asdict(self.progress)))
