"""The schema: migrations bring any database to head, and the domain's unique keys hold."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.migrate import current_revision, head_revision, require_current_schema, upgrade_database
from medhelm_core.db.models import Item, Rating
from medhelm_core.errors import DatabaseError
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import default_rubric
from medhelm_core.studies import get_or_create_study


def test_init_brings_an_empty_database_to_head_and_is_repeatable(database_url):
    engine = make_engine(database_url)
    with pytest.raises(DatabaseError, match="medhelm init"):
        require_current_schema(engine)
    assert upgrade_database(engine) == (None, head_revision())
    assert upgrade_database(engine) == (head_revision(), head_revision())
    require_current_schema(engine)
    engine.dispose()


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1


def _item(session, study, instance="i1"):
    item = Item(study_id=study.id, benchmark="b", instance_id=instance, model="m", input_text="q", output_text="a")
    session.add(item)
    session.flush()
    return item


def test_one_item_per_study_benchmark_instance_and_model(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        _item(s, study)
    with pytest.raises(IntegrityError):
        with Session(engine) as s, s.begin():
            _item(s, study)


def test_one_current_rating_per_item_rater_and_criterion(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        item = _item(s, study)
        rater = add_user(s, "doc", "clinician", None)
        sub, _ = record_rating(s, item=item, rater=rater, rubric=default_rubric(),
                               scores={"accuracy": 4, "completeness": 3, "clarity": 5})
    with pytest.raises(IntegrityError):
        with Session(engine) as s, s.begin():
            s.add(Rating(item_id=item.id, rater_id=rater.id, criterion="accuracy", score=2, submission_id=sub.id))


def test_foreign_keys_refuse_a_rating_of_a_missing_item(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        item = _item(s, study)
        rater = add_user(s, "doc", "clinician", None)
        sub, _ = record_rating(s, item=item, rater=rater, rubric=default_rubric(),
                               scores={"accuracy": 4, "completeness": 3, "clarity": 5})
    with pytest.raises(IntegrityError):
        with Session(engine) as s, s.begin():
            s.add(Rating(item_id=999999, rater_id=rater.id, criterion="clarity", score=2, submission_id=sub.id))


def test_times_are_stored_in_utc(engine):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
    with Session(engine) as s:
        created = s.get(type(study), study.id).created_at
    assert current_revision(engine) == head_revision()
    assert created.utcoffset() is None or created.utcoffset().total_seconds() == 0


def test_the_migrations_build_exactly_the_schema_the_models_describe(database_url):
    # A column or key added to models.py without its migration (or the other way round) fails here.
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlmodel import SQLModel

    import medhelm_core.db.models  # noqa: F401 - registers every table on SQLModel.metadata

    engine = make_engine(database_url)
    upgrade_database(engine)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": False})
        diff = compare_metadata(context, SQLModel.metadata)
    engine.dispose()
    assert diff == []


def test_downgrade_to_the_previous_revision_and_back(database_url):
    engine = make_engine(database_url)
    upgrade_database(engine)
    from alembic import command

    from medhelm_core.db.migrate import alembic_config

    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "-1")
    assert current_revision(engine) != head_revision()
    assert upgrade_database(engine)[1] == head_revision()
    engine.dispose()
