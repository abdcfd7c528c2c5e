"""``medhelm jury run --batch`` from the command line: the dry run prices the batch API, and a process killed
between submitting its batches and their results resumes with the same command without submitting anything twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from sqlmodel import Session, select
from support.fake_openai_server import FakeOpenAI
from support.jury_support import LOCAL_A, PRICED, make_study, verdicts

from medhelm_core.cli import main
from medhelm_core.db.models import JuryBatch

UNLISTED_BATCH = "openai/gpt-4-turbo"  # a live price in litellm's map, no batch price: priced at 50%


def medhelm(engine, capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["--database-url", str(engine.url.render_as_string(hide_password=False)), *args])
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def test_the_dry_run_shows_the_batch_price(sqlite_engine, capsys):
    make_study(sqlite_engine, ["good"] * 4)
    base = ["jury", "run", "s", "--judge", PRICED, "--judge", UNLISTED_BATCH, "--api-base", "http://127.0.0.1:9/v1",
            "--dry-run"]
    code, live, err = medhelm(sqlite_engine, capsys, *base, "--json")
    assert code == 0, err
    code, batch, err = medhelm(sqlite_engine, capsys, *base, "--batch", "--json")
    assert code == 0, err
    live, batch = json.loads(live), json.loads(batch)
    assert batch["batch"] and not live["batch"] and batch["batch_halved"] == [UNLISTED_BATCH]
    for judge_live, judge_batch in zip(live["judges"], batch["judges"], strict=True):
        assert judge_batch["cost_usd"] == pytest.approx(judge_live["cost_usd"] / 2)  # gpt-4o's listed batch price
    code, text, _ = medhelm(sqlite_engine, capsys, *base, "--batch")
    assert code == 0 and "at batch prices" in text
    assert f"batch price from litellm's price map for {PRICED}" in text
    assert f"batch price of {UNLISTED_BATCH}: 50% of the live price" in text


def test_a_killed_batch_run_resumes_without_submitting_any_call_twice(sqlite_engine, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    make_study(sqlite_engine, ["good"] * 6)
    with FakeOpenAI() as server:
        server.batches.hold = True  # the batches stay in progress until the first process is dead
        args = ["jury", "run", "s", "--judge", LOCAL_A, "--api-base", server.base_url, "--batch",
                "--batch-max-requests", "4", "--batch-poll-seconds", "0.05", "--no-progress"]
        env = {**os.environ, "MEDHELM_DATABASE_URL": str(sqlite_engine.url)}
        proc = subprocess.Popen([sys.executable, "-m", "medhelm_core", *args], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            with Session(sqlite_engine) as session:
                ids = session.exec(select(JuryBatch.batch_id)).all()
            if len(ids) == 2 and all(ids):
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert len(server.batches.created) == 2, proc.stderr.read()
        assert verdicts(sqlite_engine) == []
        code, out, _ = medhelm(sqlite_engine, capsys, "jury", "status", "s")
        assert "6 calls waiting in 2 provider batch(es)" in out  # (validating or in_progress)
        server.batches.hold = False
        monkeypatch.setattr("medhelm_core.jury.store.HEARTBEAT_STALE", timedelta(0))  # no need to wait
        code, out, err = medhelm(sqlite_engine, capsys, *args, "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["status"], summary["done"], summary["failed"], summary["calls_made"]) == ("finished", 6, 0, 0)
    assert len(server.batches.created) == 2 and sorted(server.batches.submitted.values()) == [1] * 6
    assert sorted(v.scores["accuracy"] for v in verdicts(sqlite_engine)) == [4] * 6
