"""Every page checks the role itself, on the server: run each page script directly, as a crafted request
would, signed out and as every role it must refuse. Nothing of the study's data may be drawn."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts import auth
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.demo import seed_demo
from pages.common import TOKEN_KEY

ROLES = ("admin", "researcher", "clinician", "adjudicator")
#: who may open each page; every other role (and nobody signed in) is refused
ALLOWED = {
    "home.py": set(ROLES),
    "rate.py": set(ROLES),
    "raters.py": {"admin", "researcher"},
    "data.py": {"admin", "researcher"},
    "metrics.py": {"admin", "researcher"},
    "jury.py": {"admin", "researcher"},
    "agreement.py": {"admin", "researcher"},
    "verdict.py": {"admin", "researcher"},
    "adjudicate.py": {"admin", "researcher", "adjudicator"},
    "review.py": {"admin", "researcher"},
    "models.py": {"admin", "researcher"},
    "admin.py": {"admin"},
}


def test_every_page_is_listed_here():
    pages = {p.name for p in (REPO / "pages").glob("*.py") if p.name not in ("__init__.py", "common.py")}
    assert pages == set(ALLOWED), "add the new page to ALLOWED with the roles that may open it"


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    engine_path: Path = tmp_path_factory.mktemp("security") / "app.db"
    from medhelm_core.db.engine import make_engine

    engine = make_engine(f"sqlite:///{engine_path}")
    seed_demo(engine)
    with transaction(engine) as s:
        for role in ROLES:
            add_user(s, f"sec-{role}", role, f"{role}-password")
    with transaction(engine) as s:
        issued = {role: auth.sign_in(s, f"sec-{role}", f"{role}-password").token for role in ROLES}
    yield str(engine.url), issued
    engine.dispose()


CASES = [(page, role) for page in ALLOWED for role in (None, *ROLES) if role not in ALLOWED[page]]


@pytest.mark.parametrize(("page", "role"), CASES, ids=[f"{p}-{r or 'signed-out'}" for p, r in CASES])
def test_pages_refuse_who_may_not_open_them(tokens, monkeypatch, page, role):
    url, issued = tokens
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    at = AppTest.from_file(str(REPO / "pages" / page), default_timeout=30)
    if role is not None:
        at.session_state[TOKEN_KEY] = issued[role]
    at.run()
    assert not at.exception
    shown = [e.value for e in at.error] + [w.value for w in at.warning]
    assert shown == (["Please sign in."] if role is None else ["Your account cannot open this page."])
    assert not at.text and not at.dataframe and not at.selectbox and not at.table
