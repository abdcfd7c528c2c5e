"""MedHELM Calibrate, the Streamlit entry point: sign-in and navigation only.

Run with ``medhelm demo`` or ``streamlit run serve.py`` (this app with the session cookie's routes, so a sign-in
survives reloads and new tabs); the database comes from MEDHELM_DATABASE_URL.
"""

from __future__ import annotations

import streamlit as st

from medhelm_core.accounts.roles import pages_for
from pages.common import (
    current_user,
    hand_session_to_browser,
    sign_in,
    sign_in_with_identity_provider,
    sign_out,
    sso_configured,
)

# An emoji favicon is drawn from a data: URL; a page's material icon as favicon would be fetched from Google's
# font server by every browser (nothing may be fetched from outside this server).
st.set_page_config(page_title="MedHELM Calibrate", page_icon="🩺", layout="wide")

#: each page's title and icon in the navigation; who sees it is medhelm_core.accounts.roles.PAGE_ROLES
PAGES = {
    "home": ("Studies", ":material/home:"),
    "rate": ("Rate", ":material/rate_review:"),
    "raters": ("Raters", ":material/group:"),
    "data": ("Data", ":material/database:"),
    "metrics": ("Metrics", ":material/functions:"),
    "jury": ("Jury", ":material/gavel:"),
    "agreement": ("Agreement", ":material/insights:"),
    "verdict": ("Verdict", ":material/verified:"),
    "models": ("Models", ":material/leaderboard:"),
    "review": ("Review", ":material/flag:"),
    "adjudicate": ("Adjudicate", ":material/balance:"),
    "admin": ("Admin", ":material/manage_accounts:"),
}


def url_path(page: str) -> str:
    """A page's address: its name, the home page's the root ("", so no other page can be mistaken for it)."""
    return "" if page == "home" else page


def sign_in_form() -> None:
    st.title("MedHELM Calibrate")
    st.caption("Calibrating an LLM jury against clinicians.")
    with st.form("sign_in"):
        username = st.text_input("Username")
        password = st.text_input("Password", type="password")
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted:
        refusal = sign_in(username, password)
        if refusal:
            st.error(refusal)
        else:
            st.rerun()
    if sso_configured():
        # Single sign-on through the organisation's identity provider (configured in secrets.toml [auth]).
        if st.user.is_logged_in:
            refusal = sign_in_with_identity_provider()
            if refusal:
                st.error(refusal)
                st.button("Sign out of the identity provider", on_click=st.logout)
            else:
                st.rerun()
        else:
            st.button("Sign in with your organisation", on_click=st.login)


who = current_user()
hand_session_to_browser()
if who is None:
    # The sign-in form answers at every page's address, so a reload, a bookmark or a deep link (/rate) keeps its
    # address and, once signed in, opens that page (a page is found again by its url path; the home page's is "").
    st.navigation([st.Page(sign_in_form, title="Sign in", url_path=url_path(name), default=name == "home")
                   for name in PAGES], position="hidden").run()
else:
    pages = [st.Page(f"pages/{name}.py", title=PAGES[name][0], icon=PAGES[name][1], url_path=url_path(name),
                     default=name == "home") for name in pages_for(who.role)]
    with st.sidebar:
        st.text(f"Signed in as {who.display_name} ({who.role})")
        if st.button("Sign out"):
            sign_out()
            st.rerun()
    st.navigation(pages).run()
