"""What every page shares: the database engine, the signed-in user, and the role check.

The browser session keeps only a random session token; who it belongs to, their role and whether the
session is still open are read from the database on every page run (:func:`medhelm_core.accounts.auth.resolve_session`),
so an expired or revoked session or a disabled account stops at once, and the role check in
:func:`require_role` happens on the server for every page, not by hiding links.
"""

from __future__ import annotations

import streamlit as st
from sqlalchemy.engine import Engine

from medhelm_core.accounts import auth
from medhelm_core.accounts.auth import Principal
from medhelm_core.db.engine import shared_engine, transaction
from medhelm_core.db.migrate import require_current_schema
from medhelm_core.errors import MedhelmError
from medhelm_core.settings import database_url

TOKEN_KEY = "session_token"


@st.cache_resource(show_spinner=False)
def _engine(url: str) -> Engine:
    engine = shared_engine(url)
    require_current_schema(engine)
    return engine


def engine() -> Engine:
    """The app's engine; stops the page with a clear message if the database is not ready."""
    try:
        return _engine(database_url())
    except MedhelmError as exc:
        st.error(f"The database is not ready: {exc}")
        st.stop()
        raise  # unreachable; st.stop raises


def sign_in(username: str, password: str) -> str | None:
    """Try to sign in; returns None on success, else the message to show."""
    with transaction(engine()) as session:
        result = auth.sign_in(session, username.strip(), password)
    if result.token is None:
        return result.message
    st.session_state[TOKEN_KEY] = result.token
    return None


def sso_configured() -> bool:
    """True when .streamlit/secrets.toml has an [auth] section (Streamlit's OIDC sign-in)."""
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all
        return False


def sign_in_with_identity_provider() -> str | None:
    """After ``st.login`` came back: map the provider's identity to our account; None on success."""
    with transaction(engine()) as session:
        result = auth.sign_in_external(session, st.user.get("sub"), st.user.get("email"))
    if result.token is None:
        return result.message
    st.session_state[TOKEN_KEY] = result.token
    return None


def sign_out() -> None:
    """Close the session on the server and forget its token."""
    token = st.session_state.pop(TOKEN_KEY, None)
    with transaction(engine()) as session:
        auth.sign_out(session, token)
    if sso_configured() and st.user.is_logged_in:
        st.logout()


def current_user() -> Principal | None:
    """The signed-in user, or None when nobody is signed in or the session is no longer open."""
    token = st.session_state.get(TOKEN_KEY)
    if token is None:
        return None
    with transaction(engine()) as session:
        who = auth.resolve_session(session, token)
    if who is None:
        st.session_state.pop(TOKEN_KEY, None)
    return who


def require_role(*roles: str) -> Principal:
    """The signed-in user if their role is one of ``roles``; otherwise the page stops here."""
    who = current_user()
    if who is None:
        st.warning("Please sign in.")
        st.stop()
    if who.role not in roles:
        st.error("Your account cannot open this page.")
        st.stop()
    return who


def show_item_texts(input_text: str, output_text: str, reference_text: str | None, *,
                    output_label: str = "Response", height: int = 260) -> None:
    """The request, the response and (folded) the reference, each as plain text in a scrolling box.

    st.text draws characters, never markdown or HTML, so nothing a model wrote can render or run.
    """
    st.markdown("**Request**")
    with st.container(height=height, border=True):
        st.text(input_text)
    st.markdown(f"**{output_label}**")
    with st.container(height=height, border=True):
        st.text(output_text)
    if reference_text is not None:
        with st.expander("Reference answer", expanded=False):
            st.text(reference_text)
