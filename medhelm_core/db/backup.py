"""Back up and restore the whole database, while the app keeps running.

SQLite: the sqlite3 online backup API copies a consistent snapshot page by page (WAL content included),
without stopping writers for more than a moment; the backup is itself an SQLite file. PostgreSQL:
``pg_dump --format=custom`` (a consistent snapshot), restored by ``psql --single-transaction`` from the script
``pg_restore --clean`` makes (all or nothing). The connection string goes to the tools as a libpq URL *without*
the password, which travels in ``PGPASSWORD``, so it never shows in ``ps``.

A restore while the app is in use is atomic with respect to its writers. On SQLite the backup API copies
the whole file in one step under the database's write lock, and a rating takes that lock before it reads the
revision it writes (:func:`medhelm_core.db.engine.hold_write_lock`), so it lands wholly before the restore
or wholly on top of it. On PostgreSQL, ``pg_restore --clean`` alone drops the tables one by one and deadlocks
with a session that holds one and waits for another; the restore therefore first takes every table of the
schema at once (retrying until :data:`RESTORE_LOCK_WAIT` runs out), so sessions queue behind it and then see
the restored tables. A database that stays busy is refused with a message saying so, and nothing is
restored.

A restore checks the backup's schema revision (one this version knows, or refused) and refuses to replace
a database that holds data unless asked to (``medhelm restore --yes``).
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy import MetaData, func, select
from sqlalchemy.engine import URL, Engine, make_url

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.data_versions import renew_tokens
from medhelm_core.db.engine import transaction
from medhelm_core.db.migrate import MIGRATIONS_DIR, current_revision, head_revision
from medhelm_core.errors import BackupError, DatabaseError, ValidationError

SQLITE_MAGIC = b"SQLite format 3\x00"
PGDUMP_MAGIC = b"PGDMP"
PG_TOOL_TIMEOUT = 3600
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6  # sqlite3 result codes, as the backup's progress callback gets them
#: how long a restore keeps trying to take every table from the sessions using them (seconds)
RESTORE_LOCK_WAIT = 60
IN_USE = ("the database is in use: {why}, so nothing was restored and the database is as it was; stop the app "
          "and jury runs, or run the restore again when it is quieter")
_HELD = "other sessions (the app, a jury run, another command) held {what} for {wait} s"
# Every table of the schema in one LOCK, retried in short tries: waiting long on one table while holding the
# others is what deadlocks with a session that holds that table and wants one of ours.
_LOCK_EVERY_TABLE = """\
SET lock_timeout = '200ms';
DO $medhelm$
DECLARE
  tables text;
  deadline timestamptz := clock_timestamp() + interval '{wait} seconds';
BEGIN
  SELECT string_agg(format('%I.%I', schemaname, tablename), ', ') INTO tables
    FROM pg_catalog.pg_tables WHERE schemaname = current_schema();
  IF tables IS NULL THEN RETURN; END IF;
  LOOP
    BEGIN
      EXECUTE 'LOCK TABLE ' || tables || ' IN ACCESS EXCLUSIVE MODE';
      RETURN;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
      IF clock_timestamp() > deadline THEN
        RAISE EXCEPTION 'medhelm-restore: database in use' USING ERRCODE = 'lock_not_available';
      END IF;
      PERFORM pg_sleep(0.05 + random() * 0.1);
    END;
  END LOOP;
END
$medhelm$;
"""


@dataclass(frozen=True)
class BackupInfo:
    """What a backup or restore did."""

    path: str
    backend: str
    revision: str | None
    bytes: int


def backup_database(engine: Engine, out: Path, *, actor: Actor = "cli") -> BackupInfo:
    """Write a consistent backup of ``engine``'s database to ``out`` (refused if ``out`` exists).

    The backup is recorded in the audit trail afterwards (so the event itself is not in the file).

    Examples
    --------
    >>> backup_database(make_engine("sqlite:///medhelm.db"), Path("medhelm-2026-12-01.db"))  # doctest: +SKIP
    """
    out = Path(out)
    if out.exists():
        raise BackupError(f"{out} already exists; choose a new file name for the backup")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    tmp.unlink(missing_ok=True)
    revision = _revision(engine)
    try:
        if _backend(engine) == "sqlite":
            with closing(_sqlite_connect(_sqlite_path(engine))) as source, closing(sqlite3.connect(tmp)) as target:
                source.backup(target)
        else:
            _run_pg_tool("pg_dump", engine, ["--format=custom", "--no-owner", "--no-privileges", f"--file={tmp}",
                                              *_pg_schema_args(engine)])
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    info = BackupInfo(str(out), _backend(engine), revision, out.stat().st_size)
    _audit(engine, "database.backup", actor, info)
    return info


def backup_revision(path: Path) -> tuple[str, str | None]:
    """The backend (``sqlite`` or ``postgresql``) and schema revision a backup file was made at."""
    path = Path(path)
    if not path.is_file():
        raise BackupError(f"{path}: no such backup file")
    with path.open("rb") as fh:
        head = fh.read(16)
    if head.startswith(SQLITE_MAGIC):
        try:
            with closing(_sqlite_connect(path)) as conn:
                row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.DatabaseError:
            return "sqlite", None
        return "sqlite", row[0] if row else None
    if head.startswith(PGDUMP_MAGIC):
        listing = _tool_output(["pg_restore", "--data-only", "--table=alembic_version", "--file=-", str(path)])
        match = re.search(r"COPY \S*alembic_version \(version_num\) FROM stdin;\n([^\n\\]+)\n", listing)
        return "postgresql", match.group(1).strip() if match else None
    raise BackupError(f"{path} is neither an SQLite backup nor a pg_dump custom-format archive")


def database_rows(engine: Engine) -> int:
    """How many rows the database's tables hold (alembic's bookkeeping aside); 0 for a new database."""
    meta = MetaData()
    meta.reflect(engine)
    with engine.connect() as conn:
        return sum(
            conn.execute(select(func.count()).select_from(table)).scalar_one()
            for name, table in meta.tables.items()
            if name != "alembic_version"
        )


def restore_database(engine: Engine, source: Path, *, overwrite: bool = False, actor: Actor = "cli") -> BackupInfo:
    """Replace ``engine``'s database with the backup in ``source``.

    Refuses a backup of the other backend, one made at a schema revision this version does not know (a
    newer release), and, unless ``overwrite``, a target database that holds any rows. A backup of an
    older revision is restored as it is; ``medhelm init`` then upgrades it. The restore is recorded in
    the restored database's audit trail (the trail of what happened after the backup is gone with it).
    """
    source = Path(source)
    backend, revision = backup_revision(source)
    if backend != _backend(engine):
        raise BackupError(f"{source} is a {backend} backup; this database is {_backend(engine)}")
    if revision is None:
        raise BackupError(f"{source} holds no MedHELM schema revision (not a backup of a MedHELM database?)")
    known = {rev.revision for rev in ScriptDirectory(str(MIGRATIONS_DIR)).walk_revisions()}
    if revision not in known:
        raise BackupError(
            f"{source} is at schema revision {revision}, which this version does not know "
            f"(newest known: {head_revision()}): restore it with the release that made it"
        )
    try:
        rows = database_rows(engine)
    except Exception as exc:  # noqa: BLE001 - unreachable server, unreadable file
        raise DatabaseError(f"cannot open the database to restore into: {exc}") from exc
    if rows and not overwrite:
        raise ValidationError(
            f"the database holds {rows} rows; restoring replaces all of them: pass --yes to go ahead"
        )
    engine.dispose()  # our pooled connections must not hold the old file or old tables open
    if backend == "sqlite":
        _restore_sqlite(source, _sqlite_path(engine))
    else:
        _restore_postgresql(engine, source)
    engine.dispose()
    info = BackupInfo(str(source), backend, current_revision(engine), source.stat().st_size)
    if info.revision == head_revision():  # an older schema has no counters yet (the upgrade starts them afresh)
        with engine.begin() as connection:
            renew_tokens(connection)
    _audit(engine, "database.restored", actor, info)
    return info


class _StillBusy(Exception):
    """Raised from the backup's progress callback to give up on a database that stays locked."""


def _restore_sqlite(source: Path, target_path: Path) -> None:
    target_path.parent.mkdir(parents=True, exist_ok=True)

    def give_up_when_busy(status: int, _remaining: int, _total: int) -> None:
        # Python retries a busy step for ever; one step has already waited the whole busy timeout
        if status in (_SQLITE_BUSY, _SQLITE_LOCKED):
            raise _StillBusy

    # The backup API in reverse, in ONE step (pages=-1): the step holds the live database's write lock from
    # the first page to the last, so other connections see the old database or the restored one, never a mix,
    # and WAL stays coherent; a writer waits for the lock (see the module's docstring).
    with closing(_sqlite_connect(source)) as src, \
            closing(sqlite3.connect(target_path, timeout=RESTORE_LOCK_WAIT)) as dst:
        try:
            src.backup(dst, pages=-1, progress=give_up_when_busy)
        except _StillBusy:
            raise BackupError(IN_USE.format(why=_HELD.format(what="it", wait=RESTORE_LOCK_WAIT))) from None
        except sqlite3.Error as exc:
            raise BackupError(f"cannot restore into {target_path}: {exc}; nothing was restored") from None


def _restore_postgresql(engine: Engine, source: Path) -> None:
    """``source`` restored in one transaction that first takes every table (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="medhelm-restore-") as tmp:  # 0700: the script holds the data
        script = Path(tmp) / "restore.sql"
        # the whole script first: psql would commit a script that pg_restore broke off half-way
        _tool_output(["pg_restore", "--clean", "--if-exists", "--no-owner", "--no-privileges", "--exit-on-error",
                      f"--file={script}", str(source)])
        lock = Path(tmp) / "lock.sql"
        lock.write_text(_LOCK_EVERY_TABLE.replace("{wait}", str(RESTORE_LOCK_WAIT)), encoding="utf-8")
        try:
            _run_pg_tool("psql", engine, ["--no-psqlrc", "--quiet", "--single-transaction",
                                          "--set=ON_ERROR_STOP=1", f"--file={lock}", f"--file={script}"])
        except BackupError as exc:
            message = str(exc)
            if "medhelm-restore: database in use" in message or "lock timeout" in message:
                raise BackupError(IN_USE.format(why=_HELD.format(what="its tables", wait=RESTORE_LOCK_WAIT))) from None
            if "deadlock detected" in message:
                raise BackupError(IN_USE.format(why="another session deadlocked with the restore")) from None
            raise BackupError(f"{message}; nothing was restored (the restore is one transaction)") from None


def _audit(engine: Engine, action: str, actor: Actor, info: BackupInfo) -> None:
    if info.revision != head_revision():  # an older schema has no audit table yet
        return
    with transaction(engine) as session:
        record_event(session, action, actor=actor, path=str(Path(info.path).resolve()), revision=info.revision,
                     bytes=info.bytes)


def _backend(engine: Engine) -> str:
    name = engine.url.get_backend_name()
    if name not in ("sqlite", "postgresql"):
        raise BackupError(f"backups support SQLite and PostgreSQL, not {name}")
    return name


def _revision(engine: Engine) -> str | None:
    try:
        return current_revision(engine)
    except Exception as exc:  # noqa: BLE001 - the message says what failed
        raise DatabaseError(f"cannot open the database: {exc}") from exc


def _sqlite_path(engine: Engine) -> Path:
    database = engine.url.database
    if not database or database == ":memory:":
        raise BackupError("an in-memory SQLite database cannot be backed up or restored")
    return Path(database).expanduser()


def _sqlite_connect(path: Path) -> sqlite3.Connection:
    if not Path(path).is_file():
        raise BackupError(f"{path}: no such SQLite database")
    return sqlite3.connect(path, timeout=30)


def _libpq(engine: Engine) -> tuple[str, dict[str, str]]:
    """A libpq URL without the password, and the environment that carries the password."""
    url = make_url(engine.url.render_as_string(hide_password=False))
    env = {**os.environ}
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    # URL.set(password=None) keeps the password; build the URL afresh without it
    plain = URL.create("postgresql", username=url.username, host=url.host, port=url.port, database=url.database,
                       query=url.query)
    return plain.render_as_string(hide_password=False), env


def _pg_schema_args(engine: Engine) -> list[str]:
    # A URL that pins search_path (``options=-csearch_path=x``) names the one schema MedHELM lives in.
    options = engine.url.query.get("options", "")
    if isinstance(options, tuple):
        options = " ".join(options)
    match = re.search(r"-c\s*search_path\s*=\s*([A-Za-z_][A-Za-z0-9_]*)", options)
    return [f"--schema={match.group(1)}"] if match else []


def _run_pg_tool(tool: str, engine: Engine, args: list[str]) -> None:
    url, env = _libpq(engine)
    _tool_output([tool, f"--dbname={url}", *args], env=env)


def _tool_output(command: list[str], env: dict[str, str] | None = None) -> str:
    tool = command[0]
    executable = shutil.which(tool)
    if executable is None:
        raise BackupError(
            f"{tool} is not installed: install the PostgreSQL client tools of your server's major version "
            "(Debian/Ubuntu: apt-get install postgresql-client)"
        )
    try:
        done = subprocess.run([executable, *command[1:]], capture_output=True, text=True, env=env,
                              timeout=PG_TOOL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise BackupError(f"{tool} did not finish within {PG_TOOL_TIMEOUT} s") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        # the first ERROR says what went wrong; the lines after it ("Command was: ...", CONTEXT) only where
        errors = [line for line in lines if "ERROR:" in line or "FATAL:" in line]
        said = (errors or lines[-1:] or [f"exit code {done.returncode}"])[0]
        raise BackupError(f"{tool} failed: {said.strip()}")
    return done.stdout

