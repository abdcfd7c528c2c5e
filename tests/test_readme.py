"""The README's Quickstart stays true: CI runs exactly its test command."""

from __future__ import annotations

from conftest import REPO


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    command = next(line for line in ci if line.startswith("python3 -m venv"))
    assert command in (REPO / "README.md").read_text()


def test_streamlit_telemetry_is_off_and_server_is_local():
    config = (REPO / ".streamlit" / "config.toml").read_text()
    assert "gatherUsageStats = false" in config
    assert 'address = "localhost"' in config
    assert 'fileWatcherType = "none"' in config  # a deployed app is not watched (a .venv inside is 8,000 folders)


def test_the_quickstart_installs_bertscore_and_the_tests_install_it_too():
    import tomllib

    readme = (REPO / "README.md").read_text()
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[bertscore]' && .venv/bin/medhelm demo" in readme
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "medhelm-calibrate[bertscore]" in project["optional-dependencies"]["test"]
