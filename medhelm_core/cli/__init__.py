"""The ``medhelm`` command line: a public interface whose command names stay fixed once released.

Every command has ``--help``, exits 0 on success, and on failure exits non-zero with one clear line on
stderr (``error: ...``); commands that print results accept ``--json``.
"""

from __future__ import annotations

import sys

import click
import typer

from medhelm_core.cli import (
    agreement,
    assign,
    audit,
    backup,
    data,
    demo,
    jobs,
    jury,
    metrics,
    models,
    quality,
    report,
    users,
    verdict,
)
from medhelm_core.cli.common import app
from medhelm_core.errors import MedhelmError

__all__ = ["app", "main"]

# Command modules register themselves on ``app`` when imported.
_ = (agreement, assign, audit, backup, data, demo, jobs, jury, metrics, models, quality, report, users, verdict)


def _click_classes(name: str) -> tuple[type[BaseException], ...]:
    """``name`` from click and from the copy of click that typer 0.29+ bundles (its commands raise those)."""
    classes: list[type[BaseException]] = [getattr(click.exceptions, name)]
    try:
        from typer._click import exceptions as bundled  # typer >= 0.29 vendors click
    except ImportError:
        bundled = None
    if bundled is not None and hasattr(bundled, name):
        classes.append(getattr(bundled, name))
    return tuple(classes)


_EXIT = _click_classes("Exit")
_USAGE = _click_classes("ClickException")
_ABORT = _click_classes("Abort")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI, turning our own errors into one stderr line and an exit code."""
    command = typer.main.get_command(app)
    try:
        returned = command.main(args=argv, prog_name="medhelm", standalone_mode=False)
    except _EXIT as exc:
        sys.exit(exc.exit_code)
    except _USAGE as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except _ABORT:
        print("error: aborted", file=sys.stderr)
        sys.exit(130)
    except MedhelmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    # Typer returns an exit code instead of raising in some cases (130 after Ctrl-C in a command).
    sys.exit(returned if isinstance(returned, int) and not isinstance(returned, bool) else 0)
