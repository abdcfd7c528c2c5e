"""Errors a user can cause, with messages they can act on.

The CLI and the pages turn a :class:`MedhelmError` into one line; anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

from pathlib import Path


class MedhelmError(Exception):
    """Base class for every error caused by input, configuration or state a user controls."""


class InputFileError(MedhelmError):
    """A file that cannot be imported, with where the problem is (file, line, field)."""

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.reason = message
        where = self.path
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {message}")


class NotFoundError(MedhelmError):
    """A study, user or other named thing that does not exist."""


class ValidationError(MedhelmError):
    """A value that breaks a rule of the domain (a score off the rubric's scale, an unknown role)."""


class DatabaseError(MedhelmError):
    """The database cannot be reached or is not at the schema this version expects."""
