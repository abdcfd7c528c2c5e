"""Accounts: create, list, change the role of, disable or enable, and check a password.

Every change is audited as done by its ``actor`` (the CLI or the admin signed in on the Admin page), in the
transaction that makes it. An account is never deleted (its ratings and audit trail refer to it), and the last
active admin can be neither disabled nor given another role, so someone can always manage the accounts.

Passwords are hashed with argon2id (argon2-cffi's defaults); the plain text is never stored or logged.
What a password must be follows NIST SP 800-63B: at least 8 characters, up to 256 (NIST asks for at
least 64), any printable character or space, kept exactly as typed (never trimmed), and not on a list
of commonly used passwords. ``common_passwords.txt.gz`` is the 8,354 entries of 8 characters or more
from Django's ``django/contrib/auth/common-passwords.txt.gz`` (Django 5.2.19, BSD-3-Clause; the list is
Royce Williams's 20,000 most common passwords), lower-cased.
"""

from __future__ import annotations

import gzip
import os
import re
import threading
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from importlib.resources import files

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import AuditAction, AuthSession, Role, User
from medhelm_core.errors import NotFoundError, ValidationError

_hasher = PasswordHasher()
USERNAME_RE = re.compile(r"^[A-Za-z0-9_.@-]{2,150}$")
MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 256
#: argon2id takes 64 MiB and a core for a good part of a second per check: at most this many run at once,
#: so fifty simultaneous sign-ins queue for a slot instead of taking 3 GB and every core.
HASHING_SLOTS = max(2, os.cpu_count() or 2)
_hashing = threading.BoundedSemaphore(HASHING_SLOTS)
# Unicode categories refused in a password: control characters (NUL, tab, line breaks, ...) and lone
# surrogates. Both are invisible or mangled by a form, a terminal or a database driver.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cs"})


@lru_cache(maxsize=1)
def _common_passwords() -> frozenset[str]:
    data = files("medhelm_core.accounts").joinpath("common_passwords.txt.gz").read_bytes()
    return frozenset(gzip.decompress(data).decode().split("\n"))


def check_password_rules(password: str) -> None:
    """Refuse a password that NIST SP 800-63B would: too short or long, all white space, with a control
    character, or on the list of common passwords (in any letter case). Nothing is trimmed.

    Examples
    --------
    >>> check_password_rules("correct horse battery")
    >>> check_password_rules(" " * 8)
    Traceback (most recent call last):
    ...
    medhelm_core.errors.ValidationError: a password cannot be only spaces
    """
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValidationError(f"a password needs at least {MIN_PASSWORD_LENGTH} characters")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise ValidationError(f"a password can have at most {MAX_PASSWORD_LENGTH} characters")
    if any(unicodedata.category(c) in _REFUSED_CATEGORIES for c in password):
        raise ValidationError("a password cannot hold control characters (such as NUL, tab or a line break)")
    if password.isspace():
        raise ValidationError("a password cannot be only spaces")
    if password.lower() in _common_passwords():
        raise ValidationError("this password is on a list of commonly used passwords: choose another")


def hash_password(password: str) -> str:
    """An argon2id hash of ``password``, once it passes :func:`check_password_rules`."""
    check_password_rules(password)
    with _hashing:
        return _hasher.hash(password)


def password_matches(password_hash: str | None, password: str) -> bool:
    """True when ``password`` matches ``password_hash``.

    Without a hash (an unknown user, a locked or disabled account) the password is checked against a
    stand-in hash and the answer is False: every refusal takes the time of one check, so timing does not
    tell which usernames exist or which accounts are locked.
    """
    with _hashing:
        try:
            _hasher.verify(password_hash or _dummy_hash(), password)
        except (VerificationError, InvalidHashError):
            return False
    return password_hash is not None


def rehashed(password_hash: str, password: str) -> str | None:
    """A new hash of a just-verified ``password`` when argon2's parameters have changed since, else None."""
    if not _hasher.check_needs_rehash(password_hash):
        return None
    with _hashing:
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
    record_event(session, AuditAction.user_added, actor=actor, username=user.username, user_id=user.id, role=user.role,
                 has_password=user.password_hash is not None)
    return user


def set_password(session: Session, username: str, password: str, *, actor: Actor = "cli") -> User:
    """Replace a user's password (audited as done by ``actor``; the password itself never is)."""
    user = get_user(session, username)
    user.password_hash = hash_password(password)
    user.failed_logins, user.locked_until = 0, None
    session.add(user)
    closed = revoke_user_sessions(session, user.id)
    record_event(session, AuditAction.user_password_changed, actor=actor, username=user.username, user_id=user.id,
                 sessions_closed=closed)
    return user


def _actor_id(actor: Actor) -> int | None:
    """The account id of ``actor`` when it is an account or a signed-in principal."""
    return getattr(actor, "user_id", None) if not isinstance(actor, User) else actor.id


def _keep_an_active_admin(session: Session, user: User) -> None:
    """Refuse to take away the last active admin (disabled or given another role): nobody could manage accounts."""
    if user.role != Role.admin.value or not user.is_active:
        return
    others = session.exec(select(User.id).where(User.role == Role.admin.value, User.is_active == True,  # noqa: E712
                                                User.id != user.id)).first()
    if others is None:
        raise ValidationError(f"{user.username!r} is the last active admin: make another account admin first")


def set_role(session: Session, username: str, role: str, *, actor: Actor = "cli") -> User:
    """Give an account another role (it applies at the account's next page run, as roles are read afresh).
    Audited as done by ``actor`` with the old and the new role; the same role again changes nothing."""
    user = get_user(session, username)
    new_role = parse_role(role).value
    if new_role == user.role:
        return user
    if new_role != Role.admin.value:
        _keep_an_active_admin(session, user)
    old_role, user.role = user.role, new_role
    session.add(user)
    record_event(session, AuditAction.user_role_changed, actor=actor, username=user.username, user_id=user.id,
                 old_role=old_role, role=new_role)
    return user


def enable_user(session: Session, username: str, *, actor: Actor = "cli") -> User:
    """Let a disabled account sign in again (with its password as it was). Audited as done by ``actor``."""
    user = get_user(session, username)
    if user.is_active:
        return user
    user.is_active = True
    user.failed_logins, user.locked_until = 0, None
    session.add(user)
    record_event(session, AuditAction.user_enabled, actor=actor, username=user.username, user_id=user.id)
    return user


def disable_user(session: Session, username: str, *, actor: Actor = "cli") -> User:
    """Disable an account: it can no longer sign in and its open sessions end at once; its ratings stay.
    Nobody disables their own account, nor the last active admin. Audited as done by ``actor``."""
    user = get_user(session, username)
    if _actor_id(actor) == user.id:
        raise ValidationError("you cannot disable your own account")
    _keep_an_active_admin(session, user)
    user.is_active = False
    session.add(user)
    closed = revoke_user_sessions(session, user.id)
    record_event(session, AuditAction.user_disabled, actor=actor, username=user.username, user_id=user.id,
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


#: the audit actions of account changes (the Admin page's history)
ACCOUNT_ACTIONS = (AuditAction.user_added, AuditAction.user_role_changed, AuditAction.user_password_changed,
                   AuditAction.user_disabled, AuditAction.user_enabled)


@dataclass(frozen=True)
class AccountRow:
    """One account as the Admin page lists it: never its password hash, only whether it has one."""

    username: str
    display_name: str
    role: str
    active: bool
    has_password: bool
    locked: bool
    last_sign_in: datetime | None


def account_rows(session: Session, now: datetime | None = None) -> list[AccountRow]:
    """Every account by username, with whether it can sign in, is locked after failed sign-ins, and when it
    last signed in (the start of its newest session)."""
    now = now or datetime.now(UTC)
    last = dict(session.exec(select(AuthSession.user_id, func.max(AuthSession.created_at))
                             .group_by(AuthSession.user_id)).all())
    rows = []
    for user in list_users(session):
        locked_until = _aware(user.locked_until)
        seen = _aware(last.get(user.id))
        rows.append(AccountRow(user.username, user.display_name, user.role, user.is_active,
                               user.password_hash is not None, locked_until is not None and locked_until > now, seen))
    return rows


def _aware(when: datetime | None) -> datetime | None:
    # SQLite returns naive datetimes; they were written in UTC.
    return when.replace(tzinfo=UTC) if when is not None and when.tzinfo is None else when


def verify_credentials(session: Session, username: str, password: str) -> User | None:
    """The active user whose password matches, else None (the same answer for every failure).

    A plain check, with no back-off and no session: sign-in goes through
    :func:`medhelm_core.accounts.auth.sign_in`, which counts failures.
    """
    user = session.exec(select(User).where(User.username == username)).first()
    if not password_matches(user.password_hash if user is not None else None, password):
        return None
    if not user.is_active:
        return None
    new_hash = rehashed(user.password_hash, password)
    if new_hash is not None:
        user.password_hash = new_hash
        session.add(user)
    return user


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    return _hasher.hash("not-a-real-password")
