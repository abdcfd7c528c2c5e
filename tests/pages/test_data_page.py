"""The Data page's import: a file whose columns have other names is matched to ours on the page, as
``medhelm import --map`` does on the command line; a missing column is named, pointing at that mapping."""

from __future__ import annotations

import json

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest

from medhelm_core.accounts import auth
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, Study
from pages.common import TOKEN_KEY

ROWS = b"".join(json.dumps({"task": "medi_qa", "id": f"q{i}", "model": "m", "question": f"question {i}",
                            "answer": f"answer {i}", "input": "an old column of theirs"}).encode() + b"\n"
                for i in range(2))


@pytest.fixture
def page(sqlite_demo_engine, monkeypatch) -> AppTest:
    """The Data page reached through the app's navigation (its "Next: ... Raters page" link needs it)."""
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=30)
    with transaction(sqlite_demo_engine) as s:
        at.session_state[TOKEN_KEY] = auth.sign_in(s, "researcher", "researcher-demo").token
    at.run()
    at.switch_page("pages/data.py").run()
    at.text_input(key="data_study_name").input("mapped")
    at.file_uploader(key="data_upload").upload("outputs.jsonl", ROWS, "application/json")
    return at.run()


def mapping(at: AppTest) -> dict:
    return {s.label.removesuffix(" (optional)"): s for s in at.selectbox if (s.key or "").startswith("data_map_")}


def test_other_column_names_are_matched_on_the_page_and_imported(page, sqlite_demo_engine):
    at = page
    chosen = mapping(at)
    assert list(chosen) == ["benchmark", "instance_id", "model", "input", "output", "reference"]
    # Guessed from the names (the same name first): the file's own "input" column is taken for ours ...
    assert {ours: s.value for ours, s in chosen.items()} == {
        "benchmark": "task", "instance_id": "id", "model": "model", "input": "input", "output": "answer",
        "reference": "(none)"}
    chosen["input"].set_value("question")  # ... until the researcher chooses the question instead
    at.run()
    assert at.code[-1].value == ("medhelm import mapped outputs.jsonl --map task=benchmark --map id=instance_id "
                                 "--map question=input --map answer=output --map input=input_in_file")
    at = next(b for b in at.button if b.label == "Import").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [s.value for s in at.success] == ["2 items created, 0 updated, 0 unchanged; 0 ratings written."]
    with Session(sqlite_demo_engine) as s:
        items = s.exec(select(Item).join(Study, Study.id == Item.study_id).where(Study.name == "mapped")
                       .order_by(Item.instance_id)).all()
    assert [(i.benchmark, i.instance_id, i.input_text, i.output_text) for i in items] == [
        ("medi_qa", "q0", "question 0", "answer 0"), ("medi_qa", "q1", "question 1", "answer 1")]
    assert items[0].meta["input_in_file"] == "an old column of theirs"  # kept, not overwritten


def test_a_missing_column_is_named_and_points_at_the_mapping_and_nothing_is_written(page, sqlite_demo_engine):
    at = page
    for ours in ("benchmark", "output"):
        mapping(at)[ours].set_value("(none)")
    at = next(b for b in at.run().button if b.label == "Import").click().run()
    [error] = at.error
    assert "missing column(s) benchmark, output" in error.value
    assert "match the file's columns to ours under Columns" in error.value and "--map" not in error.value
    with Session(sqlite_demo_engine) as s:
        assert s.exec(select(Study).where(Study.name == "mapped")).first() is None
