"""``medhelm init``, ``import``, ``export`` and ``studies``."""

from __future__ import annotations

from pathlib import Path

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import describe_url, transaction
from medhelm_core.db.migrate import upgrade_database
from medhelm_core.rubric import load_rubric_file
from medhelm_core.settings import import_limits
from medhelm_core.studies import get_or_create_study, get_study, list_studies, summarise_study

# pandas and pyarrow load only in the commands that need them, so `medhelm --help` starts fast.
FORMATS = ("helm", "jsonl", "csv", "parquet", "medhelm-ratings")


@app.command("init")
def init_cmd(ctx: typer.Context, as_json: bool = JsonOption) -> None:
    """Create the database or upgrade it to the latest schema (safe to run at any time)."""
    engine = engine_for(ctx, check_schema=False)
    before, after = upgrade_database(engine)
    url = describe_url(ctx.obj["database_url"])
    text = f"database {url} is at schema {after}" + ("" if before == after else f" (was {before or 'empty'})")
    emit({"database": url, "before": before, "after": after}, as_json, text)


@app.command("import")
def import_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name; created if new."),
    paths: list[Path] = typer.Argument(..., help="Files or HELM run/suite folders."),
    fmt: str | None = typer.Option(None, "--format", "-f", help=f"One of: {', '.join(FORMATS)} (default: detect)."),
    column_map: list[str] = typer.Option([], "--map", help="Rename a column: THEIRS=OURS (repeatable)."),
    rubric: Path | None = typer.Option(None, "--rubric", help="Rubric file (TOML/JSON) for a new study."),
    overlap: int = typer.Option(2, "--overlap", help="Clinicians per item, for a new study."),
    max_rows: int | None = typer.Option(
        None, "--max-rows", help="Most rows the import may read (default: MEDHELM_IMPORT_MAX_ROWS or 100000)."
    ),
    max_bytes: str | None = typer.Option(
        None, "--max-bytes", help="Most data the import may read, e.g. 500MB (default: MEDHELM_IMPORT_MAX_BYTES "
        "or 100MB)."
    ),
    judge_name: list[str] = typer.Option(
        [], "--judge-name", help="Name a judge of HELM's jury annotations: KEY=NAME, e.g. "
        "gpt=openai/gpt-4o-2024-05-13 (repeatable; default: the name in the run spec, else the key)."
    ),
    texts: Path | None = typer.Option(
        None, "--texts", help="With --format medhelm-ratings: a CSV of the items' texts (dataset_name, instance_id, "
        "model_key, question, answer)."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Import model outputs (HELM, JSONL, CSV, Parquet) or MedHELM ratings, all or nothing."""
    from medhelm_core.importers import import_paths, parse_column_map, parse_judge_names

    mapping = parse_column_map(column_map)
    judges = parse_judge_names(judge_name)
    limits = import_limits(max_rows, max_bytes)
    rubric_spec = load_rubric_file(rubric) if rubric else None
    engine = engine_for(ctx)
    with transaction(engine) as session:
        target, created = get_or_create_study(session, study, rubric=rubric_spec, overlap=overlap)
        report = import_paths(session, target, paths, fmt, mapping, limits=limits, judge_names=judges, texts=texts)
    result = {"study": study, "study_created": created, **report.__dict__}
    lines = [
        f"study {study}{' (new)' if created else ''}: {report.items_created} items created, "
        f"{report.items_updated} updated, {report.items_unchanged} unchanged"
    ]
    if report.ratings_written or report.ratings_unchanged:
        lines.append(
            f"ratings: {report.ratings_written} written, {report.ratings_unchanged} unchanged; "
            f"{report.raters_created} clinicians created"
        )
    if report.verdicts_written or report.verdicts_unchanged:
        lines.append(
            f"recorded jury scores: {report.verdicts_written} written, {report.verdicts_unchanged} unchanged"
            + (f"; {report.verdicts_failed} verdicts hold no score (stored as failed with the reason, never scored)"
               if report.verdicts_failed else "")
        )
    if report.metric_scores_written or report.metric_scores_unchanged:
        lines.append(f"recorded metric scores (HELM's own): {report.metric_scores_written} written, "
                     f"{report.metric_scores_unchanged} unchanged")
    for reason, n in sorted(report.skipped.items()):
        lines.append(f"skipped {n}: {reason}")
    emit(result, as_json, "\n".join(lines))


@app.command("export")
def export_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder to write into (created if missing)."),
    fmt: str = typer.Option("csv", "--format", "-f", help="csv, jsonl or parquet."),
    as_json: bool = JsonOption,
) -> None:
    """Export a study's items, ratings (with history), jury verdicts and metric scores."""
    from medhelm_core.export import export_study

    engine = engine_for(ctx)
    with transaction(engine) as session:
        counts = export_study(session, get_study(session, study), out, fmt)
    emit(
        {"study": study, "out": str(out), "files": counts},
        as_json,
        "\n".join(f"{out / name}: {n} rows" for name, n in counts.items()),
    )


@app.command("studies")
def studies_cmd(ctx: typer.Context, as_json: bool = JsonOption) -> None:
    """List the studies with their counts of items, ratings and verdicts."""
    engine = engine_for(ctx)
    with transaction(engine) as session:
        summaries = [summarise_study(session, s) for s in list_studies(session)]
    text = "\n".join(
        f"{s.name}: {s.items} items ({s.benchmarks} benchmarks, {s.models} models), "
        f"{s.ratings} ratings by {s.raters} clinicians, {s.verdicts} verdicts, {s.metric_scores} metric scores"
        for s in summaries
    ) or "no studies yet: medhelm import STUDY FILE"
    emit([s.__dict__ for s in summaries], as_json, text)
