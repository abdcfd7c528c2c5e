"""``medhelm report``: write a study's calibration report (HTML, PDF and a data bundle) to a folder."""

from __future__ import annotations

from pathlib import Path

import typer

from medhelm_core.cli.agreement import PROTOCOL_NAMES, plain
from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction
from medhelm_core.errors import ValidationError
from medhelm_core.studies import agreement_view, get_study

# The report's libraries (pandas, altair, vl-convert, fpdf2) load inside the command, so `medhelm --help`
# starts fast.


def _figure(value: object) -> str:
    number = plain(value)
    return "n/a" if number is None else f"{number:.3f}"


@app.command("report")
def report_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Folder to write report.html, report.pdf, manifest.json and data/ into."
    ),
    protocol: str | None = typer.Option(
        None, "--protocol", "-p", help="medhelm (the paper's ICC(3,k) on z-scores) or full (every form); default: "
        "the study's saved view (as the Agreement page opens)."
    ),
    benchmarks: list[str] = typer.Option(
        [], "--benchmark", "-b", help="Benchmark to include and pool (repeatable; default: the study's saved view, "
        "else all)."
    ),
    models: list[str] = typer.Option([], "--model", "-m", help="Model to include (repeatable; default all)."),
    jury_run: int | None = typer.Option(None, "--jury-run", help="Jury run id (default: the study's latest)."),
    resamples: int = typer.Option(2000, "--resamples", help="Bootstrap resamples of the full protocol."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    no_texts: bool = typer.Option(
        False, "--no-texts", help="Leave output excerpts out of the report (no item text leaves the database)."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Write the calibration report: a self-contained HTML file (opens offline), a PDF, and a data bundle.

    The bundle (data/*.csv with manifest.json) recomputes every figure; MedHELM's 0.474 is pooled with
    -b aci_bench -b medi_qa.
    """
    if protocol is not None and protocol not in PROTOCOL_NAMES:
        raise ValidationError(f"--protocol {protocol!r} unknown; use one of {', '.join(PROTOCOL_NAMES)}")
    if out.exists() and not out.is_dir():
        raise ValidationError(f"--out {out} is a file; give a folder")
    from medhelm_core.report import ReportOptions, write_report

    with transaction(engine_for(ctx)) as session:
        target = get_study(session, study)
        protocol, benchmarks = agreement_view(target, protocol, benchmarks)
        options = ReportOptions(
            protocol=protocol,
            benchmarks=tuple(benchmarks),
            models=tuple(models),
            jury_run_id=jury_run,
            n_resamples=resamples,
            seed=seed,
            item_texts=not no_texts,
        )
        files = write_report(session, target, out, options)
    result = {
        "study": study,
        "html": str(files.html),
        "pdf": str(files.pdf),
        "manifest": str(files.manifest),
        "data": files.data_files,
        "pooled": [{k: plain(v) for k, v in row.items()} for row in files.headline],
        "nothing_to_show": files.nothing_to_show,
    }
    composite = [r for r in files.headline if r["criterion"] == "composite"]
    lines = [f"report for study {study} written to {out}", f"  {files.html}", f"  {files.pdf}", f"  {files.manifest}"]
    lines += [f"  {files.folder / name} ({rows} rows)" for name, rows in files.data_files.items()]
    lines.append("pooled composite (ICC(C,k) of z-scored sides; ICC(1) and the ceiling over every clinician):")
    lines += [f"  {r['comparison']} [{r['method']}]: {_figure(r['icc'])} (n={r['n_items']} of {r['n_available']})"
              for r in composite]
    if files.nothing_to_show:
        lines.append("every agreement figure is n/a: the report says there is nothing to show yet")
    emit(result, as_json, "\n".join(lines))
