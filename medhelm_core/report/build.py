"""Write a calibration report to a folder: ``report.html``, ``report.pdf``, ``manifest.json`` and ``data/``."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from sqlmodel import Session

from medhelm_core.db.audit import record_event
from medhelm_core.db.models import AuditAction, Study
from medhelm_core.figures import DashboardData, load_dashboard_data
from medhelm_core.report.bundle import MANIFEST, write_bundle
from medhelm_core.report.content import ReportContent, ReportOptions, report_content
from medhelm_core.report.html import render_html
from medhelm_core.report.pdf import render_pdf

HTML_NAME = "report.html"
PDF_NAME = "report.pdf"


@dataclass(frozen=True)
class ReportFiles:
    """Where a report was written, and what it says at a glance."""

    folder: Path
    html: Path
    pdf: Path
    manifest: Path
    data_files: dict[str, int]
    headline: list[dict[str, Any]]
    #: every agreement figure is n/a: the report says there is nothing to show yet
    nothing_to_show: bool = False


def _write_atomic(path: Path, payload: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(payload)
    tmp.replace(path)


def write_report(
    session: Session,
    study: Study,
    out_dir: Path,
    options: ReportOptions | None = None,
    *,
    data: DashboardData | None = None,
    agreement: pd.DataFrame | None = None,
    actor: Any = "cli",
) -> ReportFiles:
    """Compute and write the whole report for ``study`` into ``out_dir`` (created if missing).

    Parameters
    ----------
    session : Session
        An open session.
    study : Study
        The study to report on.
    out_dir : Path
        The folder to write into; files of an earlier report there are replaced.
    options : ReportOptions, optional
        Protocol, benchmarks, models, jury run, bootstrap settings (default: the MedHELM protocol on
        everything, the latest jury run).
    data, agreement : optional
        What the Agreement page already loaded and computed for the same options, to avoid recomputing.
    actor : optional
        Who exported it, for the audit trail (the event is added to ``session``; the caller commits).

    Returns
    -------
    ReportFiles

    Raises
    ------
    NotEnoughRatingsError
        When the study has too few ratings for any figure.

    Examples
    --------
    >>> options = ReportOptions(benchmarks=("aci_bench", "medi_qa"))
    >>> files = write_report(session, study, Path("out"), options)  # doctest: +SKIP
    >>> files.html.name, files.pdf.name  # doctest: +SKIP
    ('report.html', 'report.pdf')
    """
    options = options or ReportOptions()
    if data is None:
        data = load_dashboard_data(session, study, options.jury_run_id)
    content: ReportContent = report_content(session, study, data, options, agreement)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = write_bundle(session, study, content, out_dir)
    data_files = {name: meta["rows"] for name, meta in result["files"].items()}
    html_path, pdf_path = out_dir / HTML_NAME, out_dir / PDF_NAME
    _write_atomic(html_path, render_html(content, data_files).encode("utf-8"))
    _write_atomic(pdf_path, render_pdf(content))
    record_event(session, AuditAction.report_export, actor=actor, study_id=study.id, protocol=options.protocol,
                 benchmarks=list(options.benchmarks or ()), folder=out_dir.name)
    pooled = content.headline[content.headline["benchmark"] == "pooled"]
    return ReportFiles(
        folder=out_dir,
        html=html_path,
        pdf=pdf_path,
        manifest=out_dir / MANIFEST,
        data_files=data_files,
        headline=pooled.to_dict("records"),
        nothing_to_show=content.nothing_to_show,
    )


def zip_folder(folder: Path) -> bytes:
    """A report folder as zip bytes (what the page's download button hands out)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.name.endswith(".tmp"):
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()
