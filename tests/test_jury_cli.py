"""``medhelm jury``: dry run without litellm, JSON summaries, status, clear errors, and resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from fake_openai_server import FakeOpenAI
from jury_support import LOCAL_A, LOCAL_B, PRICED, make_study, verdicts

from medhelm_core.cli import main
from medhelm_core.db import transaction
from medhelm_core.importers import import_paths
from medhelm_core.studies import get_or_create_study

FAST_RETRIES = "retry_base_seconds = 0.01\nretry_max_seconds = 0.05\ntimeout = 5\n"


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def jury_toml(tmp_path):
    path = tmp_path / "jury.toml"
    path.write_text(FAST_RETRIES)
    return path


def medhelm(engine, capsys, *args: str) -> tuple[int, str, str]:
    """Run the CLI in this process (litellm is imported once for the whole test session)."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--database-url", str(engine.url.render_as_string(hide_password=False)), *args])
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


@pytest.mark.parametrize("command", [["jury"], ["jury", "run"], ["jury", "resume"], ["jury", "status"]])
def test_every_jury_command_has_help(sqlite_engine, capsys, command):
    code, out, _ = medhelm(sqlite_engine, capsys, *command, "--help")
    assert code == 0 and "Usage" in out


def test_a_dry_run_estimates_without_calling_or_importing_litellm(sqlite_engine, server):
    make_study(sqlite_engine, ["good"] * 4)
    probe = ("import atexit, sys; atexit.register(lambda: print('litellm imported' if 'litellm' in sys.modules "
             "else 'litellm not imported', file=sys.stderr)); from medhelm_core.cli import main; main(sys.argv[1:])")
    env = {**os.environ, "MEDHELM_DATABASE_URL": str(sqlite_engine.url)}
    result = subprocess.run([sys.executable, "-c", probe, "jury", "run", "s", "--judge", PRICED, "--judge", LOCAL_B,
                             "--api-base", server.base_url, "--dry-run", "--json"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    estimate = json.loads(result.stdout)
    assert estimate["dry_run"] and (estimate["calls"], estimate["planned"]) == (8, 8)
    assert estimate["cost_usd"] > 0 and estimate["unpriced"] == [LOCAL_B]
    assert "litellm not imported" in result.stderr and not server.calls
    assert verdicts(sqlite_engine) == []


def test_run_prints_a_json_summary_and_a_second_run_makes_no_calls(engine, server, capsys, jury_toml, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    make_study(engine, ["good", "prose", "garbage"])
    args = ["jury", "run", "s", "--judge", LOCAL_A, "--judge", LOCAL_B, "--api-base", server.base_url,
            "--config", str(jury_toml), "--concurrency", "2", "--json"]
    code, out, err = medhelm(engine, capsys, *args)
    assert code == 0, err
    first = json.loads(out)
    assert (first["status"], first["planned"], first["done"], first["failed"]) == ("finished", 6, 6, 2)
    assert "6/6 verdicts" in err  # the progress display, on stderr
    calls = len(server.calls)
    code, out, _ = medhelm(engine, capsys, *args, "--no-progress")
    second = json.loads(out)
    assert code == 0 and second["run_id"] == first["run_id"] and second["calls_made"] == 0
    assert len(server.calls) == calls
    code, out, _ = medhelm(engine, capsys, "jury", "status", "s", "--json")
    (row,) = json.loads(out)
    assert (row["status"], row["done"], row["failed"], row["planned"]) == ("finished", 6, 2, 6)
    assert row["prompt_tokens"] > 0 and row["unpriced"] == [LOCAL_A, LOCAL_B]


def test_status_labels_recorded_jury_scores(sqlite_engine, capsys, medhelm_ratings_csv):
    with transaction(sqlite_engine) as session:
        study, _ = get_or_create_study(session, "mh")
        import_paths(session, study, [medhelm_ratings_csv], "medhelm-ratings")
    code, out, _ = medhelm(sqlite_engine, capsys, "jury", "status", "mh")
    assert code == 0 and "[recorded scores, not judges called here]" in out and "74/74 verdicts" in out


def test_a_missing_key_is_one_clear_line(sqlite_engine, server, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make_study(sqlite_engine, ["good"])
    code, out, err = medhelm(sqlite_engine, capsys, "jury", "run", "s", "--judge", LOCAL_A, "--api-base",
                             server.base_url, "--no-progress")
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [
        f"error: judge {LOCAL_A} needs an API key: set OPENAI_API_KEY in the environment (or in Streamlit "
        "secrets); a local OpenAI-compatible server accepts any value"]
    assert not server.calls


def test_ctrl_c_ends_with_one_line_saying_how_to_resume(sqlite_engine, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("medhelm_core.jury.runner.run_jury", interrupted)
    make_study(sqlite_engine, ["good"])
    code, _, err = medhelm(sqlite_engine, capsys, "jury", "run", "s", "--judge", LOCAL_A, "--no-progress")
    assert code == 1 and err.strip().splitlines() == [
        "error: interrupted; the verdicts written are kept: run the same command to resume"]


@pytest.mark.parametrize(("args", "message"), [
    (["jury", "run", "s"], "give at least one --judge MODEL"),
    (["jury", "run", "nope", "--judge", LOCAL_A], "no study named 'nope'"),
    (["jury", "run", "s", "--judge", LOCAL_A, "--api-base", "http://u:p@127.0.0.1/v1"], "must not contain"),
    (["jury", "resume", "s", "99"], "has no jury run 99"),
])
def test_bad_input_is_one_clear_line(sqlite_engine, capsys, args, message):
    make_study(sqlite_engine, ["good"])
    code, _, err = medhelm(sqlite_engine, capsys, *args)
    assert code == 1 and len(err.strip().splitlines()) == 1 and message in err


def test_a_killed_run_resumes_and_completes_without_duplicates(sqlite_engine, capsys, jury_toml, monkeypatch):
    """SIGKILL mid-run (no chance to clean up) loses at most the calls in flight; the rerun finishes the job."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with FakeOpenAI(latency=0.1) as server:
        make_study(sqlite_engine, ["good"] * 16)
        args = ["jury", "run", "s", "--judge", LOCAL_A, "--api-base", server.base_url, "--config", str(jury_toml),
                "--concurrency", "2", "--no-progress"]
        env = {**os.environ, "MEDHELM_DATABASE_URL": str(sqlite_engine.url)}
        proc = subprocess.Popen([sys.executable, "-m", "medhelm_core", *args], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while len(verdicts(sqlite_engine)) < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        before = len(verdicts(sqlite_engine))
        assert 4 <= before < 16, proc.stderr.read()
        code, out, _ = medhelm(sqlite_engine, capsys, "jury", "status", "s")
        assert "running" in out or "interrupted" in out  # its heartbeat stops; it reads interrupted soon after
        calls_before = len(server.calls)
        monkeypatch.setattr("medhelm_core.jury.store.HEARTBEAT_STALE", timedelta(0))  # no need to wait
        code, out, err = medhelm(sqlite_engine, capsys, *args, "--json")
        assert code == 0, err
        summary = json.loads(out)
        assert (summary["status"], summary["done"]) == ("finished", 16)
        assert len(server.calls) - calls_before == 16 - before
        rows = verdicts(sqlite_engine)
        assert len(rows) == 16 and len({(v.item_id, v.judge) for v in rows}) == 16
