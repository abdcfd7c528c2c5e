"""Run a jury in a background thread of a long-lived process (the Streamlit app).

The page must stay responsive and survive a browser reload, so the run is not tied to a session: it runs
in a daemon thread that writes to the database, and the page reads progress from the run's row. The
registry below only answers "is this run being worked on in this process" and holds an error the thread
ended with; everything else is in the database. Stopping goes through the database as well
(:func:`medhelm_core.jury.store.request_stop`), so it also stops a run started from the CLI.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from medhelm_core.db.models import Study
from medhelm_core.jury.calls import redact, secret_values
from medhelm_core.jury.config import JuryConfig
from medhelm_core.jury.runner import RunSummary, prepare_run, run_jury
from medhelm_core.jury.store import request_stop


@dataclass
class BackgroundRun:
    """A run's thread in this process, its stop switch, and how it ended."""

    run_id: int
    thread: threading.Thread
    stop: threading.Event = field(default_factory=threading.Event)
    summary: RunSummary | None = None
    error: str | None = None


_RUNS: dict[int, BackgroundRun] = {}
_LOCK = threading.Lock()


def start_in_background(
    engine: Engine, study: Study, config: JuryConfig, *, retry_failed: bool = False, actor: Any = None
) -> int:
    """Start (or resume) the jury run for ``config`` in a daemon thread; returns the run's id at once.

    Raises :class:`medhelm_core.errors.RunBusyError` if the run is already being worked on by another
    process; if another process claims it between this check and the thread's start, the thread ends with
    that error (:func:`background_error`) and calls nobody.
    """
    with _LOCK:
        run_id = prepare_run(engine, study, config)
        current = _RUNS.get(run_id)
        if current is not None and current.thread.is_alive():
            return run_id
        entry = BackgroundRun(run_id, threading.Thread(target=lambda: None))

        def work() -> None:
            try:
                entry.summary = run_jury(engine, study, config, retry_failed=retry_failed, stop=entry.stop,
                                         actor=actor)
            except Exception as exc:  # noqa: BLE001 - the page shows it; the run row says failed
                entry.error = redact(str(exc), secret_values(config))  # the page shows it

        entry.thread = threading.Thread(target=work, name=f"jury-run-{run_id}", daemon=True)
        _RUNS[run_id] = entry
        entry.thread.start()
        return run_id


def background_error(run_id: int) -> str | None:
    """The error a finished background thread ended with, if any."""
    entry = _RUNS.get(run_id)
    return entry.error if entry is not None else None


def stop_run(engine: Engine, run_id: int) -> bool:
    """Ask the run to stop after its calls in flight, wherever it runs."""
    entry = _RUNS.get(run_id)
    if entry is not None:
        entry.stop.set()
    return request_stop(engine, run_id) or entry is not None


def wait(run_id: int, timeout: float | None = None) -> bool:
    """Wait for this process's thread on the run to end; True if it has (tests and scripts)."""
    entry = _RUNS.get(run_id)
    if entry is None:
        return True
    entry.thread.join(timeout)
    return not entry.thread.is_alive()
