"""The calibration report as the Agreement page hands it out: one zip, from figures current at the click.

This module imports :mod:`medhelm_core.report`, which itself builds on :mod:`medhelm_core.figures`; so it is not
imported by ``figures/__init__`` (that would be a cycle): import it as ``medhelm_core.figures.report_archive``.
The report's modules (the PDF writer, its fonts) are imported at the first export, not with the page: 28 MB of
every app process that never exports.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from sqlalchemy.engine import Engine

from medhelm_core.db.audit import Actor
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Study
from medhelm_core.errors import NotFoundError
from medhelm_core.figures.cache import FigureKey, fresh_figures

__all__ = ["report_archive"]


def report_archive(engine: Engine, key: FigureKey, actor: Actor = None) -> bytes:
    """The calibration report (HTML, PDF, manifest and data bundle) for the study and filters of ``key`` as zip
    bytes, from the study's data as it is now: waits for figures being updated, never uses older ones.

    Examples
    --------
    >>> key = FigureKey.of(engine, study, protocol="medhelm", benchmarks=("aci_bench", "medi_qa"))  # doctest: +SKIP
    >>> Path("report.zip").write_bytes(report_archive(engine, key, actor=who))  # doctest: +SKIP
    """
    from medhelm_core.report import ReportOptions, write_report, zip_folder

    current = fresh_figures(engine, key)
    options = ReportOptions(protocol=key.protocol, benchmarks=key.benchmarks, models=key.models,
                            jury_run_id=current.data.jury_run.id if current.data.jury_run else None)
    with tempfile.TemporaryDirectory() as tmp, transaction(engine) as session:
        study = session.get(Study, key.study_id)
        if study is None:
            raise NotFoundError(f"study {key.study_id} no longer exists")
        write_report(session, study, Path(tmp), options, data=current.data, agreement=current.table, actor=actor)
        return zip_folder(Path(tmp))
