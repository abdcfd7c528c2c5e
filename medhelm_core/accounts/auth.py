"""Sign-in, server-side sessions and back-off after repeated failures.

A session is a random token held by the browser and a hash of it stored in the database with an expiry.
Every page run checks the token against the database, so an expired, revoked or disabled account stops at
once, in every app process.

The browser keeps the token in an HttpOnly cookie (:mod:`medhelm_core.accounts.session_cookie`), so a reload,
a bookmark or a new tab stays signed in. A sign-in never adopts the cookie the browser already holds: a
session opened for a browser is stored under its cookie *and* a fresh nonce (:func:`pending_token`), which
only the signing-in tab knows; the tab then claims it (:func:`claim_session`), which replaces the token with
a new one that only the cookie carries. A token planted in a browser beforehand (a shared workstation, a
cookie set by a sibling site) is therefore worth nothing, and neither is a nonce without the cookie.

Guessing is limited twice over:

* per account, in the database: after :data:`MAX_FAILURES` wrong passwords in a row the account is locked
  for a time that doubles with each further failure, capped at :data:`MAX_LOCKOUT`; failures are forgotten
  :data:`FAILURE_MEMORY` after the last one, so a slow guesser (one guess an hour) never locks an account.
  An attempt is counted as a failure *before* its password is checked, under a lock on the account's row,
  so parallel sign-ins cannot check more than :data:`MAX_FAILURES` passwords between two locks; a right
  password then takes the count back to zero.
* per client (an IP address), in this process's memory: after :data:`CLIENT_FREE_FAILURES` failures across
  all accounts, unknown usernames included, the client waits before each further attempt (doubling, capped
  at :data:`MAX_CLIENT_WAIT`), which slows password spraying without locking the accounts for anyone else.
  Several app processes each keep their own count, and behind a proxy that hides addresses all users are
  one client, which is why the wait is short.

Every refusal has the same message, and every refusal but a throttled client's takes the time of one
password check, so neither tells whether a username exists or an account is locked.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import secrets
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from medhelm_core.accounts.users import password_matches, rehashed
from medhelm_core.db.engine import hold_write_lock, transaction
from medhelm_core.db.models import AuthSession, Role, User, utcnow

SESSION_LIFETIME = timedelta(hours=8)
IDLE_TIMEOUT = timedelta(hours=2)
#: a session is marked as seen again only once its mark is this old: most page runs then only read (on SQLite a
#: write waits for the one writer, a step of an assignment say), and the idle timeout moves by at most this much
SEEN_EVERY = timedelta(minutes=1)
MAX_FAILURES = 5
BASE_LOCKOUT = timedelta(minutes=1)
MAX_LOCKOUT = timedelta(hours=1)
FAILURE_MEMORY = MAX_LOCKOUT
CLIENT_FREE_FAILURES = 20
# A client waits at most a minute: behind a proxy that hides addresses every user is one client, and the
# wait must slow an attacker there without shutting everyone out.
BASE_CLIENT_WAIT = timedelta(seconds=5)
MAX_CLIENT_WAIT = timedelta(minutes=1)
CLIENT_MEMORY = timedelta(hours=1)
MAX_TRACKED_CLIENTS = 10_000


@dataclass(frozen=True)
class Principal:
    """Who is making a request, as read fresh from the database on every page run."""

    user_id: int
    username: str
    display_name: str
    role: str

    @property
    def sees_everything(self) -> bool:
        """Researchers and admins see every study's data; others only their own."""
        return self.role in (Role.researcher, Role.admin)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _aware(when: datetime | None) -> datetime | None:
    # SQLite returns naive datetimes even for timezone-aware columns; they were written in UTC.
    if when is not None and when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when


def lockout_for(failures: int) -> timedelta:
    """How long an account is locked after ``failures`` consecutive failures (zero below the limit).

    Examples
    --------
    >>> [lockout_for(n).total_seconds() / 60 for n in (4, 5, 6, 7, 50)]
    [0.0, 1.0, 2.0, 4.0, 60.0]
    """
    if failures < MAX_FAILURES:
        return timedelta(0)
    return min(BASE_LOCKOUT * 2 ** min(failures - MAX_FAILURES, 32), MAX_LOCKOUT)


def client_key(address: str) -> str:
    """What the per-client count is kept under: the address itself, or for IPv6 its /64 network (one
    household or server usually holds a whole /64, so counting single addresses would not slow it).

    Examples
    --------
    >>> client_key("203.0.113.9"), client_key("2001:db8:1:2:a:b:c:d"), client_key("not an address")
    ('203.0.113.9', '2001:db8:1:2::/64', 'not an address')
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.ip_network(f"{ip}/64", strict=False))


def client_wait(failures: int) -> timedelta:
    """How long a client waits after its ``failures``-th recent failure (zero below the free allowance).

    Examples
    --------
    >>> [client_wait(n).total_seconds() for n in (19, 20, 21, 30)]
    [0.0, 5.0, 10.0, 60.0]
    """
    if failures < CLIENT_FREE_FAILURES:
        return timedelta(0)
    return min(BASE_CLIENT_WAIT * 2 ** min(failures - CLIENT_FREE_FAILURES, 32), MAX_CLIENT_WAIT)


class ClientThrottle:
    """Recent failed sign-ins per client, across every account, in this process's memory.

    Like the account's count, an attempt counts as a failure when it is admitted and is given back if the
    password was right, so parallel attempts from one client cannot slip past the allowance.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: dict[str, tuple[int, datetime]] = {}

    def admit(self, client: str, now: datetime) -> bool:
        """Count an attempt by ``client`` now; False (and not counted) while the client must wait."""
        with self._lock:
            failures, last = self._failures.get(client, (0, now))
            if now - last >= CLIENT_MEMORY:
                failures = 0
            if failures and now < last + client_wait(failures):
                return False
            self._failures[client] = (failures + 1, now)
            if len(self._failures) > MAX_TRACKED_CLIENTS:
                self._forget_oldest()
            return True

    def succeeded(self, client: str) -> None:
        """Give back the failure counted when ``client``'s attempt was admitted: its password was right."""
        with self._lock:
            if client in self._failures:
                failures, last = self._failures[client]
                self._failures[client] = (max(failures - 1, 0), last)

    def _forget_oldest(self) -> None:
        by_age = sorted(self._failures, key=lambda c: self._failures[c][1])
        for client in by_age[: len(by_age) // 2]:
            del self._failures[client]


_clients = ClientThrottle()


@dataclass(frozen=True)
class SignInResult:
    """A session token on success; otherwise None and a message that is safe to show.

    ``claim_nonce`` is set when the session was opened for the browser's cookie (``browser_token``): the
    browser must then :func:`claim_session` it, sending its cookie with this nonce.
    """

    token: str | None
    message: str = ""
    claim_nonce: str | None = None


#: what a browser cookie or a claim nonce may look like (``secrets.token_urlsafe`` output); anything else is
#: not ours and is ignored
TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")


def pending_token(browser_token: str, nonce: str) -> str:
    """The token of a session opened for the browser whose cookie holds ``browser_token``, before the browser
    claimed it: neither the cookie nor the nonce alone is this token.

    Examples
    --------
    >>> pending_token("cookie-value-0123456789", "nonce-value-0123456789")
    'cookie-value-0123456789.nonce-value-0123456789'
    """
    return f"{browser_token}.{nonce}"


@dataclass(frozen=True)
class ClaimedSession:
    """A session handed to a browser's cookie: its new token and when it ends."""

    token: str
    expires_at: datetime


#: The one refusal: an unknown user, a wrong password, a disabled, locked or throttled account all read
#: the same, so the message never confirms that a username exists or that an account is locked.
WRONG_CREDENTIALS = "Unknown username or wrong password."
LOCKED = WRONG_CREDENTIALS


@dataclass(frozen=True)
class _Attempt:
    """An admitted attempt: the hash to check the password against (None: refuse after a stand-in check)."""

    user_id: int | None
    password_hash: str | None
    client: str | None


def sign_in(
    db: Session | Engine, username: str, password: str, now: datetime | None = None, *, client: str | None = None,
    browser_token: str | None = None,
) -> SignInResult:
    """Check credentials and open a session; the token is kept client side only.

    With an :class:`~sqlalchemy.engine.Engine` (what the app passes) the attempt is counted in one short
    transaction, the password is checked with no database connection held (argon2 takes most of a second;
    holding a connection meanwhile let fifty sign-ins exhaust PostgreSQL's pool), and the outcome is
    recorded in a second one. With a :class:`Session` everything happens in the caller's transaction
    (scripts and tests), which then holds the account's row lock while the password is checked.

    ``client`` names who is asking (the browser's IP address, ``st.context.ip_address``) for the
    per-client back-off; None skips it (the CLI, scripts). ``browser_token`` is the browser's session cookie,
    if it has one: the session is then opened for that browser, to be claimed (:func:`claim_session`).
    A failure is returned, not raised, so that the failure count commits; its message is the same for
    every refusal (see :data:`WRONG_CREDENTIALS`).
    """
    now = now or utcnow()
    client = client_key(client) if client else None
    if client is not None and not _clients.admit(client, now):
        return SignInResult(None, WRONG_CREDENTIALS)
    if isinstance(db, Engine):
        with transaction(db) as session:
            attempt = _admit(session, username, now, client)
        new_hash = _check(attempt, password)
        with transaction(db) as session:
            return _record(session, attempt, new_hash, now, browser_token)
    attempt = _admit(db, username, now, client)
    return _record(db, attempt, _check(attempt, password), now, browser_token)


def _locked_row(session: Session, user_id: int) -> User | None:
    """Account ``user_id``, read fresh and locked against other sign-ins until the transaction ends."""
    # SQLite has no row locks and ignores FOR UPDATE: its write lock, taken now, serves instead, so the read
    # below sees every committed failure and nobody else's until this transaction ends.
    hold_write_lock(session)
    return session.exec(select(User).where(User.id == user_id).with_for_update()
                        .execution_options(populate_existing=True)).first()


def _admit(session: Session, username: str, now: datetime, client: str | None) -> _Attempt:
    """Count an attempt on ``username`` as a failure before its password is checked, under the row lock."""
    user_id = session.exec(select(User.id).where(User.username == username)).first()
    user = _locked_row(session, user_id) if user_id is not None else None
    if user is None or not user.password_hash or not user.is_active:
        return _Attempt(None, None, client)
    locked_until = _aware(user.locked_until)
    if locked_until is not None and locked_until > now:
        return _Attempt(None, None, client)  # not counted: a locked account's lock does not grow
    failures = user.failed_logins
    # locked_until is set at every failure (to the failure's time below the limit), so the last failure
    # was lockout_for(failures) before it.
    if locked_until is not None and now - (locked_until - lockout_for(failures)) >= FAILURE_MEMORY:
        failures = 0
    user.failed_logins = failures + 1
    user.locked_until = now + lockout_for(user.failed_logins)
    session.add(user)
    session.flush()
    return _Attempt(user.id, user.password_hash, client)


def _check(attempt: _Attempt, password: str) -> str | None:
    """The stored hash (or its replacement) when the password is right; None otherwise."""
    if not password_matches(attempt.password_hash, password):
        return None
    return rehashed(attempt.password_hash, password) or attempt.password_hash


def _record(session: Session, attempt: _Attempt, verified_hash: str | None, now: datetime,
            browser_token: str | None = None) -> SignInResult:
    """Open a session for a right password; a wrong one was already counted when it was admitted."""
    if verified_hash is None or attempt.user_id is None:
        return SignInResult(None, WRONG_CREDENTIALS)
    user = _locked_row(session, attempt.user_id)
    # disabled, or the password changed, while this one was being checked
    if user is None or not user.is_active or user.password_hash != attempt.password_hash:
        return SignInResult(None, WRONG_CREDENTIALS)
    user.failed_logins, user.locked_until, user.password_hash = 0, None, verified_hash
    session.add(user)
    if attempt.client is not None:
        _clients.succeeded(attempt.client)
    return _open_session(session, user.id, now, browser_token)


def _open_session(session: Session, user_id: int, now: datetime, browser_token: str | None) -> SignInResult:
    """Store a new session of ``user_id``: for the browser's cookie (to be claimed) when it has a usable one."""
    nonce = None
    if browser_token is not None and TOKEN_SHAPE.match(browser_token):
        nonce = secrets.token_urlsafe(32)
        token = pending_token(browser_token, nonce)
    else:
        token = secrets.token_urlsafe(32)
    session.add(AuthSession(token_hash=_hash(token), user_id=user_id, created_at=now,
                            expires_at=now + SESSION_LIFETIME, last_seen_at=now))
    return SignInResult(token, claim_nonce=nonce)


def _open_row(session: Session, token: str, now: datetime) -> tuple[AuthSession, User] | None:
    """The session row of ``token`` and its account, if the session is open, unexpired, not idle too long and
    the account active."""
    # One round trip for both rows: this runs at the start of every page run, callback and download.
    found = session.exec(select(AuthSession, User).join(User, User.id == AuthSession.user_id)
                         .where(AuthSession.token_hash == _hash(token))).first()
    if found is None:
        return None
    row, user = found
    if row.revoked or _aware(row.expires_at) <= now or now - _aware(row.last_seen_at) > IDLE_TIMEOUT:
        return None
    if not user.is_active:
        return None
    return row, user


def resolve_session(session: Session, token: str | None, now: datetime | None = None) -> Principal | None:
    """The principal for ``token`` if its session is open, unexpired, not idle too long and the account
    is active; else None. Marks the session as seen (at most once every :data:`SEEN_EVERY`)."""
    if not token:
        return None
    now = now or utcnow()
    found = _open_row(session, token, now)
    if found is None:
        return None
    row, user = found
    if now - _aware(row.last_seen_at) >= SEEN_EVERY:
        row.last_seen_at = now
        session.add(row)
    return Principal(user.id, user.username, user.display_name or user.username, user.role)


def claim_session(session: Session, browser_token: str | None, nonce: str | None,
                  now: datetime | None = None) -> ClaimedSession | None:
    """Hand the session opened for a browser (:func:`sign_in` with ``browser_token``) to that browser's cookie:
    its token is replaced by a new one, returned here to be set as the cookie. None (and nothing changes)
    unless ``browser_token`` and ``nonce`` together name an open session.

    The pending token stops working (the tab that signed in reloads and reads the cookie); a second claim
    with the same cookie and nonce finds nothing.
    """
    if not browser_token or not nonce or not TOKEN_SHAPE.match(browser_token) or not TOKEN_SHAPE.match(nonce):
        return None
    now = now or utcnow()
    pending = pending_token(browser_token, nonce)
    found = _open_row(session, pending, now)
    if found is None:
        return None
    row, _ = found
    token = secrets.token_urlsafe(32)
    # Only one claim can win: the row is replaced only while it still holds the pending token.
    changed = session.exec(update(AuthSession)
                           .where(AuthSession.id == row.id, AuthSession.token_hash == _hash(pending))
                           .values(token_hash=_hash(token), last_seen_at=now))
    if changed.rowcount != 1:
        return None
    return ClaimedSession(token, _aware(row.expires_at))


def sign_out(session: Session, token: str | None) -> None:
    """Revoke the session of ``token`` (no error if it is unknown)."""
    if not token:
        return
    row = session.exec(select(AuthSession).where(AuthSession.token_hash == _hash(token))).first()
    if row is not None:
        row.revoked = True
        session.add(row)


NO_EXTERNAL_ACCOUNT = (
    "Your organisation account is not linked to an account here; ask an admin to add you "
    "(username = your e-mail address)."
)


def sign_in_external(
    session: Session, subject: str | None, email: str | None, now: datetime | None = None, *,
    browser_token: str | None = None,
) -> SignInResult:
    """Open a session for someone the identity provider (Streamlit's OIDC ``st.login``) vouched for.

    Single sign-on proves who someone is, not what they may do here, so the person must already have an
    active account: one whose ``meta["oidc_subject"]`` equals the provider's ``sub`` claim, or else whose
    username is their e-mail address (case-insensitive). Their role comes from that account. Nobody is
    created on the fly. ``browser_token`` is as for :func:`sign_in`.
    """
    now = now or utcnow()
    candidates = session.exec(select(User).where(User.is_active == True)).all()  # noqa: E712
    user = None
    if subject:
        user = next((u for u in candidates if (u.meta or {}).get("oidc_subject") == subject), None)
    if user is None and email:
        user = next((u for u in candidates if u.username.lower() == email.strip().lower()), None)
    if user is None:
        return SignInResult(None, NO_EXTERNAL_ACCOUNT)
    return _open_session(session, user.id, now, browser_token)
