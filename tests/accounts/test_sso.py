"""Single sign-on maps the identity provider's person to an existing account; nobody is created."""

from __future__ import annotations

from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts import auth
from medhelm_core.accounts.users import add_user, disable_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import User


def test_the_subject_claim_or_the_email_finds_the_account_and_its_role(engine):
    with transaction(engine) as s:
        add_user(s, "Dr.Lee@hospital.org", "clinician", None)
        linked = add_user(s, "researcher1", "researcher", None)
        linked.meta = {"oidc_subject": "sub-123"}
        s.add(linked)
    with transaction(engine) as s:
        by_email = auth.sign_in_external(s, "unknown-sub", "dr.lee@HOSPITAL.org")
        by_subject = auth.sign_in_external(s, "sub-123", "other@hospital.org")
    with transaction(engine) as s:
        assert auth.resolve_session(s, by_email.token).role == "clinician"
        assert auth.resolve_session(s, by_subject.token).username == "researcher1"


def test_strangers_and_disabled_accounts_are_refused_and_nothing_is_created(engine):
    with transaction(engine) as s:
        add_user(s, "gone@hospital.org", "clinician", None)
        disable_user(s, "gone@hospital.org")
    with transaction(engine) as s:
        assert auth.sign_in_external(s, "x", "stranger@hospital.org").message == auth.NO_EXTERNAL_ACCOUNT
        assert auth.sign_in_external(s, None, "gone@hospital.org").token is None
        assert auth.sign_in_external(s, None, None).token is None
    with Session(engine) as s:
        assert len(s.exec(select(User)).all()) == 1


def test_the_sso_button_is_hidden_without_configuration(sqlite_engine, monkeypatch):
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_engine.url))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=30).run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Sign in"]
