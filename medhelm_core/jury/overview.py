"""The Jury page's read-out of a study's runs: the runs table, one run's progress, and how the jury scored a
criterion of one item. Read-only; the run itself is written by :mod:`medhelm_core.jury.runner`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
from sqlmodel import Session

from medhelm_core.db.models import JuryRun, RunSource, Study, utcnow
from medhelm_core.errors import NotFoundError
from medhelm_core.frames import jury_runs
from medhelm_core.jury.run_versions import run_versions
from medhelm_core.jury.store import ACTIVE_STATUSES, effective_status, planned_calls, run_state

__all__ = ["RunProgress", "criterion_note", "run_choices", "run_progress", "runs_table"]

#: how the runs table names a run whose scores were imported rather than asked of judges
RECORDED_SOURCE = "recorded (imported scores, no judges called here)"


def runs_table(session: Session, study: Study) -> pd.DataFrame:
    """The study's jury runs, newest first: versions used, where the verdicts come from, status, verdicts done
    of planned, failures, tokens and cost; empty (no columns) when the study has no run."""
    rows = []
    for r in jury_runs(session, study):
        versions = run_versions(r, session)
        rows.append(
            {"run": r.id, "name": r.name, "judges": versions.judges_label, "rubric": versions.rubric_label,
             "prompt": versions.prompt_label, "source": RECORDED_SOURCE if r.source == RunSource.recorded else r.source,
             "status": effective_status(r), "done": r.calls_done, "planned": planned_calls(session, r),
             "failed": r.calls_failed, "tokens": r.prompt_tokens + r.completion_tokens, "cost $": r.cost_usd})
    return pd.DataFrame(rows)


def run_choices(runs: pd.DataFrame) -> dict[str, int]:
    """A label per run of a :func:`runs_table` (id, name, rubric, prompt and status) -> its id, in its order."""
    return {f"{r.run}: {r.name}; rubric {r.rubric}; prompt {r.prompt} ({r.status})": int(r.run)
            for r in runs.itertuples()}


@dataclass(frozen=True)
class RunProgress:
    """Where one run stands, read fresh: the row, its effective status, its state and the verdicts planned."""

    run: JuryRun
    status: str
    state: dict[str, Any]
    planned: int

    @property
    def active(self) -> bool:
        """True while a worker is running the run or stopping it."""
        return self.status in ACTIVE_STATUSES

    @property
    def may_change(self) -> bool:
        """True while the stored status says a worker has the run, even if its heartbeat is late (the run then
        reads ``interrupted``): under load a live worker can be silent for a while and still finish, so whoever
        shows the run keeps reading it until the stored status ends."""
        return self.run.status in ACTIVE_STATUSES

    @property
    def silent_seconds(self) -> float | None:
        """Seconds since the worker's last heartbeat, while the run may change; None otherwise."""
        beat = self.state.get("heartbeat_at")
        if not self.may_change or beat is None:
            return None
        return max(0.0, (utcnow() - datetime.fromisoformat(beat)).total_seconds())

    @property
    def recorded(self) -> bool:
        """True for imported scores: no judges were called, so there is no progress to show."""
        return self.run.source == RunSource.recorded


def run_progress(session: Session, run_id: int) -> RunProgress:
    """The progress of jury run ``run_id``; :class:`NotFoundError` when there is no such run."""
    run = session.get(JuryRun, run_id)
    if run is None:
        raise NotFoundError(f"no jury run {run_id}")
    return RunProgress(run, effective_status(run), run_state(run), planned_calls(session, run))


def criterion_note(means: pd.DataFrame, item_id: int, criterion: str) -> str:
    """How the jury scored ``criterion`` of one item, from :func:`~medhelm_core.jury.results.criterion_means`:
    ``jury mean 3.50 over 2 judges``, or why there is no score.

    Examples
    --------
    >>> means = pd.DataFrame({"item_id": [7], "criterion": ["accuracy"], "score": [3.5], "n_judges": [2]})
    >>> criterion_note(means, 7, "accuracy"), criterion_note(means, 7, "clarity")
    ('jury mean 3.50 over 2 judges', 'no jury score (no surviving judge)')
    """
    row = means[(means["item_id"] == item_id) & (means["criterion"] == criterion)]
    if not len(row):
        return "no jury score (no surviving judge)"
    return f"jury mean {row['score'].iloc[0]:.2f} over {int(row['n_judges'].iloc[0])} judges"
