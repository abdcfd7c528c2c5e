"""Where the database lives, read once from the environment.

The URL comes from ``--database-url`` (passed in by the CLI), else ``MEDHELM_DATABASE_URL``, else an SQLite
file in the user's data folder, so that the app works with no configuration at all.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

DATABASE_URL_ENV = "MEDHELM_DATABASE_URL"
APP_NAME = "medhelm-calibrate"


def default_database_path() -> Path:
    """The SQLite file used when no URL is configured: ``<user data dir>/medhelm.db``."""
    return platformdirs.user_data_path(APP_NAME, appauthor=False) / "medhelm.db"


def database_url(explicit: str | None = None) -> str:
    """Resolve the database URL: an explicit value, then the environment, then the default file.

    Parameters
    ----------
    explicit
        A URL given on the command line; wins over the environment.

    Returns
    -------
    str
        An SQLAlchemy URL such as ``sqlite:////home/me/.local/share/medhelm-calibrate/medhelm.db`` or
        ``postgresql+psycopg://user@host/db``.
    """
    url = explicit or os.environ.get(DATABASE_URL_ENV)
    if url:
        return normalise_url(url)
    path = default_database_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def normalise_url(url: str) -> str:
    """Make plain ``postgresql://`` URLs use psycopg 3, the driver we install."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url
