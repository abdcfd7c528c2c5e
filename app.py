"""MedHELM Calibrate, the Streamlit entry point: sign-in and navigation only.

Run with ``medhelm demo`` or ``streamlit run app.py``; the database comes from MEDHELM_DATABASE_URL.
"""

from __future__ import annotations

import streamlit as st

from medhelm_core.accounts.roles import pages_for
from pages.common import current_user, sign_in, sign_in_with_identity_provider, sign_out, sso_configured

st.set_page_config(page_title="MedHELM Calibrate", layout="wide")

#: each page's title and icon in the navigation; who sees it is medhelm_core.accounts.roles.PAGE_ROLES
PAGES = {
    "home": ("Studies", ":material/home:"),
    "rate": ("Rate", ":material/rate_review:"),
    "raters": ("Raters", ":material/group:"),
    "data": ("Data", ":material/database:"),
    "metrics": ("Metrics", ":material/functions:"),
    "jury": ("Jury", ":material/gavel:"),
    "agreement": ("Agreement", ":material/insights:"),
    "adjudicate": ("Adjudicate", ":material/balance:"),
}


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
if who is None:
    st.navigation([st.Page(sign_in_form, title="Sign in", icon=":material/login:")], position="hidden").run()
else:
    pages = [st.Page(f"pages/{name}.py", title=PAGES[name][0], icon=PAGES[name][1], default=name == "home")
             for name in pages_for(who.role)]
    with st.sidebar:
        st.text(f"Signed in as {who.display_name} ({who.role})")
        if st.button("Sign out"):
            sign_out()
            st.rerun()
    st.navigation(pages).run()
