"""`medhelm demo` on a port already in use (issue 19, fix 13): one clear error naming the port and --port, a non-zero
exit, and nothing said about starting."""

from __future__ import annotations

import socket

import pytest
from support.helpers import run_cli

from medhelm_core.cli import demo
from medhelm_core.errors import MedhelmError


def test_a_busy_port_is_refused_with_a_clear_error_and_a_non_zero_exit(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli(capsys, f"sqlite:///{tmp_path / 'demo.db'}", "demo", "--port", str(port))
    assert done.returncode == 1
    assert done.stderr == (f"error: port {port} on localhost is in use (another app, or a demo already running): "
                           f"stop it, or start on another port with --port, e.g. --port {port + 1}\n")
    assert "starting" not in done.stdout


def test_an_app_that_stops_with_an_error_makes_the_demo_fail(tmp_path, monkeypatch):
    """The port can be taken between the check and the start: the app then exits non-zero, and so does the demo."""

    class Failed:
        def wait(self, timeout=None):
            return 1

        def poll(self):
            return 1

    monkeypatch.setattr(demo.subprocess, "Popen", lambda *args, **kwargs: Failed())
    with pytest.raises(MedhelmError, match="the app stopped with exit code 1"):
        demo.run_app(f"sqlite:///{tmp_path / 'demo.db'}", 8599)
