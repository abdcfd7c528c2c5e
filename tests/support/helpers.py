"""Small builders used by several tests: HELM run folders and table snapshots."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import MetaData, func, select
from sqlalchemy.engine import Engine


def table_counts(engine: Engine) -> dict[str, int]:
    """Rows per table: equal before and after a failed import means nothing was written."""
    meta = MetaData()
    meta.reflect(engine)
    with engine.connect() as conn:
        return {name: conn.execute(select(func.count()).select_from(t)).scalar_one() for name, t in meta.tables.items()}


def refused_import(engine: Engine, paths: list, fmt: str | None = None):  # noqa: ANN201 - the InputFileError
    """Import ``paths`` into study "s", expect an InputFileError, check that nothing was written, return it."""
    import pytest

    from medhelm_core.db.engine import transaction
    from medhelm_core.errors import InputFileError
    from medhelm_core.importers import import_paths
    from medhelm_core.studies import get_or_create_study

    before = table_counts(engine)
    with pytest.raises(InputFileError) as info:
        with transaction(engine) as s:
            study, _ = get_or_create_study(s, "s")
            import_paths(s, study, paths, fmt)
    assert table_counts(engine) == before
    return info.value


def request_state(instance_id: str, text: str, completion: str, references: list[tuple[str, list[str]]],
                  split: str = "test", trial: int = 0, model: str = "openai/gpt-4o-2024-05-13") -> dict:
    """One HELM request state as helm-run writes it (the fields our importer reads, and a few it ignores)."""
    return {
        "instance": {
            "input": {"text": text},
            "references": [{"output": {"text": r}, "tags": tags} for r, tags in references],
            "split": split,
            "id": instance_id,
        },
        "train_trial_index": trial,
        "request": {"model_deployment": model, "model": model, "prompt": f"PROMPT {text}", "temperature": 0.0},
        "result": {"success": True, "completions": [{"text": completion, "logprob": 0.0, "tokens": []}],
                   "cached": True, "request_time": 1.2},
        "num_train_instances": 0,
        "prompt_truncated": False,
    }


def write_helm_run(suite: Path, benchmark: str, model: str, states: list[dict]) -> Path:
    """Write ``benchmark_output/runs/<suite>/<benchmark>:model=<model>/`` with its two JSON files."""
    run = suite / f"{benchmark}:model={model.replace('/', '_')}"
    run.mkdir(parents=True)
    adapter = {"method": "generation", "model": model, "model_deployment": model, "max_tokens": 512}
    (run / "scenario_state.json").write_text(json.dumps({"adapter_spec": adapter, "request_states": states}))
    (run / "run_spec.json").write_text(
        json.dumps({"name": f"{benchmark}:model={model.replace('/', '_')}", "adapter_spec": adapter,
                    "metric_specs": [], "groups": [benchmark]})
    )
    return run


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_health(base_url: str, process, timeout: float = 60.0) -> None:  # noqa: ANN001 - a Popen
    """Block until the Streamlit app at ``base_url`` answers ``/_stcore/health``, or raise if it died."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{base_url}/_stcore/health", timeout=2) as answer:
                if answer.status == 200 and answer.read() == b"ok":
                    return
        except OSError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError(f"the app at {base_url} did not answer on /_stcore/health")
        time.sleep(0.5)


def start_app(repo, database_url: str):  # noqa: ANN001, ANN201 - a Path in, (base url, Popen) out
    """Start ``streamlit run serve.py`` (the app with its session cookie, as deployed) on a free loopback port
    against ``database_url``; wait until healthy.

    Returns ``(base_url, process)``; the caller terminates the process.
    """
    import os
    import subprocess
    import sys

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(repo / "serve.py"), "--server.port", str(port),
         "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=repo, env={**os.environ, "MEDHELM_DATABASE_URL": database_url},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://localhost:{port}"
    try:
        wait_for_health(base, process)
    except RuntimeError:
        process.kill()
        raise
    return base, process


def browser_sign_in(page, base: str, username: str, password: str | None = None) -> None:  # noqa: ANN001 - a Page
    """Sign in through the app's form in a real browser (the demo password ``<name>-demo`` unless given) and wait
    for the signed-in sidebar, after the reload that hands the session to the browser's cookie (a click before it
    would be lost)."""
    page.goto(base)
    page.get_by_label("Username").fill(username)
    page.get_by_role("textbox", name="Password").fill(password or f"{username}-demo")
    with page.expect_navigation(timeout=30_000):
        page.get_by_role("button", name="Sign in").click()
    page.get_by_text("Signed in as").wait_for(timeout=30_000)


def run_cli(capsys, url: str, *args: str, stdin: str | None = None):
    """``medhelm --database-url URL ARGS`` in this process, reported as a subprocess would be (exit code, stdout,
    stderr): the code path after interpreter start-up, without paying the start-up for every call."""
    import io
    import subprocess
    import sys

    import pytest

    from medhelm_core.cli import main

    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdin", io.StringIO(stdin or ""))
        with pytest.raises(SystemExit) as exit_info:
            main(["--database-url", url, *args])
    out, err = capsys.readouterr()
    code = exit_info.value.code
    return subprocess.CompletedProcess(list(args), 0 if code is None else code if isinstance(code, int) else 1, out,
                                       err)


def study_named(engine: Engine, name: str):  # noqa: ANN201 - a Study, read in a transaction of its own
    """The study called ``name``, for the core functions that take the row and open their own transactions
    (a jury run, metrics); as the CLI does, the test finds it by name."""
    from medhelm_core.db.engine import transaction
    from medhelm_core.studies import get_study

    with transaction(engine) as session:
        return get_study(session, name)


def current_adjudications(session, study) -> dict[tuple[int, str], int]:  # noqa: ANN001 - a Session, a Study
    """The current (newest revision) adjudicated score of every adjudicated (item id, criterion) of a study."""
    from sqlmodel import col
    from sqlmodel import select as select_rows

    from medhelm_core.db.models import Adjudication, Item

    rows = session.exec(
        select_rows(Adjudication).join(Item, Item.id == Adjudication.item_id)
        .where(Item.study_id == study.id).order_by(col(Adjudication.revision))
    ).all()
    return {(row.item_id, row.criterion): row.score for row in rows}  # a later revision replaces an earlier one
