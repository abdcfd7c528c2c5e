"""The ``medhelm`` command line: a public interface whose command names stay fixed once released.

Every command has ``--help``, exits 0 on success, and on failure exits non-zero with one clear line on
stderr (``error: ...``); commands that print results accept ``--json``.
"""

from __future__ import annotations

import sys

import click
import typer

from medhelm_core.cli import agreement, assign, data, demo, users
from medhelm_core.cli.common import app
from medhelm_core.errors import MedhelmError

__all__ = ["app", "main"]

# Command modules register themselves on ``app`` when imported.
_ = (agreement, assign, data, demo, users)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI, turning our own errors into one stderr line and an exit code."""
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name="medhelm", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        print("error: aborted", file=sys.stderr)
        sys.exit(130)
    except MedhelmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(0)
