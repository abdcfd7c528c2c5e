"""Where the database lives and how much one import may read, read once from the environment.

The URL comes from ``--database-url`` (passed in by the CLI), else ``MEDHELM_DATABASE_URL``, else an SQLite
file in the user's data folder, so that the app works with no configuration at all. The import caps come
from ``--max-rows``/``--max-bytes``, else ``MEDHELM_IMPORT_MAX_ROWS``/``MEDHELM_IMPORT_MAX_BYTES``, else
:data:`DEFAULT_IMPORT_MAX_ROWS` and :data:`DEFAULT_IMPORT_MAX_BYTES`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from medhelm_core.errors import ValidationError

DATABASE_URL_ENV = "MEDHELM_DATABASE_URL"
APP_NAME = "medhelm-calibrate"
IMPORT_MAX_ROWS_ENV = "MEDHELM_IMPORT_MAX_ROWS"
IMPORT_MAX_BYTES_ENV = "MEDHELM_IMPORT_MAX_BYTES"
#: An import holds every row in memory until it is all checked (so that it can be all-or-nothing); these
#: caps keep a mistaken or hostile file (a Parquet file that decompresses to gigabytes) from exhausting the
#: app's memory. 100,000 rows and 100 MB cover a MedHELM study many times over; a researcher raises them.
DEFAULT_IMPORT_MAX_ROWS = 100_000
DEFAULT_IMPORT_MAX_BYTES = 100 * 2**20
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


@dataclass(frozen=True)
class ImportLimits:
    """The most rows and bytes (decoded, as held in memory) that one import may read over all its files."""

    max_rows: int = DEFAULT_IMPORT_MAX_ROWS
    max_bytes: int = DEFAULT_IMPORT_MAX_BYTES


def parse_size(text: str | int, what: str = "size") -> int:
    """A byte count from ``"500000"``, ``"200MB"``, ``"1.5G"`` (K, M, G are powers of 1024, as Streamlit's).

    Examples
    --------
    >>> parse_size("200MB"), parse_size("64k"), parse_size(1000)
    (209715200, 65536, 1000)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _SIZE_RE.match(str(text))
        if match is None:
            raise ValidationError(f"{what}: {text!r} is not a size such as 500000, 200MB or 2GB")
        value = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if value <= 0:
        raise ValidationError(f"{what}: {text!r} must be more than zero")
    return value


def import_limits(max_rows: int | None = None, max_bytes: int | str | None = None) -> ImportLimits:
    """The caps of one import: explicit values (the CLI's options), then the environment, then the defaults.

    Examples
    --------
    >>> import_limits(max_rows=10, max_bytes="1MB")
    ImportLimits(max_rows=10, max_bytes=1048576)
    """
    rows_text = max_rows if max_rows is not None else os.environ.get(IMPORT_MAX_ROWS_ENV)
    bytes_text = max_bytes if max_bytes is not None else os.environ.get(IMPORT_MAX_BYTES_ENV)
    rows = DEFAULT_IMPORT_MAX_ROWS
    if rows_text is not None and str(rows_text).strip():
        try:
            rows = int(str(rows_text).strip().replace("_", "").replace(",", ""))
        except ValueError:
            raise ValidationError(f"{IMPORT_MAX_ROWS_ENV} / --max-rows: {rows_text!r} is not a whole number") from None
        if rows <= 0:
            raise ValidationError(f"{IMPORT_MAX_ROWS_ENV} / --max-rows: {rows_text!r} must be more than zero")
    size = DEFAULT_IMPORT_MAX_BYTES
    if bytes_text is not None and str(bytes_text).strip():
        size = parse_size(bytes_text, f"{IMPORT_MAX_BYTES_ENV} / --max-bytes")
    return ImportLimits(max_rows=rows, max_bytes=size)


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


APP_WORKER_ENV = "MEDHELM_APP_WORKER"


def app_worker_enabled(url: str, value: str | None = None) -> bool:
    """Whether the web app runs a job worker in its own process: ``MEDHELM_APP_WORKER`` = ``auto`` (the default:
    on for SQLite, so ``medhelm demo`` stays one command; off for PostgreSQL, where ``medhelm worker`` processes
    take the jobs), ``on`` or ``off``.

    Examples
    --------
    >>> app_worker_enabled("sqlite:///medhelm.db", ""), app_worker_enabled("postgresql+psycopg://db/m", "")
    (True, False)
    >>> app_worker_enabled("postgresql+psycopg://db/m", "on")
    True
    """
    text = (os.environ.get(APP_WORKER_ENV, "") if value is None else value).strip().lower() or "auto"
    if text in ("1", "on", "true", "yes"):
        return True
    if text in ("0", "off", "false", "no"):
        return False
    if text != "auto":
        raise ValidationError(f"{APP_WORKER_ENV}: {text!r} is not auto, on or off")
    return url.startswith("sqlite")
