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
from support.fake_openai_server import FakeOpenAI
from support.jury_support import LOCAL_A, LOCAL_B, PRICED, make_study, verdicts

from medhelm_core.cli import main
from medhelm_core.db.engine import transaction
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


def test_a_missing_key_is_one_clear_line_and_a_local_judge_needs_none(sqlite_engine, server, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make_study(sqlite_engine, ["good"])
    code, out, err = medhelm(sqlite_engine, capsys, "jury", "run", "s", "--judge", "openai/gpt-4o-2024-05-13",
                             "--no-progress")  # a hosted judge: no call goes out without its key
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [
        "error: judge openai/gpt-4o-2024-05-13 needs an API key: set OPENAI_API_KEY in the environment (or in "
        "Streamlit secrets)"]
    code, out, err = medhelm(sqlite_engine, capsys, "jury", "run", "s", "--judge", LOCAL_A, "--api-base",
                             server.base_url, "--no-progress")  # a local server: no key needed
    assert code == 0, err
    assert len(server.calls) == 1


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


# --- versions: prompt templates, rubric versions, and the runs that record them ---------------------------

STRICT_TEMPLATE_LINE = "\nBe strict: one clinically important error caps accuracy at 2.\n"


@pytest.mark.parametrize("command", [["jury", "prompt"], ["jury", "prompt", "list"], ["jury", "prompt", "show"],
                                     ["jury", "prompt", "add"], ["jury", "rubric", "list"], ["jury", "rubric", "add"]])
def test_every_version_command_has_help(sqlite_engine, capsys, command):
    code, out, _ = medhelm(sqlite_engine, capsys, *command, "--help")
    assert code == 0 and "Usage" in out


def test_a_prompt_version_is_added_from_a_file_or_stdin_and_listed(sqlite_engine, capsys, tmp_path, monkeypatch):
    from medhelm_core.jury.prompt import DEFAULT_TEMPLATE

    code, shown, _ = medhelm(sqlite_engine, capsys, "jury", "prompt", "show")
    assert code == 0 and shown == DEFAULT_TEMPLATE  # exactly the stored text, nothing added
    edited = tmp_path / "strict.txt"
    edited.write_text(shown + STRICT_TEMPLATE_LINE)
    code, out, err = medhelm(sqlite_engine, capsys, "jury", "prompt", "add", str(edited), "--note", "stricter",
                             "--json")
    assert code == 0, err
    added = json.loads(out)
    assert (added["label"], added["created"], added["note"], added["created_by"]) == ("medhelm v2", True,
                                                                                      "stricter", "cli")
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(edited.read_text()))
    code, out, _ = medhelm(sqlite_engine, capsys, "jury", "prompt", "add")
    assert code == 0 and out.strip() == "unchanged: the text is the latest version's, medhelm v2; no version added"
    code, out, _ = medhelm(sqlite_engine, capsys, "jury", "prompt", "list", "--json")
    assert [(r["label"], r["note"]) for r in json.loads(out)] == [
        ("medhelm v1", "bundled default: MedHELM's jury prompt with the evaluated texts fenced"),
        ("medhelm v2", "stricter")]
    code, out, _ = medhelm(sqlite_engine, capsys, "jury", "prompt", "show", "--version", "1", "--json")
    assert json.loads(out)["text"] == DEFAULT_TEMPLATE


@pytest.mark.parametrize(("args", "message"), [
    (["jury", "prompt", "show", "--version", "5"], "prompt template medhelm has no version 5 (its versions: v1)"),
    (["jury", "prompt", "show", "--name", "nope"], "no prompt template named 'nope'"),
    (["jury", "prompt", "add", "missing.txt"], "no such template file"),
    (["jury", "run", "s", "--judge", LOCAL_A, "--prompt-version", "3"], "has no version 3"),
    (["jury", "run", "s", "--judge", LOCAL_A, "--rubric-version", "2"], "rubric medhelm has no version 2"),
    (["jury", "rubric", "list", "nope"], "no study named 'nope'"),
])
def test_version_mistakes_are_one_clear_line(sqlite_engine, capsys, args, message):
    make_study(sqlite_engine, ["good"])
    code, _, err = medhelm(sqlite_engine, capsys, *args)
    assert code == 1 and len(err.strip().splitlines()) == 1 and message in err, err


def test_a_broken_template_is_refused_with_one_line(sqlite_engine, capsys, tmp_path):
    broken = tmp_path / "broken.txt"
    broken.write_text("Rate $response_block as $grade\n")
    code, _, err = medhelm(sqlite_engine, capsys, "jury", "prompt", "add", str(broken))
    assert code == 1 and err.strip().splitlines() == [
        "error: the prompt template uses unknown placeholder $grade; known: $criteria, $criteria_names, "
        "$output_format, $reference_block, $request_block, $response_block, $response_tag, $task"]


def test_run_records_the_prompt_and_rubric_versions_it_used(engine, server, capsys, jury_toml, tmp_path,
                                                             monkeypatch):
    from medhelm_core.db.models import JuryRun
    from medhelm_core.jury.prompt import DEFAULT_TEMPLATE

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    make_study(engine, ["good", "good"])
    template = tmp_path / "strict.txt"
    template.write_text(DEFAULT_TEMPLATE + STRICT_TEMPLATE_LINE)
    assert medhelm(engine, capsys, "jury", "prompt", "add", str(template))[0] == 0
    rubric_file = tmp_path / "rubric.toml"
    from conftest import REPO
    rubric_file.write_text((REPO / "annotations" / "rubrics" / "medhelm.toml").read_text()
                           .replace('label = "Accuracy"', 'label = "Medical accuracy"'))
    code, out, err = medhelm(engine, capsys, "jury", "rubric", "add", "s", str(rubric_file), "--json")
    assert code == 0 and json.loads(out)["version"] == 2 and json.loads(out)["created"], err
    code, out, _ = medhelm(engine, capsys, "jury", "rubric", "list", "s")
    assert out.splitlines() == ["medhelm v1  (the study rubric: clinicians rate on it)", "medhelm v2"]
    base = ["jury", "run", "s", "--judge", LOCAL_A, "--api-base", server.base_url, "--config", str(jury_toml),
            "--no-progress", "--json"]
    code, out, err = medhelm(engine, capsys, *base, "--prompt-version", "1")
    assert code == 0, err
    first = json.loads(out)
    code, out, err = medhelm(engine, capsys, *base, "--rubric-version", "2")  # the latest prompt: v2
    assert code == 0, err
    second = json.loads(out)
    assert first["versions"]["prompt_version"] == 1 and first["versions"]["rubric_version"] == 1
    assert (second["versions"]["prompt_version"], second["versions"]["rubric_version"]) == (2, 2)
    assert second["run_id"] != first["run_id"] and second["calls_made"] == 2
    assert all("Medical accuracy" in c["messages"][0]["content"] and "Be strict" in c["messages"][0]["content"]
               for c in server.calls[-2:])
    with transaction(engine) as session:
        stored = session.get(JuryRun, second["run_id"]).config
    assert (stored["prompt_name"], stored["prompt_version"], stored["rubric"]["version"]) == ("medhelm", 2, 2)
    code, out, _ = medhelm(engine, capsys, "jury", "status", "s", "--json")
    rows = {r["run_id"]: r for r in json.loads(out)}
    assert rows[second["run_id"]]["versions"] == "rubric medhelm v2; prompt medhelm v2"
    assert rows[first["run_id"]]["judges"] == [LOCAL_A]
    calls = len(server.calls)
    code, out, err = medhelm(engine, capsys, "jury", "resume", "s", str(second["run_id"]), "--no-progress", "--json")
    assert code == 0 and json.loads(out)["run_id"] == second["run_id"] and len(server.calls) == calls, err


def test_a_template_in_the_jury_file_becomes_a_version(sqlite_engine, server, capsys, tmp_path, monkeypatch):
    from medhelm_core.jury.prompt import DEFAULT_TEMPLATE

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    make_study(sqlite_engine, ["good"])
    (tmp_path / "terse.txt").write_text(DEFAULT_TEMPLATE + STRICT_TEMPLATE_LINE)
    toml = tmp_path / "jury.toml"
    toml.write_text(FAST_RETRIES + 'prompt_file = "terse.txt"\n')
    run = ["jury", "run", "s", "--judge", LOCAL_A, "--api-base", server.base_url, "--config", str(toml),
           "--prompt-name", "terse", "--no-progress", "--json"]
    code, out, err = medhelm(sqlite_engine, capsys, *run[:-1], "--dry-run", "--json")
    assert code == 0 and json.loads(out)["versions"]["prompt_version"] is None, err  # a dry run stores nothing
    code, out, err = medhelm(sqlite_engine, capsys, *run)
    assert code == 0, err
    assert (json.loads(out)["versions"]["prompt_name"], json.loads(out)["versions"]["prompt_version"]) == ("terse", 1)
    code, out, _ = medhelm(sqlite_engine, capsys, "jury", "prompt", "list", "--name", "terse", "--json")
    assert [(r["label"], r["note"]) for r in json.loads(out)] == [("terse v1", "from prompt file terse.txt")]
    code, _, err = medhelm(sqlite_engine, capsys, *run, "--prompt-version", "1")
    assert code == 1 and "leave out --prompt-version" in err
