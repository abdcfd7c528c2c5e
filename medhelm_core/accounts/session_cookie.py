"""The browser's session cookie: what it is called, who sets it, and the two routes that hand a session to it
and take it back.

Streamlit pages talk to the server over a WebSocket and cannot set a cookie, so the web server
(``serve.py``, a Streamlit ``App`` with these routes and this middleware) does it over plain HTTP:

1. Loading a page in a browser without the cookie gives it one, an opaque random value bound to nothing
   (:class:`IssueBrowserCookie`).
2. A sign-in in the tab opens a session for that cookie, under the cookie plus a fresh nonce
   (:func:`~medhelm_core.accounts.auth.sign_in` with ``browser_token``); the tab, signed in at once, posts
   the nonce to :data:`CLAIM_PATH`, which replaces the session's token with a new one and sets it as the
   cookie (:func:`~medhelm_core.accounts.auth.claim_session`), then reloads.
3. Every page run reads the cookie from the WebSocket's request (``st.context.cookies``) and checks it
   against the database, so reloads, bookmarks, deep links and new tabs stay signed in for the session's
   lifetime, and a sign-out, an expiry or a disabled account ends them at once.
4. Signing out revokes the session, then posts to :data:`END_PATH`, which clears the cookie.

The cookie is HttpOnly (page scripts never see a token), SameSite=Strict (no other site's page sends it),
Path=/, and under TLS Secure with the ``__Host-`` prefix (so no sibling host can set it). The token never
appears in a URL. Both routes answer only a same-origin ``fetch`` that carries :data:`REQUEST_HEADER` (a
cross-site form cannot set it, and a cross-origin script is stopped by the CORS preflight nobody answers).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from medhelm_core.accounts.auth import TOKEN_SHAPE

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.routing import BaseRoute

__all__ = [
    "CLAIM_PATH", "COOKIE_NAME", "END_PATH", "SECURE_COOKIE_NAME", "IssueBrowserCookie", "browser_token",
    "claim_script", "end_script", "session_middleware", "session_routes",
]

COOKIE_NAME = "medhelm_session"
#: the name under TLS: browsers accept a ``__Host-`` cookie only with Secure, Path=/ and no Domain
SECURE_COOKIE_NAME = "__Host-medhelm_session"
CLAIM_PATH = "/_medhelm/session/claim"
END_PATH = "/_medhelm/session/end"
REQUEST_HEADER = "X-Medhelm-Session"
#: paths of Streamlit's own assets and endpoints: only a page (a document) is given a cookie
_NOT_PAGES = ("/_stcore/", "/static/", "/media/", "/component/", "/_medhelm/", "/auth/", "/oauth2callback")


def browser_token(cookies: Mapping[str, str], url: str | None) -> str | None:
    """The session cookie a page run sees (``st.context.cookies``, ``st.context.url``), if it has one.

    Over https only the ``__Host-`` cookie counts: a plain one there could have been set by another host.

    Examples
    --------
    >>> value = "A" * 43
    >>> browser_token({COOKIE_NAME: value}, "http://localhost:8501/rate") == value
    True
    >>> browser_token({COOKIE_NAME: value}, "https://calibrate.example.org/"), browser_token({}, None)
    (None, None)
    """
    value = cookies.get(SECURE_COOKIE_NAME)
    if value is None and not (isinstance(url, str) and url.startswith("https://")):
        value = cookies.get(COOKIE_NAME)
    return value if isinstance(value, str) and TOKEN_SHAPE.match(value) else None


def _secure(headers: Mapping[str, str], scheme: str) -> bool:
    """Whether the browser reached us over TLS (directly, or through a proxy that says so)."""
    forwarded = headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return scheme in ("https", "wss") or forwarded == "https"


def _set_cookie(value: str, *, secure: bool, max_age: int | None) -> str:
    """A Set-Cookie header value for the session cookie (``max_age`` 0 deletes it; None: until the browser
    closes)."""
    name = SECURE_COOKIE_NAME if secure else COOKIE_NAME
    parts = [f"{name}={value}", "Path=/", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    if max_age is not None:
        parts.append(f"Max-Age={max_age}")
    return "; ".join(parts)


class IssueBrowserCookie:
    """ASGI middleware: a page loaded without the session cookie gets one, bound to no session.

    Only a page (a document requested by typing, a bookmark, a reload or a link within the app) gets it: a
    page opened from another site's link is sent without the cookie (SameSite=Strict) and must not replace
    one the browser holds, and assets loaded in parallel would each set another value.
    """

    def __init__(self, app: Any) -> None:
        from starlette.requests import cookie_parser

        self.app = app
        self._cookies = cookie_parser

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not self._is_page(scope["path"], headers):
            await self.app(scope, receive, send)
            return
        secure = _secure(headers, scope.get("scheme", "http"))
        if (SECURE_COOKIE_NAME if secure else COOKIE_NAME) in self._cookies(headers.get("cookie", "")):
            await self.app(scope, receive, send)
            return
        issued = _set_cookie(secrets.token_urlsafe(32), secure=secure, max_age=None).encode("latin-1")

        async def send_with_cookie(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", issued)]}
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    @staticmethod
    def _is_page(path: str, headers: Mapping[str, str]) -> bool:
        dest, site = headers.get("sec-fetch-dest"), headers.get("sec-fetch-site")
        if dest is not None and dest != "document":
            return False
        if site == "cross-site":
            return False
        return not any(path.startswith(prefix) or f"{path}/" == prefix for prefix in _NOT_PAGES)


def _url_path(path: str) -> str:
    """``path`` under Streamlit's ``server.baseUrlPath``."""
    from streamlit import config

    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}{path}" if base else path


def _from_our_pages(request: Request) -> bool:
    """A same-origin fetch from the app's own page: it sets our header, and a browser says where it comes from."""
    site = request.headers.get("sec-fetch-site")
    return request.headers.get(REQUEST_HEADER) is not None and site in (None, "same-origin")


def session_routes(engine: Callable[[], Engine]) -> list[BaseRoute]:
    """The routes that hand a session to the browser's cookie (:data:`CLAIM_PATH`) and clear it
    (:data:`END_PATH`); ``engine`` gives the app's database engine when a request comes."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response
    from starlette.routing import Route

    from medhelm_core.accounts import auth
    from medhelm_core.db.engine import transaction

    def claim_in_database(browser: str | None, nonce: str) -> auth.ClaimedSession | None:
        with transaction(engine()) as session:
            return auth.claim_session(session, browser, nonce)

    def end_in_database(token: str | None) -> None:
        if token and TOKEN_SHAPE.match(token):
            with transaction(engine()) as session:
                auth.sign_out(session, token)

    def cookie_of(request: Request) -> tuple[str | None, bool]:
        secure = _secure(request.headers, request.url.scheme)
        return request.cookies.get(SECURE_COOKIE_NAME if secure else COOKIE_NAME), secure

    async def claim(request: Request) -> Response:
        if not _from_our_pages(request):
            return Response(status_code=403)
        browser, secure = cookie_of(request)
        nonce = (await request.body())[:200].decode("ascii", errors="replace").strip()
        claimed = await run_in_threadpool(claim_in_database, browser, nonce)
        if claimed is None:
            return Response(status_code=403, headers={"Cache-Control": "no-store"})
        max_age = max(0, int((claimed.expires_at - datetime.now(claimed.expires_at.tzinfo)).total_seconds()))
        return Response(status_code=204, headers={"Cache-Control": "no-store",
                                                  "Set-Cookie": _set_cookie(claimed.token, secure=secure,
                                                                            max_age=max_age)})

    async def end(request: Request) -> Response:
        if not _from_our_pages(request):
            return Response(status_code=403)
        token, secure = cookie_of(request)
        await run_in_threadpool(end_in_database, token)
        return Response(status_code=204, headers={"Cache-Control": "no-store",
                                                  "Set-Cookie": _set_cookie("", secure=secure, max_age=0)})

    return [Route(_url_path(CLAIM_PATH), claim, methods=["POST"]), Route(_url_path(END_PATH), end, methods=["POST"])]


def session_middleware() -> list[Middleware]:
    """The middleware that gives a browser its cookie (:class:`IssueBrowserCookie`)."""
    from starlette.middleware import Middleware

    return [Middleware(IssueBrowserCookie)]


def claim_script(nonce: str) -> str:
    """The script the tab runs right after a sign-in: claim the session for the cookie, then reload, so that the
    page reads the cookie. ``nonce`` is a :data:`~medhelm_core.accounts.auth.TOKEN_SHAPE` value (no quotes)."""
    if not TOKEN_SHAPE.match(nonce):
        raise ValueError("not a claim nonce")
    return (f"<script>fetch({_url_path(CLAIM_PATH)!r}, {{method: 'POST', credentials: 'same-origin', "
            f"headers: {{{REQUEST_HEADER!r}: 'claim', 'Content-Type': 'text/plain'}}, body: {nonce!r}}})"
            ".then(function (r) { if (r.ok) { window.location.reload(); } });</script>")


def end_script() -> str:
    """The script the tab runs right after a sign-out: clear the cookie, then reload (a fresh one is issued)."""
    return (f"<script>fetch({_url_path(END_PATH)!r}, {{method: 'POST', credentials: 'same-origin', "
            f"headers: {{{REQUEST_HEADER!r}: 'end'}}}})"
            ".finally(function () { window.location.reload(); });</script>")
