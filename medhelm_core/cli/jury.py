"""``medhelm jury run``, ``resume``, ``status``, ``prompt`` and ``rubric``: the LLM jury from the command line.

litellm and pandas load only inside the commands (litellm only once judges are really called), so
``medhelm --help`` and ``medhelm jury run --dry-run`` start fast.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction
from medhelm_core.errors import JuryInterrupted, NotFoundError, ValidationError

if TYPE_CHECKING:
    from medhelm_core.db.models import Study

jury_app = typer.Typer(help="Rate a study's items with an LLM jury (judge models through litellm).",
                       no_args_is_help=True)
app.add_typer(jury_app, name="jury")


class _ProgressLine:
    """A progress display on stderr: one line redrawn in a terminal, a line per tenth otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.last_tenth = -1
        self.last_draw = 0.0

    def __call__(self, p: Any) -> None:
        if not self.enabled or not p.planned:
            return
        text = (f"{p.done}/{p.planned} verdicts, {p.failed} failed, "
                f"{p.prompt_tokens + p.completion_tokens:,} tokens, ${p.cost_usd:.4f}")
        if self.tty:
            now = time.monotonic()
            if now - self.last_draw < 0.1 and p.done < p.planned:
                return
            self.last_draw = now
            width = 24
            filled = int(width * p.done / p.planned)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}\033[K")
            sys.stderr.flush()
            return
        tenth = 10 * p.done // p.planned
        if tenth != self.last_tenth:
            self.last_tenth = tenth
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _summary_text(s: Any) -> str:
    v = s.versions
    lines = [
        f"jury run {s.run_id} ({s.name}) on study {s.study}: {s.status}",
        f"rubric {v.get('rubric_name')} v{v.get('rubric_version')}; prompt "
        + (f"{v.get('prompt_name')} v{v.get('prompt_version')}" if v.get("prompt_version") else "not stored"),
        f"{s.done}/{s.planned} verdicts ({s.failed} failed); {s.calls_made} items judged now, "
        f"{s.reused} verdicts reused from earlier runs",
        f"{s.prompt_tokens:,} prompt + {s.completion_tokens:,} completion tokens; cost ${s.cost_usd:.4f}",
    ]
    if s.unpriced:
        lines.append(f"no price known for {', '.join(s.unpriced)}: counted as $0")
    return "\n".join(lines)


def _execute(ctx: typer.Context, study: Study, config: Any, *, dry_run: bool, retry_failed: bool,
             progress: bool, as_json: bool, batch: Any = None) -> None:
    """Estimate or run; ``batch`` (a BatchLimits) sends the calls through the providers' batch APIs."""
    from medhelm_core.jury.runner import estimate_run, run_jury

    engine = engine_for(ctx)
    if dry_run:
        estimate = estimate_run(engine, study, config, retry_failed=retry_failed, batch=batch is not None)
        lines = [estimate.describe()] + [
            f"  {j.model}: {j.calls} calls, ~{j.prompt_tokens:,} + {j.completion_tokens:,} tokens, "
            + ("no price known" if j.cost_usd is None else f"~${j.cost_usd:.4f}")
            for j in estimate.judges
        ]
        lines.append(f"rubric {config.rubric.name} v{config.rubric.version}; prompt {config.prompt_label}")
        emit({"dry_run": True, "study": study.name, "config_hash": config.config_hash, "versions": config.versions,
              **dataclasses.asdict(estimate)}, as_json, "\n".join(lines))
        return
    display = _ProgressLine(progress)
    try:
        if batch is not None:
            from medhelm_core.jury.batch import run_jury_batch

            summary = run_jury_batch(engine, study, config, retry_failed=retry_failed, on_progress=display,
                                     actor="cli", limits=batch)
        else:
            summary = run_jury(engine, study, config, retry_failed=retry_failed, on_progress=display, actor="cli")
    except KeyboardInterrupt:
        # Typer turns Ctrl-C into an exit code that the shared main() does not pass on; say it ourselves.
        raise JuryInterrupted(_interrupted_message(engine, study, config)) from None
    finally:
        display.close()
    emit(summary.to_dict(), as_json, _summary_text(summary))


def _interrupted_message(engine: Any, study: Study, config: Any) -> str:
    from medhelm_core.jury.store import find_run

    with transaction(engine) as session:
        run = find_run(session, study, config)
        done = f" after {run.calls_done} verdicts" if run is not None else ""
    return f"interrupted{done}; the verdicts written are kept: run the same command to resume"


_BATCH = typer.Option(False, "--batch", help="Send the calls through the provider's batch API (OpenAI, Azure "
                      "OpenAI, OpenAI-compatible servers): about half the price, results within 24 h. The command "
                      "waits and stores verdicts as batches end; stopped or killed, the same command collects them.")
_BATCH_MAX_REQUESTS = typer.Option(50_000, "--batch-max-requests", min=1, help="Requests per batch (OpenAI's limit: "
                                   "50,000; a batch file also stays under 200 MB).")
_BATCH_POLL = typer.Option(60.0, "--batch-poll-seconds", min=0.01, help="Longest wait between two polls of a batch.")


def _batch_limits(batch: bool, max_requests: int, poll_seconds: float) -> Any:
    if not batch:
        return None
    from medhelm_core.jury.batch_lines import BatchLimits

    return BatchLimits(max_requests=max_requests, poll_seconds=poll_seconds)


@jury_app.command("run")
def run_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    judges: list[str] = typer.Option([], "--judge", "-j", help="A litellm model name, e.g. openai/gpt-4o "
                                     "(repeatable)."),
    api_base: str | None = typer.Option(None, "--api-base", help="API base URL for the judges given with "
                                        "--judge (a local vLLM, Ollama or OpenAI-compatible server)."),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Name of the environment variable "
                                           "holding their key (default: the provider's, e.g. OPENAI_API_KEY)."),
    config_file: Path | None = typer.Option(None, "--config", "-c", help="jury.toml with per-judge settings."),
    concurrency: int | None = typer.Option(None, "--concurrency", help="Calls at once per judge (default 8)."),
    temperature: float | None = typer.Option(None, "--temperature", help="Sampling temperature (default 0)."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Output-token limit (default 4096)."),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds per call before it is retried "
                                         "(default 120)."),
    samples: int = typer.Option(1, "--samples", help="Times each judge is asked about each item (1 to 10, "
                                "default 1); 2 or more measure the judges' self-consistency (use a temperature "
                                "above 0)."),
    name: str | None = typer.Option(None, "--name", help="A name for the run (default: its judges)."),
    prompt_name: str | None = typer.Option(None, "--prompt-name", help="Prompt template the judges get "
                                           "(default medhelm; see medhelm jury prompt list)."),
    prompt_version: int | None = typer.Option(None, "--prompt-version", help="Version of that template "
                                              "(default its latest)."),
    rubric_version: int | None = typer.Option(None, "--rubric-version", help="Version of the study's rubric the "
                                              "judges see (default the study's own; clinicians always rate on "
                                              "the study's own)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Also ask again where a judge's answer "
                                      "could not be read."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only estimate calls and cost; call nobody."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress on stderr."),
    batch: bool = _BATCH,
    batch_max_requests: int = _BATCH_MAX_REQUESTS,
    batch_poll_seconds: float = _BATCH_POLL,
    as_json: bool = JsonOption,
) -> None:
    """Run (or resume) the jury over every item of STUDY; verdicts already made are never asked again.

    Options given here override a --config file's defaults; a judge's own settings in the file stay.
    A template in the --config file is stored as a version of --prompt-name, unless one holds its text.
    The run records its judges, rubric version and prompt template version.
    Keys are read from the environment (or Streamlit secrets), never from files or the database.
    """
    from medhelm_core.jury.config import build_config, load_jury_file, samples_warning
    from medhelm_core.jury.run_versions import choose_template
    from medhelm_core.rubric import judge_rubric
    from medhelm_core.studies import get_study

    jury_file = load_jury_file(config_file) if config_file else None
    if not judges and (jury_file is None or not jury_file.judges):
        raise ValidationError("give at least one --judge MODEL, or a --config file with [[judges]]")
    with transaction(engine_for(ctx)) as session:
        target = get_study(session, study)
        rubric = judge_rubric(session, target, rubric_version)
        template = choose_template(session, name=prompt_name, version=prompt_version, jury_file=jury_file,
                                   store=not dry_run, actor="cli")
    config = build_config(rubric, judges, jury_file=jury_file, api_base=api_base, api_key_env=api_key_env,
                          temperature=temperature, max_tokens=max_tokens, concurrency=concurrency,
                          timeout=timeout, name=name, template=template, samples=samples)
    warning = samples_warning(config)
    if warning:
        sys.stderr.write(f"warning: {warning}\n")
    _execute(ctx, target, config, dry_run=dry_run, retry_failed=retry_failed, progress=progress, as_json=as_json,
             batch=_batch_limits(batch, batch_max_requests, batch_poll_seconds))


@jury_app.command("resume")
def resume_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    run_id: int = typer.Argument(..., help="The run's id (see medhelm jury status)."),
    concurrency: int | None = typer.Option(None, "--concurrency", help="Calls at once per judge."),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds per call before it is retried."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Also ask again where an answer could "
                                      "not be read."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only estimate what is left; call nobody."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress on stderr."),
    batch: bool = _BATCH,
    batch_max_requests: int = _BATCH_MAX_REQUESTS,
    batch_poll_seconds: float = _BATCH_POLL,
    as_json: bool = JsonOption,
) -> None:
    """Resume a stopped or interrupted run with its stored judges, template, rubric version and settings."""
    from medhelm_core.db.models import JuryRun
    from medhelm_core.jury.run_versions import stored_config
    from medhelm_core.studies import get_study

    with transaction(engine_for(ctx)) as session:
        target = get_study(session, study)
        run = session.get(JuryRun, run_id)
        if run is None or run.study_id != target.id:
            raise NotFoundError(f"study {study} has no jury run {run_id} (see medhelm jury status {study})")
        config = stored_config(session, target, run).with_execution(concurrency=concurrency, timeout=timeout)
    _execute(ctx, target, config, dry_run=dry_run, retry_failed=retry_failed, progress=progress, as_json=as_json,
             batch=_batch_limits(batch, batch_max_requests, batch_poll_seconds))


@jury_app.command("status")
def status_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    as_json: bool = JsonOption,
) -> None:
    """List the study's jury runs: judges, rubric and prompt versions, status, verdicts, tokens and cost."""
    from medhelm_core.db.models import RunSource
    from medhelm_core.frames import jury_runs
    from medhelm_core.jury.batch_store import open_batches
    from medhelm_core.jury.run_versions import run_versions
    from medhelm_core.jury.store import effective_status, planned_calls, run_state
    from medhelm_core.studies import get_study

    with transaction(engine_for(ctx)) as session:
        rows = []
        for run in jury_runs(session, get_study(session, study)):
            state = run_state(run)
            versions = run_versions(run, session)
            waiting = open_batches(session, run.id)
            rows.append({
                "run_id": run.id, "name": run.name, "source": run.source, "status": effective_status(run),
                "judges": list(versions.judges), "rubric_version": versions.rubric_version,
                "prompt_name": versions.prompt_name, "prompt_version": versions.prompt_version,
                "versions": f"rubric {versions.rubric_label}; prompt {versions.prompt_label}",
                "planned": planned_calls(session, run), "done": run.calls_done, "failed": run.calls_failed,
                "prompt_tokens": run.prompt_tokens, "completion_tokens": run.completion_tokens,
                "cost_usd": run.cost_usd, "unpriced": state.get("unpriced") or [], "error": state.get("error"),
                "started_at": run.started_at.isoformat(),
                "finished_at": run.finished_at.isoformat() if run.finished_at else None,
                "batches_waiting": [{"batch_id": b.batch_id, "judge": b.judge, "calls": len(b.custom_ids),
                                     "provider_status": b.provider_status} for b in waiting],
            })
    lines = []
    for r in rows:
        label = " [recorded scores, not judges called here]" if r["source"] == RunSource.recorded else ""
        lines.append(
            f"{r['run_id']}: {r['name']}{label}: {r['status']}, {r['done']}/{r['planned']} verdicts "
            f"({r['failed']} failed), {r['prompt_tokens'] + r['completion_tokens']:,} tokens, ${r['cost_usd']:.4f}"
        )
        lines.append(f"   {r['versions']}")
        if r["error"]:
            lines.append(f"   last error: {r['error']}")
        if r["batches_waiting"]:
            calls = sum(b["calls"] for b in r["batches_waiting"])
            states = sorted({b["provider_status"] or "not yet submitted" for b in r["batches_waiting"]})
            lines.append(f"   {calls} calls waiting in {len(r['batches_waiting'])} provider batch(es) "
                         f"({', '.join(states)}): run it again with --batch to collect them")
    empty = f"study {study} has no jury runs yet: medhelm jury run {study} --judge MODEL"
    emit(rows, as_json, "\n".join(lines) or empty)



prompt_app = typer.Typer(help="Versioned judge prompt templates: list, show and add versions.", no_args_is_help=True)
jury_app.add_typer(prompt_app, name="prompt")
rubric_app = typer.Typer(help="Versions of a study's rubric with other wording, for the judges only.",
                         no_args_is_help=True)
jury_app.add_typer(rubric_app, name="rubric")
_PROMPT_NAME = typer.Option("medhelm", "--name", "-n", help="Template name.")


def _version_record(v: Any, *, text: bool = False) -> dict[str, Any]:
    record = {"name": v.name, "version": v.version, "label": v.label, "text_hash": v.text_hash, "note": v.note,
              "created_by": v.created_by, "created_at": v.created_at.isoformat() if v.created_at else None}
    return {**record, "text": v.text} if text else record


@prompt_app.command("list")
def prompt_list_cmd(
    ctx: typer.Context,
    name: str | None = typer.Option(None, "--name", "-n", help="Only this template (default: every template)."),
    as_json: bool = JsonOption,
) -> None:
    """List the stored versions of the prompt templates (the bundled one is medhelm v1)."""
    from medhelm_core.jury.templates import list_template_versions

    with transaction(engine_for(ctx)) as session:
        rows = [_version_record(v) for v in list_template_versions(session, name)]
    lines = [f"{r['label']}  {r['created_at'][:16].replace('T', ' ') if r['created_at'] else ''}  "
             f"{r['created_by']}  {r['text_hash'][:12]}  {r['note']}".rstrip() for r in rows]
    emit(rows, as_json, "\n".join(lines))


@prompt_app.command("show")
def prompt_show_cmd(
    ctx: typer.Context,
    name: str = _PROMPT_NAME,
    version: int | None = typer.Option(None, "--version", "-v", help="Version (default the latest)."),
    as_json: bool = JsonOption,
) -> None:
    """Print a template version's text exactly as stored (edit it and give it to 'add' for a new version)."""
    from medhelm_core.jury.templates import get_template_version

    with transaction(engine_for(ctx)) as session:
        found = get_template_version(session, name, version)
    if as_json:
        emit(_version_record(found, text=True), True, "")
    else:
        # Exactly the stored text, no newline added: show > file; add file gives no new version.
        sys.stdout.write(found.text)
        sys.stdout.flush()


@prompt_app.command("add")
def prompt_add_cmd(
    ctx: typer.Context,
    file: Path | None = typer.Argument(None, help="The template text (default or '-': standard input)."),
    name: str = _PROMPT_NAME,
    note: str = typer.Option("", "--note", help="What changed and why."),
    as_json: bool = JsonOption,
) -> None:
    """Store a template text as the next version of --name (nothing new when it equals the latest).

    The text uses $placeholders: $response_block, $criteria and $output_format are required.
    See 'medhelm jury prompt show' for the bundled template.
    """
    from medhelm_core.errors import InputFileError
    from medhelm_core.jury.templates import save_template_version

    if file is None or str(file) == "-":
        text = sys.stdin.read()
        if not text.strip():
            raise ValidationError("no template text on standard input")
    else:
        if not file.is_file():
            raise InputFileError(file, "no such template file")
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputFileError(file, f"not UTF-8 text (byte {exc.start})") from None
    with transaction(engine_for(ctx)) as session:
        saved, created = save_template_version(session, name, text, note=note, actor="cli")
    result = {**_version_record(saved), "created": created}
    message = (f"saved {saved.label}" if created
               else f"unchanged: the text is the latest version's, {saved.label}; no version added")
    emit(result, as_json, message)


def _rubric_record(spec: Any, own: int) -> dict[str, Any]:
    return {"name": spec.name, "version": spec.version, "study_rubric": spec.version == own, "title": spec.title,
            "criteria": [{"name": c.name, "label": c.label, "description": c.description,
                          "scale": [c.scale_min, c.scale_max],
                          "anchors": {str(k): v for k, v in sorted(c.anchors.items())}} for c in spec.criteria]}


@rubric_app.command("list")
def rubric_list_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    as_json: bool = JsonOption,
) -> None:
    """List the versions of STUDY's rubric its judges may be shown (same criteria and scales)."""
    from medhelm_core.rubric import compatible_rubric_versions, rubric_spec
    from medhelm_core.studies import get_study

    with transaction(engine_for(ctx)) as session:
        target = get_study(session, study)
        own = rubric_spec(session, target.rubric_id).version
        rows = [_rubric_record(s, own) for s in compatible_rubric_versions(session, target)]
    lines = [f"{r['name']} v{r['version']}{'  (the study rubric: clinicians rate on it)' if r['study_rubric'] else ''}"
             for r in rows]
    emit(rows, as_json, "\n".join(lines))


@rubric_app.command("add")
def rubric_add_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    file: Path = typer.Argument(..., help="Rubric file (.toml or .json) with new wording, same criteria and scales."),
    as_json: bool = JsonOption,
) -> None:
    """Store new wording of STUDY's rubric as its next version, for the judges (--rubric-version N).

    Labels, descriptions and anchors may change; criteria names and scales must stay.
    Clinicians keep rating on the study's own rubric. The file's version number is ignored: the next is used.
    """
    from medhelm_core.rubric import load_rubric_file, rubric_spec, save_rubric_version
    from medhelm_core.studies import get_study

    spec = load_rubric_file(file)
    with transaction(engine_for(ctx)) as session:
        target = get_study(session, study)
        saved, created = save_rubric_version(session, target, spec, actor="cli")
        result = {**_rubric_record(saved, rubric_spec(session, target.rubric_id).version), "created": created}
    message = (f"saved {saved.name} v{saved.version}" if created
               else f"unchanged: {saved.name} v{saved.version} already has this wording; no version added")
    emit(result, as_json, message)
