"""Admin (admins only): the accounts; add one, change its role, reset its password, disable or enable it, and
read the account history from the audit trail.

Every change goes through :mod:`medhelm_core.accounts.users`, the functions behind ``medhelm users``, in one
transaction with its audit event, attributed to the admin signed in. A password is typed into a password field
that the form clears when it is sent; it is never shown, stored in the clear or logged.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st
from sqlmodel import Session

from medhelm_core.accounts import users
from medhelm_core.db.audit import audit_events
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Role
from medhelm_core.errors import MedhelmError
from medhelm_core.text import markdown_literal
from pages.common import engine, in_stored_order, require_page

#: session-state key of the message saying what the last change did (shown after the rerun that redraws the table)
DONE_KEY = "admin_done"
ROLES = [r.value for r in Role]
#: how many account events the history shows, newest first
HISTORY_ROWS = 200

who = require_page("admin")
st.title("Admin")
eng = engine()
done = st.session_state.pop(DONE_KEY, None)
if done:
    st.success(markdown_literal(done))


def apply(change: Callable[[Session], object], message: str) -> None:
    """Make ``change`` in one transaction (with its audit event); say so after the rerun, or say why not."""
    try:
        with transaction(eng) as session:
            change(session)
    except MedhelmError as exc:
        st.error(markdown_literal(exc))
    else:
        st.session_state[DONE_KEY] = message
        st.rerun()


with Session(eng) as session:
    accounts = users.account_rows(session)

st.subheader("Accounts")
table = pd.DataFrame([a.__dict__ for a in accounts])
table["last_sign_in"] = [f"{a.last_sign_in:%Y-%m-%d %H:%M}" if a.last_sign_in else "never" for a in accounts]
st.dataframe(
    in_stored_order(table),
    hide_index=True,
    width="stretch",
    height=250,
    column_config={
        "username": "Username", "display_name": "Name", "role": "Role", "active": "Active",
        "has_password": st.column_config.CheckboxColumn("Can sign in", help="Has a password (or signs in by SSO)"),
        "locked": st.column_config.CheckboxColumn("Locked", help="Locked for a while after wrong passwords"),
        "last_sign_in": "Last sign-in (UTC)",
    },
)

add_column, change_column = st.columns(2, gap="large")
with add_column:
    st.subheader("Add an account")
    with st.form("admin_add", clear_on_submit=True):
        username = st.text_input("Username", help="2 to 150 letters, digits or _ . @ - (an e-mail address works; "
                                                  "single sign-on finds an account by it)")
        display_name = st.text_input("Name shown in the app (optional)")
        role = st.selectbox("Role", ROLES, index=ROLES.index(Role.clinician.value), key="admin_new_role")
        password = st.text_input("Password (optional)", type="password",
                                 help="8 to 256 characters, not a common password. Without one the account signs "
                                      "in only by single sign-on, or once a password is set.")
        add = st.form_submit_button("Add the account", type="primary")
    if add:
        apply(lambda s: users.add_user(s, username.strip(), role, password or None,
                                       display_name=display_name.strip(), actor=who),
              f"Added {role} {username.strip()}.")

with change_column:
    st.subheader("Change an account")
    by_name = {a.username: a for a in accounts}
    chosen = by_name[st.selectbox("Account", list(by_name), key="admin_account")]
    state = "active" if chosen.active else "disabled"
    st.caption(markdown_literal(f"{chosen.display_name or chosen.username}: {chosen.role}, {state}"
                                + ("" if chosen.has_password else ", no password")))

    role_column, button_column = st.columns([3, 2], vertical_alignment="bottom")
    new_role = role_column.selectbox("Role", ROLES, index=ROLES.index(chosen.role), key=f"admin_role_{chosen.username}")
    if button_column.button("Save the role", disabled=new_role == chosen.role):
        apply(lambda s: users.set_role(s, chosen.username, new_role, actor=who),
              f"{chosen.username} is now {new_role}.")

    with st.form("admin_password", clear_on_submit=True):
        new_password = st.text_input("New password", type="password",
                                     help="Their open sessions end; they sign in with this password next.")
        reset = st.form_submit_button("Reset the password")
    if reset:
        apply(lambda s: users.set_password(s, chosen.username, new_password, actor=who),
              f"New password set for {chosen.username}; their open sessions have ended.")

    if chosen.active:
        if st.button(f"Disable {chosen.username}", help="They cannot sign in and their open sessions end at once; "
                                                       "their ratings stay."):
            apply(lambda s: users.disable_user(s, chosen.username, actor=who),
                  f"Disabled {chosen.username}; their open sessions have ended.")
    elif st.button(f"Enable {chosen.username}", help="They can sign in again with their password."):
        apply(lambda s: users.enable_user(s, chosen.username, actor=who), f"Enabled {chosen.username}.")

st.subheader("Account history")
with Session(eng) as session:
    events = audit_events(session, actions=users.ACCOUNT_ACTIONS)[::-1][:HISTORY_ROWS]
if not events:
    st.caption("No account changes recorded yet.")
else:
    history = pd.DataFrame([{
        "at": e.at[:19].replace("T", " "), "by": e.actor, "action": e.action, "account": e.details.get("username"),
        "details": ", ".join(f"{k}: {v}" for k, v in e.details.items() if k not in ("username", "user_id")),
    } for e in events])
    st.dataframe(in_stored_order(history), hide_index=True, width="stretch")
    st.caption(f"The newest {HISTORY_ROWS} account changes from the audit trail (`medhelm audit export` has them all).")
