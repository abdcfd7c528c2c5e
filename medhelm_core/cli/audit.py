"""``medhelm audit export``: the audit trail as CSV or JSON Lines.

The CSV is written by :func:`medhelm_core.csv_safe.csv_text`: an actor or study name that a spreadsheet would
run as a formula is quoted; JSON Lines is written exactly as stored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction
from medhelm_core.errors import ValidationError

audit_app = typer.Typer(help="The audit trail: who changed what, and when.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")

AUDIT_FORMATS = ("csv", "jsonl")
COLUMNS = ("id", "at", "actor", "user_id", "action", "study", "study_id", "details")


@audit_app.command("export")
def export_cmd(
    ctx: typer.Context,
    out: Path | None = typer.Option(None, "--out", "-o", help="File to write (default: standard output)."),
    since: str | None = typer.Option(None, "--since", help="Only events at or after this ISO date/time (UTC)."),
    study: str | None = typer.Option(None, "--study", help="Only events of this study."),
    fmt: str = typer.Option("csv", "--format", "-f", help="csv or jsonl."),
    as_json: bool = JsonOption,
) -> None:
    """Export audit events (rating revisions, assignments, imports, exports, jury runs, account changes)."""
    from medhelm_core.db.audit import audit_events, parse_since
    from medhelm_core.studies import get_study

    if fmt not in AUDIT_FORMATS:
        raise ValidationError(f"unknown audit format {fmt!r}; formats are: {', '.join(AUDIT_FORMATS)}")
    when = parse_since(since)
    with transaction(engine_for(ctx)) as session:
        rows = audit_events(session, since=when, study=get_study(session, study) if study else None)
    text = _render(rows, fmt)
    if out is None:
        if as_json:  # --json without --out: the events themselves, as one JSON array
            emit([r.__dict__ for r in rows], True, "")
        else:
            sys.stdout.write(text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    emit({"out": str(out), "events": len(rows), "format": fmt}, as_json, f"{out}: {len(rows)} audit events")


def _render(rows: list, fmt: str) -> str:
    if fmt == "jsonl":
        return "".join(json.dumps(r.__dict__, ensure_ascii=False, default=str) + "\n" for r in rows)
    import pandas as pd

    from medhelm_core.csv_safe import csv_text

    # object dtype keeps an id an integer (a column with a missing user id would otherwise print 3.0)
    table = [[r.id, r.at, r.actor, "" if r.user_id is None else r.user_id, r.action, r.study or "",
              "" if r.study_id is None else r.study_id, json.dumps(r.details, ensure_ascii=False)] for r in rows]
    return csv_text(pd.DataFrame(table, columns=list(COLUMNS), dtype=object))
