"""The ``medhelm`` command: help everywhere, JSON where it prints, one clear stderr line on failure.

A few tests run the real entry point in a subprocess; the rest call :func:`medhelm_core.cli.main` in
process, which is the same code path after interpreter start-up, at a fraction of the cost.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from support.helpers import run_cli

COMMANDS = [[], ["init"], ["import"], ["export"], ["studies"], ["demo"], ["users"], ["users", "add"],
            ["users", "list"], ["users", "disable"], ["users", "set-password"], ["assign"], ["agreement"], ["icc"],
            ["study"], ["study", "show"], ["study", "set"], ["plan"], ["gold"], ["gold", "import"], ["gold", "list"],
            ["gold", "clear"], ["quality"]]


def medhelm(url, *args, stdin=None):
    """The installed entry point, in a subprocess."""
    env = {**os.environ, "MEDHELM_DATABASE_URL": url}
    return subprocess.run([sys.executable, "-m", "medhelm_core", *args], input=stdin, capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.fixture
def cli(capsys):
    """``main()`` in process: returns what a subprocess would (exit code, stdout, stderr)."""
    return functools.partial(run_cli, capsys)


def test_the_entry_point_prints_help(tmp_path):
    result = medhelm(f"sqlite:///{tmp_path / 'x.db'}", "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "root")
def test_every_command_has_help(command, tmp_path, cli):
    result = cli(f"sqlite:///{tmp_path / 'x.db'}", *command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout


def test_init_import_export_round_trip(database_url, tmp_path, medhelm_ratings_csv):
    init = medhelm(database_url, "init", "--json")
    assert init.returncode == 0, init.stderr
    assert json.loads(init.stdout)["before"] is None
    first = json.loads(medhelm(database_url, "import", "mh", str(medhelm_ratings_csv), "--json").stdout)
    second = json.loads(medhelm(database_url, "import", "mh", str(medhelm_ratings_csv), "--json").stdout)
    assert (first["items_created"], first["ratings_written"]) == (74, 132)
    assert (second["items_created"], second["ratings_written"], second["ratings_unchanged"]) == (0, 0, 132)
    studies = json.loads(medhelm(database_url, "studies", "--json").stdout)
    assert studies[0]["items"] == 74 and studies[0]["ratings"] == 396 and studies[0]["verdicts"] == 74
    out = tmp_path / "export"
    exported = medhelm(database_url, "export", "mh", "--out", str(out), "--json")
    assert exported.returncode == 0, exported.stderr
    ratings = pd.read_csv(out / "ratings.csv")
    assert len(ratings) == 396 and set(ratings.criterion) == {"accuracy", "completeness", "clarity"}
    assert len(pd.read_csv(out / "verdicts.csv")) == 74


def test_users_add_list_disable(tmp_path, cli):
    url = f"sqlite:///{tmp_path / 'u.db'}"
    cli(url, "init")
    added = cli(url, "users", "add", "dr.lee", "--role", "clinician", "--password-stdin", "--json",
                    stdin="a long password\n")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout) == {"username": "dr.lee", "role": "clinician", "can_sign_in": True}
    assert cli(url, "users", "disable", "dr.lee").returncode == 0
    listed = json.loads(cli(url, "users", "list", "--json").stdout)
    assert listed == [{"username": "dr.lee", "display_name": "dr.lee", "role": "clinician", "active": False,
                       "has_password": True}]
    assert "argon2" not in cli(url, "users", "list").stdout


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["users", "add", "x1", "--role", "wizard"], None, "unknown role 'wizard'"),
        (["users", "add", "x2", "--role", "clinician", "--password-stdin"], "short\n", "at least 8 characters"),
        (["users", "disable", "nobody"], None, "no user named 'nobody'"),
        (["import", "s", "/no/such/file.jsonl"], None, "/no/such/file.jsonl: no such file"),
        (["export", "nostudy", "--out", "/tmp/x"], None, "no study named 'nostudy'"),
        (["import", "s", "f.jsonl", "--map", "oops"], None, "--map expects THEIRS=OURS"),
    ],
)
def test_failures_exit_non_zero_with_one_clear_line(tmp_path, args, stdin, message, cli):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    cli(url, "init")
    result = cli(url, *args, stdin=stdin)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_commands_on_an_uninitialised_database_say_to_run_init(tmp_path):
    result = medhelm(f"sqlite:///{tmp_path / 'new.db'}", "studies")
    assert result.returncode == 1 and "run `medhelm init`" in result.stderr


def test_format_list_in_the_cli_matches_the_importers():
    from medhelm_core.cli.data import FORMATS as cli_formats
    from medhelm_core.importers import FORMATS

    assert cli_formats == FORMATS


@pytest.mark.parametrize("args", [["import"], ["users", "add", "x", "--role"], ["studies", "--no-such-flag"]])
def test_usage_errors_say_what_is_wrong_without_a_traceback(tmp_path, args, cli):
    result = cli(f"sqlite:///{tmp_path / 'u.db'}", *args)
    assert result.returncode == 2
    assert "Error:" in result.stderr and "Traceback" not in result.stderr
