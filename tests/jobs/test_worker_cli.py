"""`medhelm worker` and `medhelm jobs`: help, a job queued from the command line worked by `worker --once` with one
log line, the queue listed, and bad input refused in one line."""

from __future__ import annotations

import json

import pytest
from support.helpers import run_cli
from support.jury_support import make_study


@pytest.mark.parametrize("command", [["worker"], ["jobs"], ["jobs", "list"], ["jobs", "cancel"], ["jobs", "metrics"],
                                     ["jobs", "report"], ["jobs", "output"]])
def test_every_job_command_has_help(sqlite_engine, capsys, command):
    result = run_cli(capsys, str(sqlite_engine.url), *command, "--help")
    assert result.returncode == 0 and "Usage" in result.stdout


def test_a_queued_metrics_job_is_worked_by_worker_once_with_one_log_line(sqlite_engine, capsys):
    url = str(sqlite_engine.url)
    make_study(sqlite_engine, ["good"] * 3, name="s")
    queued = run_cli(capsys, url, "jobs", "metrics", "s", "--rouge-l", "--json")
    assert queued.returncode == 0, queued.stderr
    job_id = json.loads(queued.stdout)["id"]
    worked = run_cli(capsys, url, "worker", "--once", "--poll", "0.1")
    assert worked.returncode == 0, worked.stderr
    lines = [line for line in worked.stderr.splitlines() if f"job {job_id} " in line]
    assert len(lines) == 1 and "metrics study 1 attempt 1: finished in" in lines[0]
    assert "rougeL 3 scored" in lines[0]
    listed = json.loads(run_cli(capsys, url, "jobs", "list", "--json").stdout)
    assert [(j["id"], j["kind"], j["status"], j["created_by"]) for j in listed] == [(job_id, "metrics", "finished",
                                                                                     "cli")]
    assert run_cli(capsys, url, "worker", "--once", "--poll", "0.1").returncode == 0  # an empty queue: exits
    nothing = run_cli(capsys, url, "jobs", "output", str(job_id), "--out", "x.zip")
    assert nothing.returncode == 1 and "has no file" in nothing.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["worker", "--kind", "nope"], "--kind 'nope' unknown"),
    (["worker", "--lease", "0"], "--lease at least 1 second"),
    (["jobs", "cancel", "99"], "no job with id 99"),
    (["jobs", "metrics", "nope"], "no study named 'nope'"),
])
def test_bad_input_is_one_line(sqlite_engine, capsys, args, message):
    result = run_cli(capsys, str(sqlite_engine.url), *args)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
