"""The MedHELM validation study gets its texts: the prompts and outputs the clinicians rated, no references."""

from __future__ import annotations

import csv

import pytest
from conftest import REPO
from sqlmodel import Session, select
from support.helpers import table_counts

from medhelm_core.accounts.auth import Principal
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, User
from medhelm_core.demo import MEDHELM_STUDY, MEDHELM_TEXTS
from medhelm_core.errors import ValidationError
from medhelm_core.importers import import_paths
from medhelm_core.rating import queue, rater_item
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.studies import get_or_create_study, get_study

SHARED_TEXTS = REPO.parent / "shared" / "data" / "medhelm_validation" / "item_texts.csv"


def texts_by_key() -> dict[tuple[str, str, str], tuple[str, str]]:
    with MEDHELM_TEXTS.open(encoding="utf-8", newline="") as handle:
        return {(r["dataset_name"], r["instance_id"], r["model_key"]): (r["question"], r["answer"])
                for r in csv.DictReader(handle)}


def import_ratings(engine, ratings, texts=None, study="v"):
    with transaction(engine) as s:
        target, _ = get_or_create_study(s, study)
        return import_paths(s, target, [ratings], "medhelm-ratings", texts=texts)


def stored_items(engine) -> dict[tuple[str, str, str], Item]:
    with Session(engine) as s:
        return {(i.benchmark, i.instance_id, i.model): i for i in s.exec(select(Item)).all()}


def test_the_bundled_texts_are_the_shared_ones():
    if not SHARED_TEXTS.is_file():
        pytest.skip("../shared/data/medhelm_validation is not here (a clean clone)")
    assert MEDHELM_TEXTS.read_bytes() == SHARED_TEXTS.read_bytes()


def test_ratings_with_their_texts_give_every_item_its_request_and_response_and_no_reference(engine,
                                                                                          medhelm_ratings_csv):
    report = import_ratings(engine, medhelm_ratings_csv, MEDHELM_TEXTS)
    assert (report.items_created, report.skipped) == (74, {})
    expected = texts_by_key()
    items = stored_items(engine)
    assert set(items) == set(expected)
    for key, item in items.items():
        assert (item.input_text, item.output_text) == expected[key]
        assert item.reference_text is None and item.meta["text_available"] is True
    before = table_counts(engine)
    again = import_ratings(engine, medhelm_ratings_csv, MEDHELM_TEXTS)
    assert (again.items_unchanged, again.ratings_unchanged, again.verdicts_unchanged) == (74, 132, 74)
    assert table_counts(engine) == before


def test_texts_come_to_items_rated_without_them_and_a_ratings_file_alone_keeps_them(sqlite_engine,
                                                                                   medhelm_ratings_csv):
    import_ratings(sqlite_engine, medhelm_ratings_csv)  # as `medhelm demo` seeded before the texts were bundled
    assert all(not i.input_text and i.meta["text_available"] is False for i in stored_items(sqlite_engine).values())
    filled = import_ratings(sqlite_engine, medhelm_ratings_csv, MEDHELM_TEXTS)
    assert (filled.items_updated, filled.ratings_unchanged, filled.verdicts_unchanged) == (74, 132, 74)
    alone = import_ratings(sqlite_engine, medhelm_ratings_csv)
    assert (alone.items_unchanged, alone.items_updated) == (74, 0)
    expected = texts_by_key()
    assert {k: (i.input_text, i.output_text) for k, i in stored_items(sqlite_engine).items()} == expected


def test_a_texts_file_is_checked_like_any_other(sqlite_engine, medhelm_ratings_csv, tmp_path):
    rows = list(csv.reader(MEDHELM_TEXTS.open(encoding="utf-8", newline="")))
    twice = tmp_path / "twice.csv"
    with twice.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows)
    last = twice.read_bytes().count(b"\n") + 1  # texts hold line breaks: a row starts after every earlier line
    with twice.open("a", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerow(rows[1])
    error = refused_import_with_texts(sqlite_engine, medhelm_ratings_csv, twice)
    assert (error.path, error.line, error.field) == (str(twice), last, "instance_id")
    assert "('aci_bench', 'id100', 'google_gemini-1.5-pro-001') appears twice (first at line 2)" in str(error)
    no_answer = tmp_path / "no_answer.csv"
    no_answer.write_text("dataset_name,instance_id,model_key,question\nmedi_qa,id1,m,q\n", encoding="utf-8")
    assert "missing column(s) answer" in str(refused_import_with_texts(sqlite_engine, medhelm_ratings_csv, no_answer))
    with pytest.raises(ValidationError, match="a texts file goes with a medhelm-ratings file"), \
            transaction(sqlite_engine) as s:
        import_paths(s, get_or_create_study(s, "x")[0], [REPO / "annotations" / "demo" / "items.jsonl"],
                     texts=MEDHELM_TEXTS)


def refused_import_with_texts(engine, ratings, texts):  # noqa: ANN201 - the InputFileError
    from medhelm_core.errors import InputFileError

    before = table_counts(engine)
    with pytest.raises(InputFileError) as info:
        import_ratings(engine, ratings, texts)
    assert table_counts(engine) == before
    return info.value


def test_a_clinician_rating_a_validation_item_is_shown_its_texts(sqlite_demo_engine):
    """What the Rate page draws (``rater_item.load_item``): the request and the response, no reference."""
    expected = texts_by_key()
    with transaction(sqlite_demo_engine) as s:
        study = get_study(s, MEDHELM_STUDY)
        assert "no reference answers" in study.description
        assign_balanced(s, study, 1, ["clinician1"])
        user = s.exec(select(User).where(User.username == "clinician1")).one()
        who = Principal(user.id, user.username, user.username, user.role)
        entries = queue.queue(s, who, study)
        shown = [rater_item.load_item(s, who, study, e.item_id) for e in entries]
        keys = [(i.benchmark, i.instance_id, i.model) for i in (s.get(Item, e.item_id) for e in entries)]
    assert len(shown) == 74
    assert all(v.text_available and v.reference_text is None for v in shown)
    assert [(v.input_text, v.output_text) for v in shown] == [expected[k] for k in keys]
