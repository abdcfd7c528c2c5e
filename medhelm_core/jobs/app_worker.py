"""The web app's own worker: one thread per app process, started at the server's start-up, when the setting says
so (:func:`medhelm_core.settings.app_worker_enabled`: on for the embedded SQLite default, off for PostgreSQL).

This keeps ``medhelm demo`` (and any one-machine SQLite deployment) one command. A job it is working when the web
process stops is not lost: on a clean stop (SIGTERM, Ctrl-C) the worker stops after its calls in flight and gives
the job back to the queue; after a crash the job's lease runs out. Either way the next start of the app (or any
worker) resumes it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from medhelm_core.db.engine import shared_engine
from medhelm_core.jobs.worker import WorkerOptions, run_worker
from medhelm_core.settings import app_worker_enabled, database_url

__all__ = ["app_worker_lifespan", "start_app_worker", "stop_app_worker"]

#: how long the server's shutdown waits for the worker to give its job back
EXIT_WAIT_SECONDS = 15.0
_started: threading.Thread | None = None
_shutdown = threading.Event()
_lock = threading.Lock()


def start_app_worker(url: str | None = None) -> bool:
    """Start this process's worker thread unless it runs already or the setting says no; True if one runs."""
    global _started
    resolved = database_url(url)
    with _lock:
        if _started is not None and _started.is_alive():
            return True
        if not app_worker_enabled(resolved):
            return False
        _shutdown.clear()
        _started = threading.Thread(target=run_worker, args=(shared_engine(resolved), WorkerOptions(poll_seconds=1.0)),
                                    kwargs={"shutdown": _shutdown}, name="medhelm-app-worker", daemon=True)
        _started.start()
        return True


def stop_app_worker(timeout: float = EXIT_WAIT_SECONDS) -> None:
    """Let the job in hand stop after its calls in flight and go back to the queue; wait up to ``timeout``."""
    _shutdown.set()
    if _started is not None:
        _started.join(timeout)


@asynccontextmanager
async def app_worker_lifespan(_app: Any) -> AsyncIterator[None]:
    """The web server's lifespan (``st.App(..., lifespan=...)`` in ``serve.py``): the worker starts with the server
    and, on SIGTERM or Ctrl-C, gives its job back before the server exits (the server's exit does not run atexit
    hooks: uvicorn re-raises the signal)."""
    start_app_worker()
    try:
        yield
    finally:
        await asyncio.to_thread(stop_app_worker)
