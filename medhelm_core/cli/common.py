"""The Typer app and what every command shares: the database, JSON output, errors."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import typer
from sqlalchemy.engine import Engine

from medhelm_core.db.engine import make_engine
from medhelm_core.db.migrate import require_current_schema
from medhelm_core.settings import database_url

app = typer.Typer(
    name="medhelm",
    help="MedHELM Calibrate: calibrate an LLM jury against clinicians.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

JsonOption = typer.Option(False, "--json", help="Print the result as JSON on stdout.")


@app.callback()
def _root(
    ctx: typer.Context,
    database_url_opt: str | None = typer.Option(
        None,
        "--database-url",
        envvar="MEDHELM_DATABASE_URL",
        help="SQLAlchemy database URL (default: an SQLite file in your user data folder).",
        show_envvar=True,
    ),
) -> None:
    ctx.obj = {"database_url": database_url(database_url_opt)}


def engine_for(ctx: typer.Context, *, check_schema: bool = True) -> Engine:
    """The engine for this invocation's database, checked to be at the latest schema."""
    engine = make_engine(ctx.obj["database_url"])
    if check_schema:
        require_current_schema(engine)
    return engine


def emit(result: Any, as_json: bool, text: str) -> None:
    """Print ``result`` as JSON when asked, else the human-readable ``text``."""
    if as_json:
        if dataclasses.is_dataclass(result):
            result = dataclasses.asdict(result)
        typer.echo(json.dumps(result, indent=2, default=str))
    else:
        typer.echo(text)
