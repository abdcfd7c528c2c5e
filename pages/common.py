"""What every page shares: the database engine, the signed-in user, and the role check.

The role is checked on the server side by every page through :func:`require_role`, not by hiding links.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import streamlit as st
from sqlalchemy.engine import Engine

from medhelm_core.db import shared_engine
from medhelm_core.errors import MedhelmError
from medhelm_core.models import User
from medhelm_core.schema import require_current_schema
from medhelm_core.settings import database_url

SESSION_LIFETIME = timedelta(hours=8)


@dataclass(frozen=True)
class SignedIn:
    """The signed-in account as kept in the Streamlit session (no password material)."""

    user_id: int
    username: str
    display_name: str
    role: str
    signed_in_at: datetime


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


def sign_in(user: User) -> None:
    """Remember ``user`` as signed in for this browser session."""
    st.session_state["signed_in"] = SignedIn(
        user_id=user.id,
        username=user.username,
        display_name=user.display_name or user.username,
        role=user.role,
        signed_in_at=datetime.now(UTC),
    )


def sign_out() -> None:
    """Forget the signed-in user."""
    st.session_state.pop("signed_in", None)


def current_user() -> SignedIn | None:
    """The signed-in user, or None when nobody is signed in or the session has expired."""
    who: SignedIn | None = st.session_state.get("signed_in")
    if who is not None and datetime.now(UTC) - who.signed_in_at > SESSION_LIFETIME:
        sign_out()
        return None
    return who


def require_role(*roles: str) -> SignedIn:
    """The signed-in user if their role is one of ``roles``; otherwise the page stops here."""
    who = current_user()
    if who is None:
        st.warning("Please sign in.")
        st.stop()
    if who.role not in roles:
        st.error("Your account cannot open this page.")
        st.stop()
    return who
