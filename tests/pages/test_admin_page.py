"""The Admin page (issue 19): an admin adds accounts, changes roles, resets passwords, disables and enables
accounts, each change audited as theirs; a disabled account's open session ends at once; the last admin and the
admin's own account are protected; passwords never reach the screen or the audit trail."""

from __future__ import annotations

import pytest
from argon2 import PasswordHasher
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts import auth, users
from medhelm_core.accounts.users import add_user
from medhelm_core.db.audit import audit_events
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import User
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "admin.py")
NEW_PASSWORD = "a long new passphrase"


@pytest.fixture
def admin_db(sqlite_engine, monkeypatch):
    monkeypatch.setattr(users, "_hasher", PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))
    users._dummy_hash.cache_clear()
    with transaction(sqlite_engine) as s:
        add_user(s, "boss", "admin", "boss-password", actor="cli")
        add_user(s, "dr.lee", "clinician", "lee-password", display_name="Dr Lee", actor="cli")
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_engine.url))
    yield sqlite_engine
    users._dummy_hash.cache_clear()


def token(engine, username, password):
    with transaction(engine) as s:
        return auth.sign_in(s, username, password).token


def open_page(engine) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.session_state[TOKEN_KEY] = token(engine, "boss", "boss-password")
    return at.run()


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def account(engine, name) -> User:
    with Session(engine) as s:
        return s.exec(select(User).where(User.username == name)).one()


def account_events(engine):
    with Session(engine) as s:
        return [(e.actor, e.action, e.details.get("username")) for e in audit_events(s, actions=users.ACCOUNT_ACTIONS)]


def test_an_admin_adds_an_account_that_can_sign_in_and_the_addition_is_audited(admin_db):
    at = open_page(admin_db)
    assert not at.exception
    assert list(at.dataframe[0].value["username"]) == ["boss", "dr.lee"]
    assert "password_hash" not in at.dataframe[0].value.columns
    form_inputs = {t.label: t for t in at.text_input}
    form_inputs["Username"].input("dr.new")
    form_inputs["Name shown in the app (optional)"].input("Dr New")
    at.selectbox(key="admin_new_role").select("adjudicator")
    form_inputs["Password (optional)"].input(NEW_PASSWORD)
    button(at, "Add the account").click().run()
    assert not at.exception and not at.error
    assert [s.value for s in at.success] == ["Added adjudicator dr.new."]
    assert "dr.new" in list(at.dataframe[0].value["username"])
    assert account(admin_db, "dr.new").role == "adjudicator"
    assert token(admin_db, "dr.new", NEW_PASSWORD) is not None
    assert account_events(admin_db)[-1] == ("boss", "user.added", "dr.new")
    assert not any(NEW_PASSWORD in str(v) for v in at.dataframe[1].value.to_numpy().ravel())


def test_a_weak_password_or_a_taken_username_is_refused_with_its_reason_and_nothing_is_written(admin_db):
    at = open_page(admin_db)
    inputs = {t.label: t for t in at.text_input}
    inputs["Username"].input("dr.weak")
    inputs["Password (optional)"].input("password123")
    button(at, "Add the account").click().run()
    assert [e.value for e in at.error] == ["this password is on a list of commonly used passwords: choose another"]
    inputs = {t.label: t for t in at.text_input}
    inputs["Username"].input("dr.lee")
    button(at, "Add the account").click().run()
    assert [e.value for e in at.error] == ["user 'dr.lee' already exists"]
    with Session(admin_db) as s:
        assert s.exec(select(User.username).where(User.username == "dr.weak")).first() is None
    assert [a for _, a, _ in account_events(admin_db)] == ["user.added", "user.added"]  # the fixture's two


def test_role_password_and_disabling_each_take_effect_at_once_and_are_audited_as_the_admin(admin_db):
    lee = token(admin_db, "dr.lee", "lee-password")
    at = open_page(admin_db)
    at.selectbox(key="admin_account").select("dr.lee").run()
    at.selectbox(key="admin_role_dr.lee").select("researcher").run()
    button(at, "Save the role").click().run()
    assert [s.value for s in at.success] == ["dr.lee is now researcher."]
    with transaction(admin_db) as s:
        assert auth.resolve_session(s, lee).role == "researcher"  # read afresh at their next page run

    next(t for t in at.text_input if t.label == "New password").input(NEW_PASSWORD)
    button(at, "Reset the password").click().run()
    assert not at.error
    with transaction(admin_db) as s:
        assert auth.resolve_session(s, lee) is None  # their open session ended with the old password
    lee = token(admin_db, "dr.lee", NEW_PASSWORD)
    assert token(admin_db, "dr.lee", "lee-password") is None

    button(at, "Disable dr.lee").click().run()
    assert [s.value for s in at.success] == ["Disabled dr.lee; their open sessions have ended."]
    with transaction(admin_db) as s:
        assert auth.resolve_session(s, lee) is None
    assert token(admin_db, "dr.lee", NEW_PASSWORD) is None
    button(at, "Enable dr.lee").click().run()
    assert token(admin_db, "dr.lee", NEW_PASSWORD) is not None

    assert account_events(admin_db)[2:] == [
        ("boss", "user.role_changed", "dr.lee"), ("boss", "user.password_changed", "dr.lee"),
        ("boss", "user.disabled", "dr.lee"), ("boss", "user.enabled", "dr.lee")]
    history = at.dataframe[1].value
    assert list(history["action"][:4]) == ["user.enabled", "user.disabled", "user.password_changed",
                                          "user.role_changed"]
    assert NEW_PASSWORD not in history.to_string()


def test_the_admin_cannot_disable_themselves_nor_demote_the_last_admin(admin_db):
    at = open_page(admin_db)
    at.selectbox(key="admin_account").select("boss").run()
    button(at, "Disable boss").click().run()
    assert [e.value for e in at.error] == ["you cannot disable your own account"]
    at.selectbox(key="admin_role_boss").select("researcher").run()
    button(at, "Save the role").click().run()
    assert [e.value for e in at.error] == ["'boss' is the last active admin: make another account admin first"]
    assert account(admin_db, "boss").role == "admin" and account(admin_db, "boss").is_active


def test_a_disabled_admins_click_changes_nothing(admin_db):
    with transaction(admin_db) as s:
        add_user(s, "boss2", "admin", "boss2-password", actor="cli")
    at = open_page(admin_db)
    at.selectbox(key="admin_account").select("dr.lee").run()
    with transaction(admin_db) as s:
        users.disable_user(s, "boss", actor="boss2")
    button(at, "Disable dr.lee").click().run()
    assert [w.value for w in at.warning] == ["Please sign in."]
    assert account(admin_db, "dr.lee").is_active
