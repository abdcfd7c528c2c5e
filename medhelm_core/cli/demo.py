"""``medhelm demo``: seed the demo study and accounts, then start the app."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import describe_url
from medhelm_core.errors import MedhelmError

REPO = Path(__file__).resolve().parents[2]


@app.command("demo")
def demo_cmd(
    ctx: typer.Context,
    start: bool = typer.Option(True, "--start/--no-start", help="Start the app after seeding."),
    port: int = typer.Option(8501, "--port", help="Port for the app (bound to localhost)."),
    as_json: bool = JsonOption,
) -> None:
    """Seed the demo study, the MedHELM validation study and demo accounts (idempotent); start the app."""
    from medhelm_core.demo import DEMO_ACCOUNTS, seed_demo

    if start:
        check_port_free(port)
    url = ctx.obj["database_url"]
    report = seed_demo(engine_for(ctx, check_schema=False))
    lines = [f"database: {describe_url(url)}"]
    for name, r in report.studies.items():
        lines.append(
            f"study {name}: {r.items_created} items created, {r.items_unchanged} unchanged"
            + (f", {r.ratings_written} ratings written" if r.ratings_written else "")
        )
    lines.append("demo accounts (for this local demo only):")
    lines += [f"  {user:<12} {role:<11} password: {pw}" for user, role, pw in DEMO_ACCOUNTS]
    emit(
        {"database": describe_url(url), "accounts_created": report.accounts_created,
         "studies": {k: v.__dict__ for k, v in report.studies.items()}},
        as_json,
        "\n".join(lines),
    )
    if start:
        run_app(url, port)


def check_port_free(port: int) -> None:
    """Refuse a port something already listens on (on any of localhost's addresses), before anything starts."""
    for family, kind, proto, _, address in socket.getaddrinfo("localhost", port, type=socket.SOCK_STREAM):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does: TIME_WAIT is free
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise MedhelmError(f"port {port} on localhost is in use (another app, or a demo already "
                                       "running): stop it, or start on another port with --port, e.g. "
                                       f"--port {port + 1}") from None


def run_app(url: str, port: int) -> None:
    """Run ``streamlit run serve.py`` (the app with its session cookie) against ``url`` until interrupted (telemetry
    off, localhost only); an app that stops on its own with an error is an error here too."""
    app_file = REPO / "serve.py"
    if not app_file.is_file():
        raise MedhelmError(f"cannot find the app at {app_file}; run from a clone of the repository")
    env = {**os.environ, "MEDHELM_DATABASE_URL": url}
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(app_file),
        "--server.port", str(port),
        "--server.address", "localhost",
        "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
    ]
    typer.echo(f"starting the app on http://localhost:{port} (Ctrl-C to stop)")
    app_process = subprocess.Popen(cmd, cwd=REPO, env=env)
    # Stopping `medhelm demo` (Ctrl-C or SIGTERM) stops the app too, rather than leaving it running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    code = 0
    try:
        code = app_process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if app_process.poll() is None:
            app_process.terminate()
            try:
                app_process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                app_process.kill()
    if code not in (0, -signal.SIGINT, -signal.SIGTERM):
        raise MedhelmError(f"the app stopped with exit code {code} (its messages are above)")
