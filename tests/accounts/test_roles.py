"""One table says who may open which page: the navigation offers a role exactly the pages that the pages'
own server-side check lets it open, and every page file has an entry."""

from __future__ import annotations

import pytest
from conftest import REPO
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts.roles import PAGE_ROLES, may_open, pages_for
from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Role

PAGES = {p.stem for p in (REPO / "pages").glob("*.py") if p.name not in ("__init__.py", "common.py")}


def test_every_page_has_an_entry_in_the_role_table():
    assert set(PAGE_ROLES) == PAGES


def test_every_role_may_open_the_studies_and_rate_pages_and_only_researchers_and_admins_the_rest():
    for role in Role:
        assert may_open(role, "home") and may_open(role, "rate")
        assert may_open(role, "adjudicate") == (role in (Role.admin, Role.researcher, Role.adjudicator))
        for page in ("raters", "data", "metrics", "jury", "agreement"):
            assert may_open(role, page) == (role in (Role.admin, Role.researcher))
    assert not may_open("clinician", "no-such-page") and not may_open("nobody", "home")


@pytest.mark.parametrize("role", list(Role))
def test_the_navigation_offers_each_role_exactly_the_pages_it_may_open(sqlite_demo_engine, monkeypatch, role):
    with transaction(sqlite_demo_engine) as s:
        add_user(s, f"nav-{role}", role, f"{role}-password")
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=30).run()
    at.text_input[0].input(f"nav-{role}")
    at.text_input[1].input(f"{role}-password")
    at.button[0].click().run()
    assert not at.exception
    for page in sorted(PAGES):
        if page in pages_for(role):
            at.switch_page(f"pages/{page}.py")  # offered: no error (the page is not run here)
        else:
            with pytest.raises(ValueError, match="Could not find a navigation page"):
                at.switch_page(f"pages/{page}.py")
