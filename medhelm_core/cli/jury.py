"""``medhelm jury run``, ``resume`` and ``status``: the LLM jury from the command line.

litellm and pandas load only inside the commands (litellm only once judges are really called), so
``medhelm --help`` and ``medhelm jury run --dry-run`` start fast.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db import transaction
from medhelm_core.errors import MedhelmError, NotFoundError, ValidationError

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
    lines = [
        f"jury run {s.run_id} ({s.name}) on study {s.study}: {s.status}",
        f"{s.done}/{s.planned} verdicts ({s.failed} failed); {s.calls_made} items judged now, "
        f"{s.reused} verdicts reused from earlier runs",
        f"{s.prompt_tokens:,} prompt + {s.completion_tokens:,} completion tokens; cost ${s.cost_usd:.4f}",
    ]
    if s.unpriced:
        lines.append(f"no price known for {', '.join(s.unpriced)}: counted as $0")
    return "\n".join(lines)


def _execute(ctx: typer.Context, study: str, config: Any, *, dry_run: bool, retry_failed: bool,
             progress: bool, as_json: bool) -> None:
    from medhelm_core.jury.runner import estimate_run, run_jury

    engine = engine_for(ctx)
    if dry_run:
        estimate = estimate_run(engine, study, config, retry_failed=retry_failed)
        lines = [estimate.describe()] + [
            f"  {j.model}: {j.calls} calls, ~{j.prompt_tokens:,} + {j.completion_tokens:,} tokens, "
            + ("no price known" if j.cost_usd is None else f"~${j.cost_usd:.4f}")
            for j in estimate.judges
        ]
        emit({"dry_run": True, "study": study, "config_hash": config.config_hash, **dataclasses.asdict(estimate)},
             as_json, "\n".join(lines))
        return
    display = _ProgressLine(progress)
    try:
        summary = run_jury(engine, study, config, retry_failed=retry_failed, on_progress=display, actor="cli")
    except KeyboardInterrupt:
        # Typer turns Ctrl-C into an exit code that the shared main() does not pass on; say it ourselves.
        raise JuryInterrupted(_interrupted_message(engine, study, config)) from None
    finally:
        display.close()
    emit(summary.to_dict(), as_json, _summary_text(summary))


class JuryInterrupted(MedhelmError):
    """Ctrl-C during a run: what was written is kept, and the same command resumes."""


def _interrupted_message(engine: Any, study: str, config: Any) -> str:
    from medhelm_core.jury.store import find_run
    from medhelm_core.studies import get_study

    with transaction(engine) as session:
        run = find_run(session, get_study(session, study), config)
        done = f" after {run.calls_done} verdicts" if run is not None else ""
    return f"interrupted{done}; the verdicts written are kept: run the same command to resume"


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
    name: str | None = typer.Option(None, "--name", help="A name for the run (default: its judges)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Also ask again where a judge's answer "
                                      "could not be read."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only estimate calls and cost; call nobody."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress on stderr."),
    as_json: bool = JsonOption,
) -> None:
    """Run (or resume) the jury over every item of STUDY; verdicts already made are never asked again.

    Options given here override a --config file's defaults; a judge's own settings in the file stay.
    Keys are read from the environment (or Streamlit secrets), never from files or the database.
    """
    from medhelm_core.jury.config import build_config, load_jury_file

    jury_file = load_jury_file(config_file) if config_file else None
    if not judges and (jury_file is None or not jury_file.judges):
        raise ValidationError("give at least one --judge MODEL, or a --config file with [[judges]]")
    with transaction(engine_for(ctx)) as session:
        rubric = _study_rubric(session, study)
    config = build_config(rubric, judges, jury_file=jury_file, api_base=api_base, api_key_env=api_key_env,
                          temperature=temperature, max_tokens=max_tokens, concurrency=concurrency,
                          timeout=timeout, name=name)
    _execute(ctx, study, config, dry_run=dry_run, retry_failed=retry_failed, progress=progress, as_json=as_json)


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
    as_json: bool = JsonOption,
) -> None:
    """Resume a stopped or interrupted run with its stored judges, template and settings."""
    from medhelm_core.jury.config import JuryConfig
    from medhelm_core.models import JuryRun
    from medhelm_core.studies import get_study

    with transaction(engine_for(ctx)) as session:
        rubric = _study_rubric(session, study)
        run = session.get(JuryRun, run_id)
        if run is None or run.study_id != get_study(session, study).id:
            raise NotFoundError(f"study {study} has no jury run {run_id} (see medhelm jury status {study})")
        if run.source != "litellm":
            raise ValidationError(f"jury run {run_id} holds recorded scores; there are no judges to call")
        config = JuryConfig.from_dict(run.config, rubric).with_execution(concurrency=concurrency, timeout=timeout)
    _execute(ctx, study, config, dry_run=dry_run, retry_failed=retry_failed, progress=progress, as_json=as_json)


@jury_app.command("status")
def status_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    as_json: bool = JsonOption,
) -> None:
    """List the study's jury runs: status, verdicts done and failed, tokens and cost."""
    from medhelm_core.jury.store import effective_status, planned_calls, run_state, study_runs
    from medhelm_core.studies import get_study

    with transaction(engine_for(ctx)) as session:
        rows = []
        for run in study_runs(session, get_study(session, study)):
            state = run_state(run)
            rows.append({
                "run_id": run.id, "name": run.name, "source": run.source, "status": effective_status(run),
                "planned": planned_calls(session, run), "done": run.calls_done, "failed": run.calls_failed,
                "prompt_tokens": run.prompt_tokens, "completion_tokens": run.completion_tokens,
                "cost_usd": run.cost_usd, "unpriced": state.get("unpriced") or [], "error": state.get("error"),
                "started_at": run.started_at.isoformat(),
                "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            })
    lines = []
    for r in rows:
        label = " [recorded scores, not judges called here]" if r["source"] == "recorded" else ""
        lines.append(
            f"{r['run_id']}: {r['name']}{label}: {r['status']}, {r['done']}/{r['planned']} verdicts "
            f"({r['failed']} failed), {r['prompt_tokens'] + r['completion_tokens']:,} tokens, ${r['cost_usd']:.4f}"
        )
        if r["error"]:
            lines.append(f"   last error: {r['error']}")
    empty = f"study {study} has no jury runs yet: medhelm jury run {study} --judge MODEL"
    emit(rows, as_json, "\n".join(lines) or empty)


def _study_rubric(session: Any, study: str) -> Any:
    from medhelm_core.rubric import rubric_spec
    from medhelm_core.studies import get_study

    return rubric_spec(session, get_study(session, study).rubric_id)
