"""A real Chromium against `streamlit run serve.py` (issue 19): a deep link survives sign-in, a reload and a new
tab; signing out ends the session at once, in every tab, and clears the cookie; the cookie is HttpOnly
and SameSite=Strict and never in a URL; and every request the browser makes goes to the app's own origin (no
icon font from Google, nothing else from outside).

One app and one browser context (one browser profile, its tabs sharing cookies) serve the whole module; the tests
run in order.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import REPO
from sqlmodel import Session, select
from support.helpers import start_app

from medhelm_core.accounts.auth import _hash
from medhelm_core.accounts.session_cookie import COOKIE_NAME
from medhelm_core.db.engine import make_engine
from medhelm_core.db.models import AuthSession, User

pytestmark = pytest.mark.browser
SHOTS = Path(os.environ["MEDHELM_SCREENSHOTS"]) if os.environ.get("MEDHELM_SCREENSHOTS") else None
PROGRESS = re.compile(r"\d+ of \d+ done")


@pytest.fixture(scope="module")
def served(tmp_path_factory, sqlite_demo_template):
    db = tmp_path_factory.mktemp("session-browser") / "app.db"
    shutil.copyfile(sqlite_demo_template, db)
    url = f"sqlite:///{db}"
    base, proc = start_app(REPO, url)
    engine = make_engine(url)
    yield base, engine
    proc.terminate()
    proc.wait(timeout=20)
    engine.dispose()


@pytest.fixture(scope="module")
def profile(browser, served):
    """One browser profile for the module, with every URL it requested."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    requested: list[str] = []
    context.on("request", lambda request: requested.append(request.url))
    yield context, requested
    context.close()


def session_cookie(context) -> dict:
    (cookie,) = [c for c in context.cookies() if c["name"] == COOKIE_NAME]
    return cookie


def session_of(engine, token: str) -> tuple[str, bool] | None:
    """(username, revoked) of the session whose token is ``token``, as stored (by its hash)."""
    with Session(engine) as s:
        row = s.exec(select(AuthSession).where(AuthSession.token_hash == _hash(token))).first()
        return None if row is None else (s.get(User, row.user_id).username, row.revoked)


def test_a_deep_link_signs_in_on_its_page_and_survives_a_reload_and_a_new_tab(served, profile):
    base, engine = served
    context, _ = profile
    page = context.new_page()
    page.goto(f"{base}/rate")  # the first visitor of a fresh server comes through a bookmark
    page.get_by_label("Username").fill("clinician1")
    assert page.url == f"{base}/rate" and page.get_by_text("Page not found").count() == 0
    page.get_by_role("textbox", name="Password").fill("clinician1-demo")
    with page.expect_navigation(timeout=30_000):  # the tab hands its session to the cookie, then reloads
        page.get_by_role("button", name="Sign in").click()
    page.get_by_text(PROGRESS).first.wait_for(timeout=30_000)
    assert page.url == f"{base}/rate"

    cookie = session_cookie(context)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    assert cookie["expires"] > time.time() + 7.5 * 3600  # the 8-hour session
    assert session_of(engine, cookie["value"]) == ("clinician1", False)
    assert cookie["value"] not in page.url and COOKIE_NAME not in page.evaluate("document.cookie")

    page.reload()
    page.get_by_text(PROGRESS).first.wait_for(timeout=30_000)
    assert page.url == f"{base}/rate" and page.get_by_label("Username").count() == 0

    tab = context.new_page()
    tab.goto(f"{base}/rate")
    tab.get_by_text(PROGRESS).first.wait_for(timeout=30_000)
    assert tab.get_by_text("Signed in as Clinician1", exact=False).count() == 1


def test_signing_out_ends_the_session_in_every_tab_and_clears_the_cookie(served, profile):
    _, engine = served
    context, _ = profile
    page, tab = context.pages[-2:]
    signed_in = session_cookie(context)["value"]
    with page.expect_navigation(timeout=30_000):  # the cookie is cleared, then the page reloads
        page.get_by_role("button", name="Sign out").click()
    page.get_by_label("Username").wait_for(timeout=30_000)
    assert session_of(engine, signed_in) == ("clinician1", True)
    fresh = session_cookie(context)  # a new cookie, bound to nothing
    assert fresh["value"] != signed_in and session_of(engine, fresh["value"]) is None and fresh["expires"] == -1
    page.reload()
    page.get_by_label("Username").wait_for(timeout=30_000)
    tab.reload()
    tab.get_by_label("Username").wait_for(timeout=30_000)
    tab.close()


def test_an_admin_signs_in_on_a_deep_link_to_the_admin_page(served, profile):
    base, _ = served
    context, _ = profile
    page = context.pages[-1]
    page.goto(f"{base}/admin")
    page.get_by_label("Username").fill("admin")
    page.get_by_role("textbox", name="Password").fill("admin-demo")
    with page.expect_navigation(timeout=30_000):
        page.get_by_role("button", name="Sign in").click()
    page.get_by_text("Account history").wait_for(timeout=30_000)
    # the demo accounts' creation, from the audit trail (a data grid draws on a canvas: its cells are hidden DOM)
    page.get_by_text("user.added").first.wait_for(state="attached", timeout=30_000)
    assert page.url == f"{base}/admin"
    if SHOTS:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "admin_page.png"))


def test_every_request_went_to_the_apps_own_origin(served, profile):
    base, _ = served
    _, requested = profile
    own = urlsplit(base)
    fetched = [u for u in requested if urlsplit(u).scheme not in ("data", "blob")]
    assert any("MaterialSymbols" in u for u in fetched)  # the sidebar's icons were drawn, from this server's font
    assert [u for u in fetched if urlsplit(u)[:2] != own[:2]] == []
