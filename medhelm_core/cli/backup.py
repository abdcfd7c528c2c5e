"""``medhelm backup`` and ``medhelm restore``: the whole database to a file and back."""

from __future__ import annotations

from pathlib import Path

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for


@app.command("backup")
def backup_cmd(
    ctx: typer.Context,
    out: Path = typer.Argument(..., help="Backup file to write (must not exist yet)."),
    as_json: bool = JsonOption,
) -> None:
    """Back up the database while the app runs (SQLite online backup; pg_dump for PostgreSQL)."""
    from medhelm_core.db.backup import backup_database

    info = backup_database(engine_for(ctx, check_schema=False), out)
    emit(info, as_json, f"backed up the {info.backend} database at schema {info.revision} to {out} "
                        f"({info.bytes} bytes)")


@app.command("restore")
def restore_cmd(
    ctx: typer.Context,
    source: Path = typer.Argument(..., help="A file written by `medhelm backup`."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Replace a database that already holds data."),
    as_json: bool = JsonOption,
) -> None:
    """Replace the database with a backup (checks its schema revision; asks for --yes over existing data)."""
    from medhelm_core.db.backup import restore_database
    from medhelm_core.db.migrate import head_revision

    info = restore_database(engine_for(ctx, check_schema=False), source, overwrite=yes)
    note = "" if info.revision == head_revision() else f"; run `medhelm init` to upgrade it to {head_revision()}"
    emit(info, as_json, f"restored {source} (schema {info.revision}){note}")
