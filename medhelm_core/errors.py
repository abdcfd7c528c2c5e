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


class AccessDenied(MedhelmError):
    """The signed-in account may not see or change this."""


class BackupError(MedhelmError):
    """A backup or restore that cannot be done as asked."""


class AgreementInputError(MedhelmError, ValueError):
    """Ratings that the agreement engine cannot use, with the column or value at fault."""


class PlanningError(MedhelmError, ValueError):
    """A study plan that cannot be computed or cannot be met, with what to change."""


class RaterQualityInputError(ValidationError, ValueError):
    """A rating history or threshold that the rater-quality checks cannot use, with what is wrong.

    A :class:`ValidationError`: a study's speed threshold is refused by the same check when it is set
    (:func:`medhelm_core.studies.update_settings`) as when the flags are computed."""


class NotEnoughRatingsError(MedhelmError):
    """Too few clinician ratings for any agreement figure: the page says so instead of drawing empty charts."""


class MissingCredentialsError(MedhelmError):
    """A judge has no usable API key; the message names the environment variable to set."""


class RunBusyError(MedhelmError):
    """The run is being worked on right now by another process or thread."""


class JuryInterrupted(MedhelmError):
    """Ctrl-C during a run: what was written is kept, and the same command resumes."""
