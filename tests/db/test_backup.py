"""`medhelm backup` / `medhelm restore`: a round trip loses nothing (every row of every table), on SQLite
and PostgreSQL; a restore checks the schema revision and will not overwrite data without --yes."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import MetaData, select, text
from sqlmodel import Session

from medhelm_core.accounts.auth import sign_in
from medhelm_core.accounts.users import add_user
from medhelm_core.cli import main
from medhelm_core.db import backup as backup_mod
from medhelm_core.db.backup import backup_database, backup_revision, restore_database
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.migrate import head_revision, upgrade_database
from medhelm_core.db.models import AuditEvent, Item, Rating, User
from medhelm_core.errors import BackupError, ValidationError
from medhelm_core.importers import import_paths
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import default_rubric
from medhelm_core.studies import get_or_create_study


def snapshot(engine) -> dict[str, list[tuple]]:
    """Every row of every table, in primary-key order (restore events aside, and the data versions' tokens,
    which a restore renews: see test_a_restore_renews_the_data_versions_tokens)."""
    meta = MetaData()
    meta.reflect(engine)
    rows = {}
    with engine.connect() as conn:
        for name, table in sorted(meta.tables.items()):
            query = select(table).order_by(*table.primary_key.columns)
            if name == "auditevent":
                query = query.where(table.c.action != "database.restored")
            if name == "dataversion":
                query = select(*(c for c in table.columns if c.name != "token")).order_by(*table.primary_key.columns)
            rows[name] = [tuple(r) for r in conn.execute(query)]
    return rows


def fill(engine, ratings_csv: Path) -> None:
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "mh")
        import_paths(s, study, [ratings_csv])
        add_user(s, "dr.lee", "clinician", "lee-password-1")
        add_user(s, "res", "researcher", "res-password-1")
        # the imported raters are named: by default assignment leaves recorded raters out
        clinicians = s.scalars(select(User.username).where(User.role == "clinician")).all()
        assign_balanced(s, study, overlap=2, usernames=clinicians)
        sign_in(s, "dr.lee", "lee-password-1")


def fill_light(engine) -> None:
    """A few rows in every kind of table, for the tests that are not about volume."""
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "small")
        s.add_all([Item(study_id=study.id, benchmark="b", instance_id=str(i), model="m", input_text="q",
                        output_text="a", meta={"n": i}) for i in range(3)])
        docs = [add_user(s, f"doc{i}", "clinician", "doc-password-1") for i in range(2)]
        assign_balanced(s, study, overlap=2)
        s.flush()
        for item in s.exec(select(Item)).scalars():
            record_rating(s, item=item, rater=docs[0], rubric=default_rubric(),
                          scores={"accuracy": 4, "completeness": 3, "clarity": 5})
        sign_in(s, "doc0", "doc-password-1")


@pytest.fixture
def filled(engine, medhelm_ratings_csv):
    if engine.url.get_backend_name() == "postgresql" and shutil.which("pg_dump") is None:
        pytest.skip("pg_dump not installed")
    fill(engine, medhelm_ratings_csv)
    return engine


def test_backup_and_restore_round_trip_loses_nothing(filled, tmp_path):
    engine = filled
    before = snapshot(engine)
    assert len(before["rating"]) == 396 and before["authsession"] and before["assignment"]
    info = backup_database(engine, tmp_path / "medhelm.backup")
    assert info.revision == head_revision() and info.bytes > 0
    assert backup_revision(tmp_path / "medhelm.backup") == (info.backend, head_revision())

    with transaction(engine) as s:  # the day after the backup: ratings lost, an account added
        s.exec(text("DELETE FROM rating"))
        add_user(s, "intruder", "admin", "intruder-pass")
    with pytest.raises(ValidationError, match="--yes"):
        restore_database(engine, tmp_path / "medhelm.backup")
    with Session(engine) as s:
        assert s.exec(select(Rating)).first() is None  # the refusal changed nothing

    restored = restore_database(engine, tmp_path / "medhelm.backup", overwrite=True)
    assert restored.revision == head_revision()
    # every row of every table as it was, the audit trail included (the restore's own event aside)
    assert snapshot(engine) == before
    with Session(engine) as s:
        last = s.scalars(select(AuditEvent).order_by(AuditEvent.id.desc())).first()
        assert last.action == "database.restored"
        assert s.exec(select(User).where(User.username == "intruder")).first() is None


def test_sqlite_backup_is_consistent_while_a_writer_is_mid_transaction(sqlite_engine, tmp_path, monkeypatch):
    # (the audit row of the backup is written after the copy, once the writer is done; not measured here)
    monkeypatch.setattr(backup_mod, "_audit", lambda *a: None)
    with transaction(sqlite_engine) as s:
        add_user(s, "committed", "clinician", None)
    writer = sqlite3.connect(sqlite_engine.url.database, timeout=1)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE user SET display_name = 'half-written' WHERE username = 'committed'")
        backup_database(sqlite_engine, tmp_path / "live.db")  # must not wait for the writer
    finally:
        writer.rollback()
        writer.close()
    with sqlite3.connect(tmp_path / "live.db") as conn:
        names = conn.execute("SELECT username, display_name FROM user").fetchall()
    assert names == [("committed", "committed")]


def test_restore_into_a_new_sqlite_file_needs_no_yes(sqlite_engine, tmp_path):
    fill_light(sqlite_engine)
    backup_database(sqlite_engine, tmp_path / "b.db")
    fresh = make_engine(f"sqlite:///{tmp_path / 'fresh' / 'new.db'}")
    try:
        restore_database(fresh, tmp_path / "b.db")
        assert snapshot(fresh) == snapshot(sqlite_engine) | {"auditevent": snapshot(fresh)["auditevent"]}
        assert len(snapshot(fresh)["auditevent"]) == len(snapshot(sqlite_engine)["auditevent"]) - 1  # no backup row
    finally:
        fresh.dispose()


def test_restore_refuses_an_unknown_revision_and_the_other_backend(sqlite_engine, tmp_path):
    backup_database(sqlite_engine, tmp_path / "b.db")
    with sqlite3.connect(tmp_path / "b.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(BackupError, match="9999.*does not know"):
        restore_database(sqlite_engine, tmp_path / "b.db", overwrite=True)
    (tmp_path / "junk.bin").write_bytes(b"not a backup at all")
    with pytest.raises(BackupError, match="neither"):
        restore_database(sqlite_engine, tmp_path / "junk.bin")
    pg = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    with pytest.raises(BackupError, match="is a sqlite backup"):
        restore_database(pg, _fresh_sqlite_backup(tmp_path))


def _fresh_sqlite_backup(tmp_path: Path) -> Path:
    eng = make_engine(f"sqlite:///{tmp_path / 'other.db'}")
    upgrade_database(eng)
    backup_database(eng, tmp_path / "other.backup")
    eng.dispose()
    return tmp_path / "other.backup"


def test_backup_never_overwrites_a_file(sqlite_engine, tmp_path):
    (tmp_path / "b.db").write_text("an older backup")
    with pytest.raises(BackupError, match="already exists"):
        backup_database(sqlite_engine, tmp_path / "b.db")
    assert (tmp_path / "b.db").read_text() == "an older backup"


def test_pg_password_travels_in_the_environment_not_the_command_line(monkeypatch, tmp_path):
    seen = {}

    def fake_run(args, **kwargs):
        seen["args"], seen["env"] = args, kwargs["env"]
        Path(next(a for a in args if a.startswith("--file=")).split("=", 1)[1]).write_bytes(b"PGDMP")
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(backup_mod, "_revision", lambda engine: head_revision())
    monkeypatch.setattr(backup_mod, "_audit", lambda *a: None)
    monkeypatch.setattr(backup_mod.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(backup_mod.subprocess, "run", fake_run)
    engine = make_engine("postgresql+psycopg://medhelm:s3cr%40t@db.example:5432/medhelm?options=-csearch_path%3Dt_x")
    backup_database(engine, tmp_path / "pg.dump")
    assert not any("s3cr" in a for a in seen["args"])
    assert seen["env"]["PGPASSWORD"] == "s3cr@t"
    assert "--dbname=postgresql://medhelm@db.example:5432/medhelm?options=-csearch_path%3Dt_x" in seen["args"]
    assert "--schema=t_x" in seen["args"]


def test_a_missing_pg_dump_gives_a_clear_message(monkeypatch, tmp_path):
    monkeypatch.setattr(backup_mod, "_revision", lambda engine: head_revision())
    monkeypatch.setattr(backup_mod.shutil, "which", lambda tool: None)
    with pytest.raises(BackupError, match="pg_dump is not installed"):
        backup_database(make_engine("postgresql+psycopg://u@localhost/db"), tmp_path / "x.dump")
    assert not (tmp_path / "x.dump").exists() and not list(tmp_path.iterdir())


def run_cli(capsys, url, *args):
    with pytest.raises(SystemExit) as exit_info:
        main(["--database-url", url, *args])
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def test_backup_and_restore_commands(sqlite_engine, tmp_path, capsys):
    fill_light(sqlite_engine)
    url = sqlite_engine.url.render_as_string(hide_password=False)
    before = snapshot(sqlite_engine)
    code, out, err = run_cli(capsys, url, "backup", str(tmp_path / "b.backup"))
    assert code == 0 and "backed up" in out, err
    code, _, err = run_cli(capsys, url, "restore", str(tmp_path / "b.backup"))
    assert code == 1 and err.startswith("error: the database holds") and len(err.splitlines()) == 1
    code, out, err = run_cli(capsys, url, "restore", str(tmp_path / "b.backup"), "--yes", "--json")
    assert code == 0, err
    assert f'"revision": "{head_revision()}"' in out
    assert snapshot(sqlite_engine) == before


def test_a_restore_renews_the_data_versions_tokens(sqlite_engine, medhelm_ratings_csv, tmp_path):
    """Restored counters go back to older versions, and later writes count up through versions the figures cache
    has seen for other data: a new token keeps those apart."""
    fill(sqlite_engine, medhelm_ratings_csv)

    def tokens() -> set[str]:
        with sqlite_engine.connect() as conn:
            return {row[0] for row in conn.execute(text("SELECT token FROM dataversion"))}

    before = tokens()
    backup_database(sqlite_engine, tmp_path / "medhelm.backup")
    restore_database(sqlite_engine, tmp_path / "medhelm.backup", overwrite=True)
    assert before and not (tokens() & before)
