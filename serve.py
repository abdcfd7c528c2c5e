"""The web server of MedHELM Calibrate: ``streamlit run serve.py`` (what ``medhelm demo`` runs, and a deployment).

It serves the Streamlit app (``app.py``) with the session cookie's middleware and routes
(:mod:`medhelm_core.accounts.session_cookie`), so that a sign-in survives reloads, bookmarks and new tabs.
``streamlit run app.py`` serves the same app without them: each browser tab then signs in on its own.

On the embedded SQLite database the server also starts the app's own job worker, once per process
(:mod:`medhelm_core.jobs.app_worker`), so jury runs, metric batches and reports queued from the pages are worked
with no other process; on PostgreSQL ``medhelm worker`` processes do it (``MEDHELM_APP_WORKER=on`` to have the app
work jobs there too). ``streamlit run app.py`` starts no worker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.starlette import App

from medhelm_core.accounts.session_cookie import session_middleware, session_routes
from medhelm_core.db.engine import shared_engine
from medhelm_core.jobs.app_worker import app_worker_lifespan
from medhelm_core.settings import database_url
from medhelm_core.tuning import keep_imports_out_of_collections

#: what the pages import that is heavy (pandas and Arrow, the agreement engine, Altair), imported when the server
#: starts so that their objects are frozen out of the cycle collections before any page run
PAGE_IMPORTS = ("medhelm_core.figures.cache", "pages.common", "altair")

# app.py builds the navigation with st.navigation. Beside a folder named pages/, Streamlit otherwise takes the app
# for an old-style multipage app until st.navigation first runs, so the first visitor of a fresh server who opens
# a deep link (/rate) would run that page's file directly and see every file of pages/ listed as a page.
PagesManager.uses_pages_directory = False


def _engine():  # noqa: ANN202 - the app's Engine, resolved when a request needs it
    return shared_engine(database_url())


@asynccontextmanager
async def _lifespan(server: App) -> AsyncIterator[None]:
    """The server's life, with the app's own job worker (on SQLite): it may resume a jury run before anyone opens a
    page, so the judges' keys kept as root-level secrets go into the environment first, as the Jury page does.
    Before that, with no session yet, the pages' imports are frozen (their first page run would freeze that run)."""
    keep_imports_out_of_collections(PAGE_IMPORTS)
    try:
        st.secrets.load_if_toml_exists()
    except Exception:  # noqa: BLE001 - a malformed secrets file: keys then come from the environment only
        pass
    async with app_worker_lifespan(server):
        yield


app = App("app.py", routes=session_routes(_engine), middleware=session_middleware(), lifespan=_lifespan)
