"""What the job tests share: `medhelm worker` subprocesses, reading a job, and waiting for a condition while
watching the processes that should make it true."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from sqlalchemy.engine import Engine
from sqlmodel import Session

from medhelm_core.db.models import Job


def start_worker(engine: Engine, *args: str, lease: float = 2.0) -> subprocess.Popen:
    """``medhelm worker`` on ``engine``'s database with a short poll and lease, stderr kept for its log lines."""
    env = {**os.environ, "MEDHELM_DATABASE_URL": engine.url.render_as_string(hide_password=False),
           "OPENAI_API_KEY": "test"}  # the judges' key is in the worker's environment, as deployed
    return subprocess.Popen([sys.executable, "-m", "medhelm_core", "worker", "--poll", "0.2", "--lease", str(lease),
                             *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop_workers(workers: Sequence[subprocess.Popen]) -> list[str]:
    """SIGTERM every worker still running, wait for it, and return each one's log."""
    for w in workers:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
    logs = []
    for w in workers:
        try:
            w.wait(15)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()
        logs.append(w.stderr.read() if w.stderr else "")
    return logs


def the_job(engine: Engine, job_id: int) -> Job:
    with Session(engine) as s:
        return s.get(Job, job_id)


def wait_until(condition: Callable[[], bool], timeout: float, what: str,
               processes: Sequence[subprocess.Popen] = ()) -> None:
    """Poll ``condition`` until true; fail at ``timeout`` or as soon as one of ``processes`` has died."""
    deadline = time.monotonic() + timeout
    while not condition():
        dead = [p for p in processes if p.poll() is not None]
        assert not dead, f"a process died: {dead[0].stderr.read() if dead[0].stderr else dead[0].returncode}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
