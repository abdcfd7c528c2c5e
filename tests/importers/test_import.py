"""Importers give the right counts, twice in a row without duplicates, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from sqlmodel import Session, select
from support.helpers import request_state, table_counts, write_helm_run

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, JudgeVerdict, JuryRun, Rating, User
from medhelm_core.importers import detect_format, import_paths
from medhelm_core.studies import get_or_create_study


def run_import(engine, paths, fmt=None, column_map=None, study="s"):
    with transaction(engine) as s:
        target, _ = get_or_create_study(s, study)
        return import_paths(s, target, paths, fmt, column_map)


ROWS = [
    {"benchmark": "medi_qa", "instance_id": f"q{i}", "model": m, "input": f"Question {i}?",
     "output": f"Answer {i} by {m}", "reference": f"Reference {i}" if i % 2 else "", "specialty": "cardiology"}
    for i in range(5)
    for m in ("model-a", "model-b")
]


@pytest.fixture
def item_files(tmp_path):
    jsonl = tmp_path / "items.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    csv = tmp_path / "items.csv"
    pd.DataFrame(ROWS).to_csv(csv, index=False)
    parquet = tmp_path / "items.parquet"
    pd.DataFrame(ROWS).to_parquet(parquet, index=False)
    return {"jsonl": jsonl, "csv": csv, "parquet": parquet}


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_item_file_import_is_idempotent(engine, item_files, fmt):
    first = run_import(engine, [item_files[fmt]])
    assert (first.items_created, first.items_unchanged) == (10, 0)
    second = run_import(engine, [item_files[fmt]])
    assert (second.items_created, second.items_updated, second.items_unchanged) == (0, 0, 10)
    with Session(engine) as s:
        items = s.exec(select(Item).order_by(Item.instance_id, Item.model)).all()
    assert len(items) == 10
    assert items[0].reference_text is None and items[2].reference_text == "Reference 1"
    assert items[0].meta["specialty"] == "cardiology"


def test_formats_are_detected(item_files, tmp_path, medhelm_ratings_csv):
    assert {detect_format(p) for p in item_files.values()} == {"jsonl", "csv", "parquet"}
    assert detect_format(medhelm_ratings_csv) == "medhelm-ratings"
    assert detect_format(tmp_path) == "helm"


def test_column_map_renames_columns(engine, tmp_path):
    path = tmp_path / "theirs.jsonl"
    path.write_text(json.dumps({"task": "medi_qa", "id": "1", "llm": "m", "question": "q?", "answer": "a",
                                "gold": "g"}) + "\n")
    report = run_import(engine, [path], column_map={"task": "benchmark", "id": "instance_id", "llm": "model",
                                                     "question": "input", "answer": "output", "gold": "reference"})
    assert report.items_created == 1


def test_changed_text_updates_an_unrated_item(engine, tmp_path):
    path = tmp_path / "a.jsonl"
    row = dict(ROWS[0], reference="r")
    path.write_text(json.dumps(row) + "\n")
    run_import(engine, [path])
    path.write_text(json.dumps(dict(row, output="corrected")) + "\n")
    assert run_import(engine, [path]).items_updated == 1


def helm_suite(root):
    suite = root / "benchmark_output" / "runs" / "v1"
    states = [
        request_state("id1", "Question one?", "Answer one", [("wrong", []), ("Gold one", ["correct"])]),
        request_state("id2", "Question two?", "Answer two", [("First ref", []), ("Second ref", [])]),
        request_state("id3", "Question three?", "Answer three", []),
        request_state("id1", "Question one?", "Answer again", [], trial=1),
        request_state("tr1", "Train question", "x", [], split="train"),
    ]
    write_helm_run(suite, "medi_qa", "openai/gpt-4o-2024-05-13", states)
    write_helm_run(suite, "aci_bench", "anthropic/claude-3-7-sonnet-20250219",
                   [request_state("a1", "Doctor: hi\nPatient: hello", "Note", [("Gold note", ["correct"])],
                                  model="anthropic/claude-3-7-sonnet-20250219")])
    return suite


def test_helm_suite_folder_imports_every_run(engine, tmp_path):
    suite = helm_suite(tmp_path)
    report = run_import(engine, [suite])
    assert report.items_created == 4
    assert report.skipped == {"trial other than the first": 1, "not an evaluation split": 1}
    with Session(engine) as s:
        items = {(i.benchmark, i.instance_id): i for i in s.exec(select(Item)).all()}
    assert items[("medi_qa", "id1")].reference_text == "Gold one"  # the reference tagged correct
    assert items[("medi_qa", "id2")].reference_text == "First ref"  # else the first reference
    assert items[("medi_qa", "id3")].reference_text is None
    assert items[("medi_qa", "id1")].output_text == "Answer one"
    assert items[("aci_bench", "a1")].model == "anthropic/claude-3-7-sonnet-20250219"
    again = run_import(engine, [suite])
    assert (again.items_created, again.items_unchanged) == (0, 4)


def test_helm_single_run_folder_imports(engine, tmp_path):
    suite = helm_suite(tmp_path)
    run = next(p for p in suite.iterdir() if p.name.startswith("aci_bench"))
    assert run_import(engine, [run]).items_created == 1


def test_medhelm_ratings_import_gives_the_studys_counts_twice(engine, medhelm_ratings_csv):
    rows = pd.read_csv(medhelm_ratings_csv)
    first = run_import(engine, [medhelm_ratings_csv])
    assert first.format == "medhelm-ratings"
    assert first.items_created == rows["instance_id"].nunique() == 74
    assert first.raters_created == rows["rater_id"].nunique() == 17
    assert first.ratings_written == len(rows)
    assert first.verdicts_written == 74
    before = table_counts(engine)
    second = run_import(engine, [medhelm_ratings_csv])
    assert (second.items_created, second.ratings_written, second.verdicts_written) == (0, 0, 0)
    assert second.ratings_unchanged == len(rows)
    assert table_counts(engine) == before
    with Session(engine) as s:
        assert len(s.exec(select(Rating)).all()) == 3 * len(rows)
        assert all(u.role == "clinician" and u.password_hash is None for u in s.exec(select(User)).all())
        run = s.exec(select(JuryRun)).one()
        assert run.source == "recorded"
        verdict = s.exec(select(JudgeVerdict)).first()
    item_rows = rows[rows.instance_id == "id148"].iloc[0]
    with Session(engine) as s:
        item = s.exec(select(Item).where(Item.instance_id == "id148")).one()
        v = s.exec(select(JudgeVerdict).where(JudgeVerdict.item_id == item.id)).one()
    assert v.scores["accuracy"] == pytest.approx(item_rows["llm_accuracy"], abs=1e-12)
    assert verdict.status == "ok"
