"""Sign-in: hashed passwords, sessions that expire and can be revoked, back-off after failures."""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import Session, select

from medhelm_core.accounts import auth
from medhelm_core.accounts.users import add_user, disable_user, set_password
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import AuthSession, User, utcnow


def make_user(engine, name="doc", role="clinician", password="correct horse"):
    with transaction(engine) as s:
        add_user(s, name, role, password)


def sign_in(engine, name="doc", password="correct horse", now=None):
    with transaction(engine) as s:
        return auth.sign_in(s, name, password, now=now)


def resolve(engine, token, now=None):
    with transaction(engine) as s:
        return auth.resolve_session(s, token, now=now)


def test_passwords_are_stored_as_argon2_hashes_only(engine):
    make_user(engine)
    with Session(engine) as s:
        stored = s.exec(select(User.password_hash)).one()
    assert stored.startswith("$argon2id$") and "correct horse" not in stored


def test_a_session_token_resolves_to_the_user_and_only_its_hash_is_stored(engine):
    make_user(engine)
    result = sign_in(engine)
    who = resolve(engine, result.token)
    assert (who.username, who.role) == ("doc", "clinician")
    with Session(engine) as s:
        assert result.token not in s.exec(select(AuthSession.token_hash)).one()


def test_sessions_expire_and_idle_sessions_close(engine):
    make_user(engine)
    start = utcnow()
    token = sign_in(engine, now=start).token
    assert resolve(engine, token, now=start + timedelta(hours=1)) is not None
    assert resolve(engine, token, now=start + timedelta(hours=3, minutes=30)) is None  # idle > 2 h
    token = sign_in(engine, now=start).token
    for hours in range(1, 8):
        assert resolve(engine, token, now=start + timedelta(hours=hours)) is not None
    assert resolve(engine, token, now=start + auth.SESSION_LIFETIME + timedelta(seconds=1)) is None


def test_sign_out_disable_and_password_change_close_sessions(engine):
    make_user(engine)
    token = sign_in(engine).token
    with transaction(engine) as s:
        auth.sign_out(s, token)
    assert resolve(engine, token) is None
    token = sign_in(engine).token
    with transaction(engine) as s:
        set_password(s, "doc", "another password")
    assert resolve(engine, token) is None
    token = sign_in(engine, password="another password").token
    with transaction(engine) as s:
        disable_user(s, "doc")
    assert resolve(engine, token) is None
    assert sign_in(engine, password="another password").token is None


def test_repeated_failures_lock_the_account_for_a_growing_time(engine):
    make_user(engine)
    now = utcnow()
    for _ in range(auth.MAX_FAILURES):
        assert sign_in(engine, password="wrong", now=now).message == auth.WRONG_CREDENTIALS
    locked = sign_in(engine, now=now + timedelta(seconds=30))  # even the right password waits
    assert locked.token is None and locked.message == auth.LOCKED
    later = now + auth.lockout_for(auth.MAX_FAILURES) + timedelta(seconds=1)
    assert sign_in(engine, password="wrong", now=later).token is None
    with Session(engine) as s:
        user = s.exec(select(User)).one()
    assert user.failed_logins == auth.MAX_FAILURES + 1
    assert auth.lockout_for(auth.MAX_FAILURES + 1) == 2 * auth.lockout_for(auth.MAX_FAILURES)
    much_later = later + auth.MAX_LOCKOUT
    assert sign_in(engine, now=much_later).token is not None
    with Session(engine) as s:
        assert s.exec(select(User)).one().failed_logins == 0


def test_unknown_users_get_the_same_answer_as_wrong_passwords(engine):
    make_user(engine)
    assert sign_in(engine, name="nobody").message == sign_in(engine, password="nope").message
