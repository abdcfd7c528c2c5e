"""A restore while clinicians keep rating (#22 item 14), as the attack, on SQLite and PostgreSQL.

Writer threads keep recording new revisions of their ratings while ``restore_database`` runs. Afterwards the
database is the backup exactly, plus whatever was written after the restore on top of it: no row of the
replaced database survives, none of the backup's is missing, and every rater's revisions of an item run
1, 2, 3 ... without a gap. (Or, on PostgreSQL, the restore is refused with a message that says the database
is in use and nothing was restored, and the database is as it was.)"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections import defaultdict

import pytest
from sqlalchemy import MetaData, select
from sqlmodel import Session

from medhelm_core.accounts.users import add_user
from medhelm_core.db import backup as backup_mod
from medhelm_core.db.backup import backup_database, restore_database
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Item, Rating, RatingSubmission, User
from medhelm_core.errors import BackupError
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import default_rubric
from medhelm_core.studies import get_or_create_study

N_ITEMS, N_RATERS = 4, 4
APPENDED = ("ratingsubmission", "auditevent")  # the tables the writers add to after the restore
CURRENT = "rating"  # each rater's current scores: the writers' newest submission (checked apart)
COUNTERS = "dataversion"  # the figures' data versions: counted on by the writers, with a token renewed by the restore


def rows(engine) -> dict[str, set[str]]:
    meta = MetaData()
    meta.reflect(engine)
    with engine.connect() as conn:
        out = {}
        for name, table in meta.tables.items():
            query = select(table)
            if name == "auditevent":
                query = query.where(table.c.action.not_in(["database.restored", "database.backup"]))
            out[name] = {repr(tuple(r)) for r in conn.execute(query)}  # JSON columns hold dicts
    return out


def revisions(engine) -> dict[tuple, list[int]]:
    with Session(engine) as s:
        found = defaultdict(list)
        for sub in s.exec(select(RatingSubmission)).scalars():
            found[(sub.item_id, sub.rater_id, sub.retest)].append(sub.revision)
    return {key: sorted(revs) for key, revs in found.items()}


def gaps(engine) -> list[tuple]:
    return [(key, revs) for key, revs in revisions(engine).items() if revs != list(range(1, len(revs) + 1))]


def rate(engine, item_id: int, rater_id: int, n: int) -> None:
    with transaction(engine) as s:
        record_rating(s, item=s.get(Item, item_id), rater=s.get(User, rater_id), rubric=default_rubric(),
                      scores={"accuracy": 1 + n % 5, "completeness": 1 + (n + 1) % 5, "clarity": 3})


@pytest.fixture
def study(engine):
    if engine.url.get_backend_name() == "postgresql" and shutil.which("pg_restore") is None:
        pytest.skip("pg_restore not installed")
    with transaction(engine) as s:
        st, _ = get_or_create_study(s, "busy")
        items = [Item(study_id=st.id, benchmark="b", instance_id=str(i), model="m", input_text="q",
                      output_text="a") for i in range(N_ITEMS)]
        s.add_all(items)
        raters = [add_user(s, f"doc{i}", "clinician", None) for i in range(N_RATERS)]
        s.flush()
        pairs = [(item.id, rater.id) for item in items for rater in raters]
    for n in range(3):
        for item_id, rater_id in pairs:
            rate(engine, item_id, rater_id, n)
    return pairs


def test_restore_while_clinicians_rate_leaves_the_backup_and_no_revision_gap(engine, study, tmp_path):
    pairs = study
    backed_up = rows(engine)
    backup_database(engine, tmp_path / "before.backup")
    for n in range(3, 9):  # the day after the backup: three more revisions of everything
        for item_id, rater_id in pairs:
            rate(engine, item_id, rater_id, n)
    replaced = rows(engine)["ratingsubmission"] - backed_up["ratingsubmission"]
    assert replaced

    writers_engine = make_engine(engine.url.render_as_string(hide_password=False))  # the app's process
    stop = threading.Event()
    errors: list[str] = []
    written = [0]

    def writer(mine: list[tuple[int, int]]) -> None:
        n = 10
        while not stop.is_set():
            for item_id, rater_id in mine:
                n += 1
                try:
                    rate(writers_engine, item_id, rater_id, n)
                    written[0] += 1
                except Exception as exc:  # noqa: BLE001 - a refused write is retried, as the app's user would
                    errors.append(type(exc).__name__)
                    time.sleep(0.01)

    threads = [threading.Thread(target=writer, args=(pairs[k::N_RATERS],)) for k in range(N_RATERS)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        before_restore = written[0]
        try:
            restore_database(engine, tmp_path / "before.backup", overwrite=True)
            refused = None
        except BackupError as exc:
            refused = str(exc)
        time.sleep(0.5)  # writes after the restore go on top of it
    finally:
        stop.set()
        for t in threads:
            t.join()
        writers_engine.dispose()
    assert written[0] > before_restore  # the writers really were writing during the restore

    assert gaps(engine) == []
    now = rows(engine)
    if refused is not None:  # PostgreSQL may refuse while the database is in use: then nothing changed
        assert "in use" in refused and "nothing was restored" in refused
        assert replaced <= now["ratingsubmission"]
        return
    assert not (replaced & now["ratingsubmission"])  # nothing of the replaced database survives
    with Session(engine) as s:
        latest = {(sub.item_id, sub.rater_id): sub.id for sub in s.exec(
            select(RatingSubmission).order_by(RatingSubmission.revision)).scalars()}
        current = {(r.item_id, r.rater_id, r.submission_id) for r in s.exec(select(Rating)).scalars()}
    assert current == {(item, rater, sub) for (item, rater), sub in latest.items()}
    for name, table in backed_up.items():
        if name == CURRENT:
            continue
        if name == COUNTERS:  # no version the cache saw before the restore is seen again for other data
            assert table and not ({row.rsplit(",", 1)[1] for row in table}
                                  & {row.rsplit(",", 1)[1] for row in now[name]}), name
            continue
        if name in APPENDED:
            assert table <= now[name], name  # the backup, with later ratings on top
        else:
            assert now[name] == table, name


def test_a_restore_refused_while_a_session_holds_the_database_says_so_and_changes_nothing(engine, study, tmp_path,
                                                                                          monkeypatch):
    pairs = study
    backup_database(engine, tmp_path / "before.backup")
    for item_id, rater_id in pairs:
        rate(engine, item_id, rater_id, 7)
    before = rows(engine)
    monkeypatch.setattr(backup_mod, "RESTORE_LOCK_WAIT", 1)
    if engine.url.get_backend_name() == "sqlite":  # a writer mid-transaction (a long import, say)
        holder = sqlite3.connect(engine.url.database)
        holder.execute("BEGIN IMMEDIATE")
        release = holder.rollback
    else:  # a session that read the ratings and has not finished its transaction
        holder = engine.raw_connection()
        holder.cursor().execute("SELECT count(*) FROM ratingsubmission")
        release = holder.rollback
    try:
        started = time.monotonic()
        with pytest.raises(BackupError) as refused:
            restore_database(engine, tmp_path / "before.backup", overwrite=True)
        assert time.monotonic() - started < 30
    finally:
        release()
        holder.close()
    message = str(refused.value)
    assert message.startswith("the database is in use") and "nothing was restored" in message, message
    assert rows(engine) == before and gaps(engine) == []
