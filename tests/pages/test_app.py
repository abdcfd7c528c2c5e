"""The app: sign-in, role checks on the server side, and pages that render demo data without errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO
from streamlit.testing.v1 import AppTest
from support.helpers import free_port, wait_for_health

from medhelm_core.accounts import auth
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from pages.common import TOKEN_KEY


@pytest.fixture
def app_db(sqlite_demo_engine, monkeypatch):
    with transaction(sqlite_demo_engine) as s:
        add_user(s, "gone", "clinician", "gone-password")
        from medhelm_core.accounts.users import disable_user

        disable_user(s, "gone")
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    return sqlite_demo_engine


def signed_in(username: str, password: str) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=30).run()
    at.text_input[0].input(username)
    at.text_input[1].input(password)
    at.button[0].click().run()
    return at


def test_sign_in_opens_the_studies_page(app_db):
    at = signed_in("researcher", "researcher-demo")
    assert not at.exception
    assert [t.value for t in at.title] == ["Studies"]
    table = at.dataframe[0].value
    assert set(table["name"]) == {"demo", "medhelm-validation"}


@pytest.mark.parametrize(("user", "password"), [("researcher", "wrong-password"), ("nobody", "x"),
                                                 ("gone", "gone-password")])
def test_wrong_credentials_or_disabled_accounts_are_refused(app_db, user, password):
    at = signed_in(user, password)
    assert [e.value for e in at.error] == ["Unknown username or wrong password."]
    assert [t.value for t in at.title] == ["MedHELM Calibrate"]


def test_the_data_page_is_not_in_a_clinicians_navigation(app_db):
    at = signed_in("clinician1", "clinician1-demo")
    assert not at.exception
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/data.py")


def token_for(engine, username, password):
    with transaction(engine) as s:
        return auth.sign_in(s, username, password).token


@pytest.mark.parametrize("account", [None, ("clinician1", "clinician1-demo"), ("adj", "adjudicator-pw")])
def test_the_data_page_itself_refuses_other_roles(app_db, account):
    """Run the page script directly, as a crafted request would: the page checks the role itself."""
    with transaction(app_db) as s:
        add_user(s, "adj", "adjudicator", "adjudicator-pw")
    at = AppTest.from_file(str(REPO / "pages" / "data.py"), default_timeout=30)
    if account is not None:
        at.session_state[TOKEN_KEY] = token_for(app_db, *account)
    at.run()
    assert not at.exception
    shown = [e.value for e in at.error] + [w.value for w in at.warning]
    assert shown == (["Please sign in."] if account is None else ["Your account cannot open this page."])
    assert not at.text and not at.selectbox  # nothing of the data drawn


def test_a_forged_or_revoked_token_is_not_a_session(app_db):
    at = AppTest.from_file(str(REPO / "pages" / "home.py"), default_timeout=30)
    at.session_state[TOKEN_KEY] = "forged-token"
    at.run()
    assert [w.value for w in at.warning] == ["Please sign in."]
    token = token_for(app_db, "researcher", "researcher-demo")
    with transaction(app_db) as s:
        auth.sign_out(s, token)
    at = AppTest.from_file(str(REPO / "pages" / "home.py"), default_timeout=30)
    at.session_state[TOKEN_KEY] = token
    at.run()
    assert [w.value for w in at.warning] == ["Please sign in."]


def test_the_data_page_shows_model_text_as_text(app_db):
    at = signed_in("researcher", "researcher-demo")
    at.switch_page("pages/data.py").run()
    assert not at.exception
    assert len(at.text) >= 2  # request and output, drawn with st.text (no markdown, no HTML)


def test_the_app_answers_on_its_health_endpoint(app_db, tmp_path):
    port = free_port()
    env = {**os.environ, "MEDHELM_DATABASE_URL": str(app_db.url)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.port", str(port),
         "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        wait_for_health(f"http://localhost:{port}", proc)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_medhelm_demo_seeds_prints_accounts_and_serves_the_app(tmp_path):
    """The README's first Quickstart command, end to end: seed, print the accounts, answer on /_stcore/health."""
    port = free_port()
    env = {**os.environ, "MEDHELM_DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}"}
    proc = subprocess.Popen([sys.executable, "-m", "medhelm_core", "demo", "--port", str(port)], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        printed = []
        for line in proc.stdout:
            printed.append(line)
            if "starting the app" in line:
                break
        text = "".join(printed)
        assert "clinician1" in text and "password: clinician1-demo" in text and "study demo: 48 items" in text
        wait_for_health(f"http://localhost:{port}", proc)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
