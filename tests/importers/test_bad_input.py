"""Bad input gets a message naming the file and line or field, and the database stays exactly as before."""

from __future__ import annotations

import json

import pytest
from support.helpers import refused_import, request_state, write_helm_run

from medhelm_core.db.engine import transaction
from medhelm_core.importers import import_paths
from medhelm_core.studies import get_or_create_study

GOOD = {"benchmark": "medi_qa", "instance_id": "1", "model": "m", "input": "q?", "output": "a", "reference": "r"}


def jsonl(rows):
    return "\n".join(json.dumps(r) for r in rows) + "\n"


def ratings_csv(medhelm_ratings_csv, edit):
    lines = medhelm_ratings_csv.read_text().splitlines()
    return "\n".join(edit(lines)) + "\n"


def _off_scale(lines):
    cells = lines[3].split(",")
    cells[8] = "7"  # accuracy of the third data row
    lines[3] = ",".join(cells)
    return lines


CASES = {
    "missing file": (None, None, "no such file", None),
    "empty file": ("items.jsonl", "", "the file is empty", None),
    "jsonl cut short": ("items.jsonl", jsonl([GOOD]) + '{"benchmark": "medi_qa", "instance_', "invalid JSON", 2),
    "csv without a column": (
        "items.csv", "benchmark,instance_id,model,input\nmedi_qa,1,m,q\n", "missing column(s) output", 2
    ),
    "not utf-8": ("items.csv", None, "not UTF-8", 3),
    "empty required field": ("items.jsonl", jsonl([GOOD, dict(GOOD, instance_id="2", model="")]), "empty value", 2),
    "duplicate item": ("items.jsonl", jsonl([GOOD, GOOD]), "appears twice", 2),
}


@pytest.fixture
def seeded(engine, tmp_path):
    """A database that already holds one study with items, so 'unchanged' is a real check."""
    path = tmp_path / "seed.jsonl"
    path.write_text(jsonl([dict(GOOD, instance_id="seed")]))
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        import_paths(s, study, [path])
    return engine


attempt = refused_import


@pytest.mark.parametrize("case", list(CASES))
def test_bad_item_file_is_refused_with_its_place_and_changes_nothing(seeded, tmp_path, case):
    name, content, message, line = CASES[case]
    path = tmp_path / (name or "nope.jsonl")
    if case == "not utf-8":
        path.write_bytes("benchmark,instance_id,model,input,output\nmedi_qa,1,m,q,a\nmedi_qa,2,m,caf\xe9,a\n".encode("latin-1"))
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    error = attempt(seeded, [path])
    assert message in str(error)
    assert str(path) in str(error)
    assert error.line == line


def test_a_bad_second_file_rolls_back_the_good_first(seeded, tmp_path):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(jsonl([dict(GOOD, instance_id=str(i)) for i in range(5)]))
    bad.write_text(jsonl([GOOD]) + "{not json\n")
    attempt(seeded, [good, bad])


def test_score_outside_the_scale_names_line_and_field(seeded, tmp_path, medhelm_ratings_csv):
    path = tmp_path / "ratings.csv"
    path.write_text(ratings_csv(medhelm_ratings_csv, _off_scale))
    error = attempt(seeded, [path])
    assert (error.line, error.field) == (4, "accuracy")
    assert "outside the scale 1 to 5" in str(error)


def test_ratings_csv_without_a_criterion_column_is_refused(seeded, tmp_path, medhelm_ratings_csv):
    path = tmp_path / "ratings.csv"
    path.write_text(ratings_csv(medhelm_ratings_csv, lambda rows: [",".join(r.split(",")[:10]) for r in rows]))
    error = attempt(seeded, [path])
    assert "missing column(s) clarity" in str(error)


def test_jury_score_outside_the_scale_is_refused(seeded, tmp_path, medhelm_ratings_csv):
    def edit(lines):
        cells = lines[1].split(",")
        cells[11] = "9.0"
        lines[1] = ",".join(cells)
        return lines

    path = tmp_path / "ratings.csv"
    path.write_text(ratings_csv(medhelm_ratings_csv, edit))
    error = attempt(seeded, [path])
    assert (error.line, error.field) == (2, "llm_accuracy")


def test_helm_scenario_state_cut_short_is_refused(seeded, tmp_path):
    run = write_helm_run(tmp_path / "suite", "medi_qa", "m", [request_state("1", "q", "a", [])])
    state = run / "scenario_state.json"
    state.write_text(state.read_text()[:-40])
    error = attempt(seeded, [run])
    assert "invalid JSON" in str(error) and str(state) in str(error)


def test_helm_folder_without_runs_is_refused(seeded, tmp_path):
    (tmp_path / "empty").mkdir()
    error = attempt(seeded, [tmp_path / "empty"])
    assert "not a HELM run or suite folder" in str(error)
