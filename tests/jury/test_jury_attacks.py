"""Attacks on the jury (issue 22), each written as the attack: a key in a variable with an innocent name
echoed back by the judge's server, the same configuration started twice at once, answers piling up unstored
behind a slow writer (what a ``kill -9`` would then pay for twice)."""

from __future__ import annotations

import sqlite3
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import MetaData, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from support.fake_openai_server import FakeOpenAI, default_scores
from support.helpers import run_cli, study_named
from support.jury_support import LOCAL_A, LOCAL_B, fast_config, make_study, verdicts

from medhelm_core.db.models import JuryRun
from medhelm_core.errors import RunBusyError, ValidationError
from medhelm_core.jury import run_jury
from medhelm_core.jury import runner as jury_runner

SECRET = "JudgeCred-7f3a9c1e5b2d4a8f"  # no KEY, TOKEN, SECRET or PASSWORD in the variable's name


def url_of(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def every_text_in_the_database(engine: Engine) -> str:
    meta = MetaData()
    meta.reflect(engine)
    with engine.connect() as conn:
        return repr([conn.execute(select(t)).all() for t in meta.tables.values()])


def backup_as_text(backup: Path) -> str:
    """The backup's content as SQL text: an SQLite file's dump, or a pg_dump archive through pg_restore."""
    if backup.read_bytes()[:6] == b"SQLite":
        with sqlite3.connect(backup) as conn:
            return "\n".join(conn.iterdump())
    return subprocess.run(["pg_restore", "--file=-", str(backup)], capture_output=True, text=True, check=True,
                          timeout=120).stdout


def exported_text(folder: Path) -> str:
    parts = []
    for path in sorted(folder.iterdir()):
        if path.suffix == ".parquet":
            parts.append(repr(pd.read_parquet(path).to_dict("records")))
        else:
            parts.append(path.read_text(encoding="utf-8"))
    return "\n".join(parts)


def test_a_key_in_a_variable_named_anything_never_reaches_the_database_exports_backup_or_audit(
        engine, capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("JUDGE_CRED", SECRET)
    with FakeOpenAI() as server:
        study = make_study(engine, ["echo_auth", "echo_auth_error", "echo_auth", "good"])
        summary = run_jury(engine, study_named(engine, study),
                           fast_config(server.base_url, (LOCAL_A, LOCAL_B), api_key_env="JUDGE_CRED"))
    assert {c["authorization"] for c in server.calls} == {f"Bearer {SECRET}"}  # the server had it and echoed it
    assert (summary.done, summary.failed) == (8, 2)
    echoed = [v for v in verdicts(engine) if "Your header was" in v.raw_response]
    assert len(echoed) == 4 and all("Bearer ***" in v.raw_response for v in echoed)  # kept as evidence, redacted
    assert SECRET not in every_text_in_the_database(engine)

    url = url_of(engine)
    found = {}
    for fmt in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"export-{fmt}"
        result = run_cli(capsys, url, "export", study, "--out", str(out), "--format", fmt)
        assert result.returncode == 0, result.stderr
        found[f"export {fmt}"] = exported_text(out) + result.stdout
    backup = tmp_path / "backup.bin"
    result = run_cli(capsys, url, "backup", str(backup))
    assert result.returncode == 0, result.stderr
    found["backup"] = backup_as_text(backup)
    assert "Your header was" in found["backup"]  # the scan reads the backup's rows, not compressed bytes
    audit = tmp_path / "audit.csv"
    result = run_cli(capsys, url, "audit", "export", "--out", str(audit))
    assert result.returncode == 0, result.stderr
    found["audit"] = audit.read_text(encoding="utf-8")
    assert "jury.run" in found["audit"]
    assert [where for where, text in found.items() if SECRET in text] == []


def test_the_error_a_run_ends_with_is_redacted_before_it_is_stored(engine, monkeypatch):
    """An exception the runner does not expect (one quoting the key) fails the run; its stored error is redacted."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("JUDGE_CRED", SECRET)

    async def leaky(*args, **kwargs):
        raise RuntimeError(f"provider said: bad credential Bearer {SECRET}")

    monkeypatch.setattr(jury_runner, "judge_item", leaky)
    with FakeOpenAI() as server:
        study = make_study(engine, ["good"])
        with pytest.raises(RuntimeError):
            run_jury(engine, study_named(engine, study), fast_config(server.base_url, api_key_env="JUDGE_CRED"))
    dump = every_text_in_the_database(engine)
    assert "provider said: bad credential Bearer ***" in dump and SECRET not in dump


def test_the_same_configuration_started_twice_at_once_runs_and_pays_once(engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-any-value-will-do")
    n_items, judges = 12, (LOCAL_A, LOCAL_B)
    with FakeOpenAI(latency=0.2) as server:
        study = make_study(engine, ["good"] * n_items)
        config = fast_config(server.base_url, judges, concurrency=4)
        rows = [study_named(engine, study) for _ in range(2)]
        barrier = threading.Barrier(2)
        outcomes: list[object] = []

        def start(row) -> None:
            barrier.wait()
            try:
                outcomes.append(run_jury(engine, row, config))
            except RunBusyError as exc:
                outcomes.append(exc)

        threads = [threading.Thread(target=start, args=(row,)) for row in rows]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        requests = dict(server.attempts)
    with engine.connect() as conn:
        runs = conn.execute(select(JuryRun.id, JuryRun.status)).all()
    assert len(runs) == 1 and runs[0].status == "finished"
    assert len(requests) == n_items * len(judges) and set(requests.values()) == {1}  # each call made once
    summaries = [o for o in outcomes if not isinstance(o, RunBusyError)]
    refused = [o for o in outcomes if isinstance(o, RunBusyError)]
    assert len(outcomes) == 2 and sum(s.calls_made for s in summaries) == n_items * len(judges)
    assert all("is running right now" in str(e) for e in refused)
    assert len(verdicts(engine)) == n_items * len(judges)


def run_row(study_id: int, status: str) -> dict:
    """A jury_run row written straight to the table, as if a run of configuration ``h...`` had been stored."""
    return {"study_id": study_id, "name": "jury", "source": "litellm", "config": {}, "config_hash": "h" * 64,
            "status": status, "calls_done": 0, "calls_failed": 0, "prompt_tokens": 0,
            "completion_tokens": 0, "cost_usd": 0.0, "started_at": datetime.now(UTC)}


def test_the_database_refuses_a_second_active_run_of_one_configuration(engine):
    make_study(engine, ["good"])
    with engine.begin() as conn:
        study_id = conn.exec_driver_sql("SELECT id FROM study").scalar_one()
        row = run_row(study_id, "finished")
        conn.execute(insert(JuryRun.__table__), [row, row, {**row, "status": "running"}])  # past runs: fine
        conn.execute(insert(JuryRun.__table__), {**row, "config_hash": "g" * 64, "status": "running"})
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(insert(JuryRun.__table__), {**row, "status": "stopping"})


def test_answers_not_yet_stored_never_exceed_twice_the_concurrency_per_judge(sqlite_engine, monkeypatch):
    """What a ``kill -9`` pays twice is what was asked but not stored: with a slow database, at most the
    judge's concurrency twice over (README, "The LLM jury"), not every answer waiting for the writer."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-any-value-will-do")
    stored, worst, lock = [0], [0], threading.Lock()
    record = jury_runner.record_verdicts

    def slow_record(engine, run_id, outcomes):
        time.sleep(0.03)  # a busy database
        written = record(engine, run_id, outcomes)
        with lock:
            stored[0] += len(outcomes)
        return written

    monkeypatch.setattr(jury_runner, "record_verdicts", slow_record)
    holder: dict[str, FakeOpenAI] = {}

    def judge(model: str, prompt: str) -> dict[str, int]:
        with lock:  # this request has started; so have len(calls) in all
            worst[0] = max(worst[0], len(holder["server"].calls) - stored[0])
        return default_scores(model)

    with FakeOpenAI(judge=judge) as server:
        holder["server"] = server
        study = make_study(sqlite_engine, ["good"] * 40)
        summary = run_jury(sqlite_engine, study_named(sqlite_engine, study),
                           fast_config(server.base_url, concurrency=3))
    assert summary.done == 40 and len(server.calls) == 40
    assert worst[0] <= 6, f"{worst[0]} answers asked for and not stored at once (concurrency 3)"


def test_a_run_claimed_elsewhere_is_refused_before_any_call(engine, monkeypatch):
    """A second start while a worker holds the run (its heartbeat fresh) calls nobody."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-any-value-will-do")
    with FakeOpenAI(latency=0.3) as server:
        study = make_study(engine, ["good"] * 6)
        config = fast_config(server.base_url, concurrency=1)
        first = threading.Thread(target=run_jury, args=(engine, study_named(engine, study), config))
        first.start()
        deadline = time.monotonic() + 20
        while not server.calls and time.monotonic() < deadline:
            time.sleep(0.02)
        with pytest.raises(RunBusyError, match="is running right now"):
            run_jury(engine, study_named(engine, study), config)
        first.join(30)
    assert len(server.calls) == 6 and set(dict(server.attempts).values()) == {1}


def test_the_upgrade_keeps_the_newest_of_two_active_runs_of_one_configuration(database_url):
    """A database from before 0006 may hold the race's twin runs, both running: the newest stays running."""
    from alembic import command

    from medhelm_core.db.engine import make_engine
    from medhelm_core.db.migrate import alembic_config, upgrade_database

    engine = make_engine(database_url)
    upgrade_database(engine)
    make_study(engine, ["good"])  # through today's models, then back to 0005 (the study row stays)
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
    with engine.begin() as conn:
        study_id = conn.exec_driver_sql("SELECT id FROM study").scalar_one()
        row = run_row(study_id, "running")
        conn.execute(insert(JuryRun.__table__), [row, row, {**row, "config_hash": "g" * 64}])
    upgrade_database(engine)
    with engine.connect() as conn:
        statuses = conn.execute(select(JuryRun.id, JuryRun.config_hash, JuryRun.status).order_by(JuryRun.id)).all()
    assert [s.status for s in statuses] == ["stopped", "running", "running"]
    with engine.begin() as conn:  # and back: the index goes, the runs stay
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
    with engine.begin() as conn:
        conn.execute(insert(JuryRun.__table__), row)
    engine.dispose()


def test_a_configuration_carrying_the_key_is_refused_before_it_is_stored(engine, monkeypatch):
    monkeypatch.setenv("JUDGE_CRED", SECRET)
    with FakeOpenAI() as server:
        study = make_study(engine, ["good"])
        config = fast_config(f"{server.base_url}?route={SECRET}", api_key_env="JUDGE_CRED")
        with pytest.raises(ValidationError, match="holds the value of a key \\(JUDGE_CRED"):
            run_jury(engine, study_named(engine, study), config)
    assert not server.calls and SECRET not in every_text_in_the_database(engine)
