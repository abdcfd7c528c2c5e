"""The session cookie (issue 19): a sign-in is handed to an HttpOnly, SameSite=Strict cookie that only the
signing-in tab can claim; a cookie planted beforehand or a nonce alone opens nothing; sign-out clears it.

The routes and the middleware run here in Starlette's test client, on real HTTP semantics, without a browser;
tests/browser/test_session_browser.py drives the same flow in Chromium.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
from argon2 import PasswordHasher
from sqlmodel import select
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from medhelm_core.accounts import auth, users
from medhelm_core.accounts.session_cookie import (
    CLAIM_PATH,
    COOKIE_NAME,
    END_PATH,
    REQUEST_HEADER,
    SECURE_COOKIE_NAME,
    claim_script,
    session_middleware,
    session_routes,
)
from medhelm_core.accounts.users import add_user, disable_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import User, utcnow

PASSWORD = "correct horse battery"
SAME_ORIGIN = {REQUEST_HEADER: "claim", "Sec-Fetch-Site": "same-origin"}


@pytest.fixture(autouse=True)
def cheap_hashing(monkeypatch):
    monkeypatch.setattr(users, "_hasher", PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))
    users._dummy_hash.cache_clear()
    yield
    users._dummy_hash.cache_clear()


def cookie_value() -> str:
    return secrets.token_urlsafe(32)


def bound_sign_in(engine, browser: str, name: str = "doc") -> auth.SignInResult:
    with transaction(engine) as s:
        if s.exec(select(User).where(User.username == name)).first() is None:
            add_user(s, name, "clinician", PASSWORD)
    with transaction(engine) as s:
        return auth.sign_in(s, name, PASSWORD, browser_token=browser)


def resolve(engine, token):
    with transaction(engine) as s:
        return auth.resolve_session(s, token)


def claim(engine, browser, nonce, now=None):
    with transaction(engine) as s:
        return auth.claim_session(s, browser, nonce, now=now)


def test_a_cookie_planted_before_sign_in_opens_nothing_and_only_the_tabs_claim_moves_the_session(engine):
    planted = cookie_value()  # e.g. read off a shared workstation before its next user signs in
    result = bound_sign_in(engine, planted)
    assert result.claim_nonce and result.token == auth.pending_token(planted, result.claim_nonce)
    assert resolve(engine, result.token).username == "doc"  # the tab that signed in works at once
    assert resolve(engine, planted) is None  # the planted cookie alone is no session
    assert claim(engine, planted, cookie_value()) is None  # nor with a guessed nonce
    assert claim(engine, cookie_value(), result.claim_nonce) is None  # nor the nonce with another cookie

    claimed = claim(engine, planted, result.claim_nonce)
    assert claimed is not None and claimed.token not in (planted, result.token, result.claim_nonce)
    assert resolve(engine, claimed.token).username == "doc"
    assert resolve(engine, result.token) is None  # the pending token is spent
    assert claim(engine, planted, result.claim_nonce) is None  # a second claim finds nothing
    assert claimed.expires_at - utcnow() <= auth.SESSION_LIFETIME


def test_a_sign_in_without_a_usable_cookie_is_a_session_of_the_tab_alone(engine):
    for browser in (None, "", "short", "not a token; Path=/", "x" * 500):
        result = bound_sign_in(engine, browser)
        assert result.claim_nonce is None and resolve(engine, result.token) is not None


def test_a_disabled_account_or_a_revoked_sign_in_cannot_be_claimed(engine):
    browser = cookie_value()
    first = bound_sign_in(engine, browser)
    with transaction(engine) as s:
        auth.sign_out(s, first.token)
    assert claim(engine, browser, first.claim_nonce) is None
    second = bound_sign_in(engine, browser)
    with transaction(engine) as s:
        disable_user(s, "doc")
    assert claim(engine, browser, second.claim_nonce) is None
    later = utcnow() + auth.SESSION_LIFETIME + timedelta(minutes=1)
    third = bound_sign_in(engine, cookie_value(), name="other")
    assert claim(engine, third.token.split(".")[0], third.claim_nonce, now=later) is None  # expired


# --- the routes and the middleware, over HTTP ---------------------------------------------------------------


@pytest.fixture
def client(sqlite_engine):
    async def page(request):
        return PlainTextResponse("a page")

    app = Starlette(routes=[*session_routes(lambda: sqlite_engine), Route("/rate", page),
                            Route("/static/app.js", page)],
                    middleware=session_middleware())
    with TestClient(app, base_url="http://localhost") as c:
        yield c, sqlite_engine


def set_cookie_of(response) -> str:
    return response.headers.get("set-cookie", "")


def test_a_page_load_gives_an_unbound_httponly_strict_cookie_and_keeps_one_it_has(client):
    c, _ = client
    first = c.get("/rate", headers={"Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "none"})
    cookie = set_cookie_of(first)
    assert cookie.startswith(f"{COOKIE_NAME}=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Path=/" in cookie and "Max-Age" not in cookie and "Secure" not in cookie
    assert set_cookie_of(c.get("/rate")) == ""  # the client sends it back: nothing new
    c.cookies.clear()
    # Another site's link is sent without the Strict cookie: answering with a new one would sign the user out.
    assert set_cookie_of(c.get("/rate", headers={"Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "cross-site"})) == ""
    assert set_cookie_of(c.get("/static/app.js", headers={"Sec-Fetch-Dest": "script"})) == ""
    assert set_cookie_of(c.get("/static/app.js")) == ""


def test_under_tls_the_cookie_is_secure_and_host_only(client):
    c, engine = client
    answer = c.get("/rate", headers={"X-Forwarded-Proto": "https"})
    assert set_cookie_of(answer).startswith(f"{SECURE_COOKIE_NAME}=") and "; Secure" in set_cookie_of(answer)
    browser = set_cookie_of(answer).split(";")[0].split("=", 1)[1]
    result = bound_sign_in(engine, browser)
    c.cookies.clear()  # the test client keeps Secure cookies for https; the proxy's browser sends it over TLS
    claimed = c.post(CLAIM_PATH, content=result.claim_nonce, headers={
        **SAME_ORIGIN, "X-Forwarded-Proto": "https", "Cookie": f"{SECURE_COOKIE_NAME}={browser}"})
    assert claimed.status_code == 204
    assert set_cookie_of(claimed).startswith(f"{SECURE_COOKIE_NAME}=") and "; Secure" in set_cookie_of(claimed)


def test_the_claim_sets_the_sessions_new_token_as_cookie_and_sign_out_clears_it(client):
    c, engine = client
    c.get("/rate")
    browser = c.cookies[COOKIE_NAME]
    result = bound_sign_in(engine, browser)
    answer = c.post(CLAIM_PATH, content=result.claim_nonce, headers=SAME_ORIGIN)
    assert answer.status_code == 204 and answer.headers["cache-control"] == "no-store"
    header = set_cookie_of(answer)
    token = c.cookies[COOKIE_NAME]
    assert token != browser and resolve(engine, token).username == "doc"
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Max-Age=" in header
    assert int(header.split("Max-Age=")[1].split(";")[0]) > auth.SESSION_LIFETIME.total_seconds() - 60
    assert token not in str(answer.url)  # never in a URL

    ended = c.post(END_PATH, headers={REQUEST_HEADER: "end", "Sec-Fetch-Site": "same-origin"})
    assert ended.status_code == 204 and "Max-Age=0" in set_cookie_of(ended)
    assert COOKIE_NAME not in c.cookies and resolve(engine, token) is None


def test_the_routes_refuse_anything_but_a_fetch_from_the_apps_own_pages(client):
    c, engine = client
    c.get("/rate")
    browser = c.cookies[COOKIE_NAME]
    result = bound_sign_in(engine, browser)
    # a cross-site form post (no custom header), a cross-site fetch, a GET: refused, nothing claimed
    assert c.post(CLAIM_PATH, content=result.claim_nonce).status_code == 403
    assert c.post(CLAIM_PATH, content=result.claim_nonce,
                  headers={REQUEST_HEADER: "claim", "Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert c.get(CLAIM_PATH).status_code == 405
    assert c.options(CLAIM_PATH, headers={"Origin": "https://evil.example",
                                          "Access-Control-Request-Method": "POST"}).status_code == 405
    assert c.post(END_PATH).status_code == 403
    assert c.cookies[COOKIE_NAME] == browser and resolve(engine, result.token) is not None
    # without the browser's cookie the nonce is worth nothing
    c.cookies.clear()
    assert c.post(CLAIM_PATH, content=result.claim_nonce, headers=SAME_ORIGIN).status_code == 403
    assert resolve(engine, result.token) is not None


def test_the_claim_script_holds_the_nonce_only_and_refuses_anything_else():
    nonce = cookie_value()
    script = claim_script(nonce)
    assert nonce in script and CLAIM_PATH in script and "reload" in script
    with pytest.raises(ValueError):
        claim_script("x'); alert(1); ('")
