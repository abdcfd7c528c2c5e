"""Sign-in under attack (issue 22): parallel guesses, lockout used against others, pool exhaustion, weak passwords.

Each test is written as the attack. Password checks are counted by a spy around argon2's ``verify`` with
cheap parameters (the stored hash carries them), so fifty guesses take a second rather than a minute; the
spy also sleeps a little, which widens the window in which parallel sign-ins race.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from argon2 import PasswordHasher
from sqlalchemy import event
from sqlmodel import Session, select

from medhelm_core.accounts import auth, users
from medhelm_core.accounts.users import add_user, set_password
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import User, utcnow
from medhelm_core.errors import ValidationError

PASSWORD = "correct horse battery"
GUESSES = 50


class SpyHasher:
    """argon2 with cheap parameters that records which hash each check was against and the thread's
    open connections at that moment."""

    def __init__(self, held_by_thread: Counter | None = None) -> None:
        self._real = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
        self._lock = threading.Lock()
        self.checked: Counter[str] = Counter()
        self.connections_held: list[int] = []
        self._held = held_by_thread

    def hash(self, password: str) -> str:
        return self._real.hash(password)

    def check_needs_rehash(self, hash_: str) -> bool:
        return False

    def verify(self, hash_: str, password: str) -> bool:
        with self._lock:
            self.checked[hash_] += 1
            if self._held is not None:
                self.connections_held.append(self._held[threading.get_ident()])
        time.sleep(0.02)
        return self._real.verify(hash_, password)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> SpyHasher:
    hasher = SpyHasher()
    monkeypatch.setattr(users, "_hasher", hasher)
    users._dummy_hash.cache_clear()
    yield hasher
    users._dummy_hash.cache_clear()


@pytest.fixture(autouse=True)
def fresh_client_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no failed attempts remembered for any client (the memory is per process)."""
    if hasattr(auth, "ClientThrottle"):
        monkeypatch.setattr(auth, "_clients", auth.ClientThrottle())


def _stored(engine, name: str = "doc") -> User:
    with Session(engine) as s:
        return s.exec(select(User).where(User.username == name)).one()


def _in_transaction(engine, name, password, client=None, now=None):
    with transaction(engine) as s:
        return auth.sign_in(s, name, password, now=now, **({"client": client} if client else {}))


def _with_engine(engine, name, password, client=None, now=None):
    return auth.sign_in(engine, name, password, now=now, client=client)


def _all_at_once(call, n: int = GUESSES) -> list:
    barrier = threading.Barrier(n)

    def one(i: int):
        barrier.wait()
        return call(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


@pytest.mark.parametrize("way", [_in_transaction, _with_engine], ids=["in-callers-transaction", "with-engine"])
def test_fifty_parallel_guesses_check_at_most_five_passwords(engine, spy, way):
    with transaction(engine) as s:
        add_user(s, "doc", "clinician", PASSWORD)
    stored_hash = _stored(engine).password_hash
    started = utcnow()

    results = _all_at_once(lambda i: way(engine, "doc", f"wrong guess {i}"))

    assert all(r.token is None for r in results)
    assert spy.checked[stored_hash] <= auth.MAX_FAILURES
    assert _stored(engine).failed_logins <= auth.MAX_FAILURES
    # the account is locked now: even the right password is refused, and not checked. Asked within the first
    # lockout (one minute from the fifth failure, which came after `started`): fifty password checks on a busy
    # machine can take longer than that, and the lock would have run out by the time of an unpinned attempt.
    assert way(engine, "doc", PASSWORD, now=started + auth.BASE_LOCKOUT / 2).token is None
    assert spy.checked[stored_hash] <= auth.MAX_FAILURES


def test_refusals_do_not_tell_a_locked_account_from_an_unknown_one(engine, spy):
    with transaction(engine) as s:
        add_user(s, "doc", "clinician", PASSWORD)
    for _ in range(auth.MAX_FAILURES):
        _in_transaction(engine, "doc", "wrong password")
    locked = _in_transaction(engine, "doc", PASSWORD)
    unknown = _in_transaction(engine, "nobody-here", PASSWORD)
    wrong = _in_transaction(engine, "doc", "wrong password")
    assert locked.token is None
    assert locked.message == unknown.message == wrong.message
    # and each costs one password check's time: a locked account is checked against a stand-in hash
    assert sum(spy.checked.values()) == auth.MAX_FAILURES + 3


def test_one_guess_an_hour_does_not_keep_an_account_locked(engine, spy):
    with transaction(engine) as s:
        add_user(s, "doc", "clinician", PASSWORD)
    start = utcnow()
    for _ in range(auth.MAX_FAILURES):
        _in_transaction(engine, "doc", "wrong password", now=start)
    # an attacker then guesses once an hour, for a day; the owner tries a minute after each guess
    for hour in range(1, 25):
        guess_at = start + timedelta(hours=hour)
        assert _in_transaction(engine, "doc", "wrong password", now=guess_at).token is None
        owner = _in_transaction(engine, "doc", PASSWORD, now=guess_at + timedelta(minutes=1))
        assert owner.token is not None, f"the owner was locked out at hour {hour}"
    assert auth.lockout_for(10 ** 6) <= auth.MAX_LOCKOUT


def test_a_client_that_fails_across_many_accounts_is_slowed(engine, spy):
    with transaction(engine) as s:
        for i in range(3):
            add_user(s, f"doc{i}", "clinician", PASSWORD)
    now = utcnow()
    attacker, nurse = "203.0.113.9", "198.51.100.4"
    # password spraying: one guess per account, never enough to lock any account
    names = [f"doc{i % 3}" if i % 2 else f"guessed-{i}" for i in range(60)]
    for name in names:
        _in_transaction(engine, name, "Winter2026!", client=attacker, now=now)
    checked = sum(spy.checked.values())
    assert checked <= auth.CLIENT_FREE_FAILURES < len(names)
    assert all(_stored(engine, f"doc{i}").failed_logins < auth.MAX_FAILURES for i in range(3))
    # another client is not slowed, and the accounts are not locked for it
    assert _in_transaction(engine, "doc1", PASSWORD, client=nurse, now=now).token is not None
    # the attacker's own right password waits too, until the back-off has passed
    assert _in_transaction(engine, "doc2", PASSWORD, client=attacker, now=now).token is None
    later = now + auth.MAX_CLIENT_WAIT + timedelta(seconds=1)
    assert _in_transaction(engine, "doc2", PASSWORD, client=attacker, now=later).token is not None


def test_fifty_simultaneous_sign_ins_hold_no_connection_while_hashing(engine, monkeypatch):
    held: Counter[int] = Counter()
    event.listen(engine, "checkout", lambda *a: held.update([threading.get_ident()]))
    event.listen(engine, "checkin", lambda *a: held.subtract([threading.get_ident()]))
    hasher = SpyHasher(held)
    monkeypatch.setattr(users, "_hasher", hasher)
    users._dummy_hash.cache_clear()
    with transaction(engine) as s:
        for i in range(GUESSES):
            add_user(s, f"doc{i}", "clinician", PASSWORD)
    try:
        results = _all_at_once(lambda i: auth.sign_in(engine, f"doc{i}", PASSWORD))
    finally:
        users._dummy_hash.cache_clear()
    assert all(r.token is not None for r in results)
    assert len(hasher.connections_held) == GUESSES and set(hasher.connections_held) == {0}


@pytest.mark.parametrize("weak", [
    " " * 8, "\x00" * 8, "\t" * 8, "password1\x00", "line\nbreak!", "password", "12345678", "Password",
    "x" * 257,
], ids=["8-spaces", "8-NULs", "8-tabs", "trailing-NUL", "newline", "common", "common-digits",
        "common-any-case", "too-long"])
def test_weak_or_malformed_passwords_are_refused(engine, spy, weak):
    with transaction(engine) as s, pytest.raises(ValidationError):
        add_user(s, "doc", "clinician", weak)
    with transaction(engine) as s:
        add_user(s, "doc", "clinician", PASSWORD)
    with transaction(engine) as s, pytest.raises(ValidationError):
        set_password(s, "doc", weak)


@pytest.mark.parametrize("fine", [
    "  leading and trailing spaces  ", "x" * 64, "Pässwörter ünd Ümläute", "a b c d e f", "😀" * 8,
])
def test_long_unicode_and_spaced_passwords_are_kept_as_typed(engine, spy, fine):
    with transaction(engine) as s:
        add_user(s, "doc", "clinician", fine)
    assert _in_transaction(engine, "doc", fine).token is not None
    assert _in_transaction(engine, "doc", fine + "!").token is None
    if fine != fine.strip():  # no silent trimming, at either end
        assert _in_transaction(engine, "doc", fine.strip()).token is None
