"""Accounts: create, list, disable, and check a password.

Passwords are hashed with argon2id (argon2-cffi's defaults); the plain text is never stored or logged.
"""

from __future__ import annotations

import re
from functools import lru_cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlmodel import Session, select

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import AuthSession, Role, User
from medhelm_core.errors import NotFoundError, ValidationError

_hasher = PasswordHasher()
USERNAME_RE = re.compile(r"^[A-Za-z0-9_.@-]{2,150}$")
MIN_PASSWORD_LENGTH = 8


def hash_password(password: str) -> str:
    """An argon2id hash of ``password``, refusing passwords shorter than 8 characters."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValidationError(f"a password needs at least {MIN_PASSWORD_LENGTH} characters")
    return _hasher.hash(password)


def parse_role(role: str) -> Role:
    """The :class:`Role` named ``role``, or a message listing the roles."""
    try:
        return Role(role)
    except ValueError:
        raise ValidationError(
            f"unknown role {role!r}; roles are: {', '.join(r.value for r in Role)}"
        ) from None


def get_user(session: Session, username: str) -> User:
    """The account called ``username``."""
    user = session.exec(select(User).where(User.username == username)).first()
    if user is None:
        raise NotFoundError(f"no user named {username!r}")
    return user


def add_user(
    session: Session,
    username: str,
    role: str,
    password: str | None,
    *,
    display_name: str = "",
    actor: Actor = "cli",
) -> User:
    """Create an account; refuses a taken username or a malformed one. Audited as done by ``actor``."""
    if not USERNAME_RE.match(username):
        raise ValidationError(
            f"username {username!r} must be 2 to 150 letters, digits or _ . @ - (no spaces)"
        )
    if session.exec(select(User).where(User.username == username)).first() is not None:
        raise ValidationError(f"user {username!r} already exists")
    user = User(
        username=username,
        display_name=display_name or username,
        role=parse_role(role).value,
        password_hash=hash_password(password) if password is not None else None,
    )
    session.add(user)
    session.flush()
    record_event(session, "user.added", actor=actor, username=user.username, user_id=user.id, role=user.role,
                 has_password=user.password_hash is not None)
    return user


def set_password(session: Session, username: str, password: str, *, actor: Actor = "cli") -> User:
    """Replace a user's password (audited as done by ``actor``; the password itself never is)."""
    user = get_user(session, username)
    user.password_hash = hash_password(password)
    user.failed_logins, user.locked_until = 0, None
    session.add(user)
    closed = revoke_user_sessions(session, user.id)
    record_event(session, "user.password_changed", actor=actor, username=user.username, user_id=user.id,
                 sessions_closed=closed)
    return user


def disable_user(session: Session, username: str, *, actor: Actor = "cli") -> User:
    """Disable an account: it can no longer sign in; its ratings stay. Audited as done by ``actor``."""
    user = get_user(session, username)
    user.is_active = False
    session.add(user)
    closed = revoke_user_sessions(session, user.id)
    record_event(session, "user.disabled", actor=actor, username=user.username, user_id=user.id,
                 sessions_closed=closed)
    return user


def revoke_user_sessions(session: Session, user_id: int) -> int:
    """Close every open session of a user (when disabled or their password changes)."""
    rows = session.exec(
        select(AuthSession).where(AuthSession.user_id == user_id, AuthSession.revoked == False)  # noqa: E712
    ).all()
    for row in rows:
        row.revoked = True
        session.add(row)
    return len(rows)


def list_users(session: Session) -> list[User]:
    """All accounts, by username."""
    return list(session.exec(select(User).order_by(User.username)).all())


def verify_credentials(session: Session, username: str, password: str) -> User | None:
    """The active user whose password matches, else None (the same answer for every failure).

    A hash is still computed for unknown users so that timing does not reveal which usernames exist.
    """
    user = session.exec(select(User).where(User.username == username)).first()
    if user is None or not user.password_hash:
        try:
            _hasher.verify(_dummy_hash(), password)
        except VerificationError:
            pass
        return None
    try:
        _hasher.verify(user.password_hash, password)
    except (VerificationError, InvalidHashError):
        return None
    if not user.is_active:
        return None
    if _hasher.check_needs_rehash(user.password_hash):
        user.password_hash = _hasher.hash(password)
        session.add(user)
    return user


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    return _hasher.hash("not-a-real-password")
