"""Sign-in, server-side sessions and back-off after repeated failures.

A session is a random token held by the browser session (Streamlit's session state) and a hash of it
stored in the database with an expiry. Every page run checks the token against the database, so an
expired, revoked or disabled account stops at once, in every app process. After
:data:`MAX_FAILURES` wrong passwords in a row an account is locked for a time that doubles with each
further failure (capped), which stops password guessing without locking a clinician out for the day.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlmodel import Session, select

from medhelm_core.accounts.users import verify_credentials
from medhelm_core.db.models import AuthSession, User, utcnow

SESSION_LIFETIME = timedelta(hours=8)
IDLE_TIMEOUT = timedelta(hours=2)
MAX_FAILURES = 5
BASE_LOCKOUT = timedelta(minutes=1)
MAX_LOCKOUT = timedelta(hours=1)


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
        return self.role in ("researcher", "admin")


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _aware(when: datetime | None) -> datetime | None:
    # SQLite returns naive datetimes even for timezone-aware columns; they were written in UTC.
    if when is not None and when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when


def lockout_for(failures: int) -> timedelta:
    """How long an account is locked after ``failures`` consecutive failures (zero below the limit)."""
    if failures < MAX_FAILURES:
        return timedelta(0)
    return min(BASE_LOCKOUT * 2 ** (failures - MAX_FAILURES), MAX_LOCKOUT)


@dataclass(frozen=True)
class SignInResult:
    """A session token on success; otherwise None and a message that is safe to show."""

    token: str | None
    message: str = ""


WRONG_CREDENTIALS = "Unknown username or wrong password."
LOCKED = "Too many failed attempts: please wait a few minutes and try again."


def sign_in(session: Session, username: str, password: str, now: datetime | None = None) -> SignInResult:
    """Check credentials and open a session; the token is kept client side only.

    A failure is returned, not raised, so that the caller's transaction commits the failure count. The
    message is the same for an unknown user, a wrong password or a disabled account; a locked account
    gets its own message (and the password is not even checked while locked).
    """
    now = now or utcnow()
    user = session.exec(select(User).where(User.username == username)).first()
    if user is not None and (_aware(user.locked_until) or now) > now:
        return SignInResult(None, LOCKED)
    verified = verify_credentials(session, username, password)
    if verified is None:
        if user is not None:
            user.failed_logins += 1
            wait = lockout_for(user.failed_logins)
            user.locked_until = now + wait if wait else None
            session.add(user)
        return SignInResult(None, WRONG_CREDENTIALS)
    verified.failed_logins, verified.locked_until = 0, None
    session.add(verified)
    token = secrets.token_urlsafe(32)
    session.add(AuthSession(token_hash=_hash(token), user_id=verified.id, created_at=now,
                            expires_at=now + SESSION_LIFETIME, last_seen_at=now))
    return SignInResult(token)


def resolve_session(session: Session, token: str | None, now: datetime | None = None) -> Principal | None:
    """The principal for ``token`` if its session is open, unexpired, not idle too long and the account
    is active; else None. Marks the session as seen."""
    if not token:
        return None
    now = now or utcnow()
    row = session.exec(select(AuthSession).where(AuthSession.token_hash == _hash(token))).first()
    if row is None or row.revoked:
        return None
    if _aware(row.expires_at) <= now or now - _aware(row.last_seen_at) > IDLE_TIMEOUT:
        return None
    user = session.get(User, row.user_id)
    if user is None or not user.is_active:
        return None
    row.last_seen_at = now
    session.add(row)
    return Principal(user.id, user.username, user.display_name or user.username, user.role)


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
    session: Session, subject: str | None, email: str | None, now: datetime | None = None
) -> SignInResult:
    """Open a session for someone the identity provider (Streamlit's OIDC ``st.login``) vouched for.

    Single sign-on proves who someone is, not what they may do here, so the person must already have an
    active account: one whose ``meta["oidc_subject"]`` equals the provider's ``sub`` claim, or else whose
    username is their e-mail address (case-insensitive). Their role comes from that account. Nobody is
    created on the fly.
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
    token = secrets.token_urlsafe(32)
    session.add(AuthSession(token_hash=_hash(token), user_id=user.id, created_at=now,
                            expires_at=now + SESSION_LIFETIME, last_seen_at=now))
    return SignInResult(token)
