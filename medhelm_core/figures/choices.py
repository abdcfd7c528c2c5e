"""What the Agreement page offers to choose from: the study's jury runs (and which one is shown unless another
is chosen) and the jury versions a comparison can take as its baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from medhelm_core.db.models import RunSource, Study
from medhelm_core.frames import comparable_runs, default_jury_run, jury_runs, usable_run_ids
from medhelm_core.jury.run_versions import run_versions

__all__ = ["RunChoices", "jury_run_choices", "version_names"]


@dataclass(frozen=True)
class RunChoices:
    """The study's jury runs, newest first, as label -> run id, and the position of the default run."""

    labels: dict[str, int]
    default: int = 0


def jury_run_choices(session: Session, study: Study) -> RunChoices:
    """The jury runs of ``study`` worth a look, newest first, labelled ``12: gpt-4o jury`` (a recorded run marked
    so); the default is the newest run with a surviving verdict, else the newest run. Runs that failed without a
    surviving verdict are left out (they have no figures), except the default."""
    default = default_jury_run(session, study, or_newest=True)
    usable = usable_run_ids(session, study) | ({default.id} if default is not None else set())
    runs = [r for r in jury_runs(session, study) if r.id in usable]
    labels = {f"{r.id}: {r.name}" + (" (recorded)" if r.source == RunSource.recorded else ""): r.id for r in runs}
    ids = list(labels.values())
    return RunChoices(labels, ids.index(default.id) if default is not None and default.id in ids else 0)


def version_names(session: Session, study: Study) -> dict[int, str]:
    """Each jury run of ``study`` that can be compared (it has verdicts), oldest first: its id -> its short label
    (``run 3: gpt-4o + claude-3-7-sonnet (prompt medhelm v2, rubric medhelm v1)``), for choosing the baseline."""
    return {r.id: run_versions(r, session).short_label for r in comparable_runs(session, study)}
