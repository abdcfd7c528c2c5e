"""The Jury page's live progress (issue 19, fix 12): under load a worker's heartbeat can be late, so the run reads
"interrupted" for a while; the page must keep watching it and show "finished" when the worker gets there, rather
than freeze on "interrupted: 8 of 8" while the CLI says "finished"."""

from __future__ import annotations

from datetime import timedelta

import pytest
import streamlit
from conftest import REPO
from sqlmodel import select
from streamlit.runtime.scriptrunner import RerunData
from streamlit.testing.v1 import AppTest, local_script_runner
from support.jury_support import LOCAL_A, LOCAL_B, fast_config, make_study

from medhelm_core.accounts import auth
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, RunStatus, VerdictStatus, utcnow
from medhelm_core.jury.store import VerdictOutcome, _set_state, finish_run, open_run, record_verdict
from medhelm_core.studies import get_study
from pages.common import TOKEN_KEY


@pytest.fixture
def late_run(sqlite_engine, monkeypatch):
    """A run whose worker has stored all 8 verdicts but not yet said "finished", silent for a minute."""
    with transaction(sqlite_engine) as s:
        add_user(s, "researcher", "researcher", "researcher-pw")
    make_study(sqlite_engine, ["good"] * 4, name="busy")
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_engine.url))
    with transaction(sqlite_engine) as s:
        # the run's rows as its worker leaves them (no judge is called here: the page reads rows only)
        run = open_run(s, get_study(s, "busy"), fast_config("http://127.0.0.1:9/v1", (LOCAL_A, LOCAL_B)))
        items = s.exec(select(Item.id).order_by(Item.id)).all()
    for item in items:
        for judge in (LOCAL_A, LOCAL_B):
            record_verdict(sqlite_engine, run.id, VerdictOutcome(
                item, judge, f"{item}-{judge}", VerdictStatus.ok.value, {"accuracy": 4, "completeness": 4,
                                                                         "clarity": 4},
                {}, "prompt", "{}", None, 0.1))
    _set_state(sqlite_engine, run.id, RunStatus.running, heartbeat_at=(utcnow() - timedelta(seconds=60)).isoformat())
    return sqlite_engine, run.id


def fragment_rerun(at: AppTest) -> AppTest:
    """What the browser does every second for a fragment with ``run_every``: re-run the fragment alone."""
    (fragment_id,) = at._fragment_storage._fragments
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(local_script_runner, "RerunData", lambda **data: RerunData(**data, fragment_id_queue=[fragment_id]))
        return at.run()


def progress_text(at: AppTest) -> str:
    return "; ".join(str(p.proto.text) for p in at.get("progress"))


def test_a_run_with_a_late_heartbeat_is_watched_until_it_finishes(late_run, monkeypatch):
    engine, run_id = late_run
    polling: list[float | None] = []  # the run_every the page gives its progress fragment: None = never polls
    real_fragment = streamlit.fragment

    def recording_fragment(func=None, *, run_every=None):
        polling.append(run_every)
        return real_fragment(func, run_every=run_every) if func is not None else real_fragment(run_every=run_every)

    monkeypatch.setattr(streamlit, "fragment", recording_fragment)
    at = AppTest.from_file(str(REPO / "pages" / "jury.py"), default_timeout=60)
    with transaction(engine) as s:
        at.session_state[TOKEN_KEY] = auth.sign_in(s, "researcher", "researcher-pw").token
    at.run()
    assert not at.exception
    assert progress_text(at) == "interrupted: 8 of 8 verdicts"
    assert polling[-1] == 1.0  # still watched: the worker may yet finish (or be taken over)
    assert any("keeps watching" in c.value for c in at.caption)

    finish_run(engine, run_id, RunStatus.finished)  # the worker gets there (the CLI prints "finished")
    fragment_rerun(at)  # the fragment's next tick sees it and redraws the page
    assert not at.exception
    assert progress_text(at) == "finished: 8 of 8 verdicts"
    assert polling[-1] is None  # and stops watching a run that can no longer change
