"""Export a study's data as files (CSV, JSONL or Parquet) so it can be analysed elsewhere.

CSV goes through :func:`medhelm_core.csv_safe.write_csv`, which quotes a text cell a spreadsheet would run as a
formula; JSON Lines and Parquet are data formats no spreadsheet runs, written exactly as stored.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from sqlmodel import Session

from medhelm_core.csv_safe import write_csv
from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import AuditAction, Study
from medhelm_core.errors import ValidationError
from medhelm_core.frames import (
    clinician_ratings_frame,
    items_frame,
    metrics_long_frame,
    rating_history_frame,
    verdicts_frame,
)

EXPORT_FORMATS = ("csv", "jsonl", "parquet")


def export_study(
    session: Session, study: Study, out_dir: Path, fmt: str = "csv", *, actor: Actor = "cli"
) -> dict[str, int]:
    """Write items, current ratings, rating history, verdicts and metric scores to ``out_dir``.

    Returns the number of rows written per file name. Files are written to a temporary name first and
    renamed, so an interrupted export never leaves a half-written file under the final name. The export
    is recorded in the audit trail (in the caller's transaction) as done by ``actor``.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValidationError(f"unknown export format {fmt!r}; formats are: {', '.join(EXPORT_FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = {
        "items": items_frame(session, study),
        "ratings": clinician_ratings_frame(session, study),
        "rating_history": rating_history_frame(session, study),
        "verdicts": verdicts_frame(session, study),
        "metrics": metrics_long_frame(session, study),
    }
    counts: dict[str, int] = {}
    for name, frame in tables.items():
        target = out_dir / f"{name}.{fmt}"
        _write(frame, target, fmt)
        counts[target.name] = len(frame)
    record_event(session, AuditAction.export, actor=actor, study_id=study.id, format=fmt, out=str(out_dir.resolve()),
                 rows=counts)
    return counts


def _write(frame: pd.DataFrame, target: Path, fmt: str) -> None:
    if fmt == "csv":
        write_csv(frame, target)  # under a temporary name, renamed
        return
    tmp = target.with_name(target.name + ".tmp")
    if fmt == "jsonl":
        frame.to_json(tmp, orient="records", lines=True, force_ascii=False)
    else:
        frame.to_parquet(tmp, index=False)
    tmp.replace(target)
