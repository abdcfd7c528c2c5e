"""MedHELM Calibrate, the Streamlit entry point: sign-in and navigation only.

Run with ``medhelm demo`` or ``streamlit run app.py``; the database comes from MEDHELM_DATABASE_URL.
"""

from __future__ import annotations

import streamlit as st

from pages.common import current_user, sign_in, sign_in_with_identity_provider, sign_out, sso_configured

st.set_page_config(page_title="MedHELM Calibrate", layout="wide")


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
    pages = [st.Page("pages/home.py", title="Studies", icon=":material/home:", default=True)]
    if who.role in ("clinician", "researcher", "admin"):
        pages.append(st.Page("pages/rate.py", title="Rate", icon=":material/rate_review:"))
    if who.role in ("researcher", "admin"):
        pages.append(st.Page("pages/raters.py", title="Raters", icon=":material/group:"))
        pages.append(st.Page("pages/data.py", title="Data", icon=":material/database:"))
        pages.append(st.Page("pages/metrics.py", title="Metrics", icon=":material/functions:"))
        pages.append(st.Page("pages/jury.py", title="Jury", icon=":material/gavel:"))
        pages.append(st.Page("pages/agreement.py", title="Agreement", icon=":material/insights:"))
    if who.role in ("adjudicator", "researcher", "admin"):
        pages.append(st.Page("pages/adjudicate.py", title="Adjudicate", icon=":material/balance:"))
    with st.sidebar:
        st.text(f"Signed in as {who.display_name} ({who.role})")
        if st.button("Sign out"):
            sign_out()
            st.rerun()
    st.navigation(pages).run()
