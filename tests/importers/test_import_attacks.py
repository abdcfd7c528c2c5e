"""The attacks of issue 22 on the importers, as they were made: each is refused with the file, line and field,
before anything (or any of the file's text) reaches the database, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import event
from sqlmodel import Session, select
from support.helpers import refused_import, request_state, run_cli, write_helm_run

from medhelm_core.accounts.users import add_user
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Rating, User
from medhelm_core.errors import InputFileError
from medhelm_core.importers import import_paths
from medhelm_core.rubric import load_rubric_file
from medhelm_core.studies import get_or_create_study

GOOD = {"benchmark": "medi_qa", "instance_id": "1", "model": "m", "input": "q?", "output": "a", "reference": "r"}
SECRET = "PATIENT-TEXT-7731"  # an item text that must never be sent when its file is refused


def jsonl(rows: list[dict]) -> str:
    return "\n".join(json.dumps(r) for r in rows) + "\n"


def refused(engine, paths, fmt=None) -> InputFileError:
    """Import ``paths``, expect a refusal in one line, and check that nothing was written."""
    error = refused_import(engine, paths, fmt)
    assert "\n" not in str(error)
    return error


@pytest.fixture
def sent(engine):
    """Every parameter sent to the database while the test runs (to show a refused file's text never is)."""
    params: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        params.append(repr(parameters))

    event.listen(engine, "before_cursor_execute", record)
    yield params
    event.remove(engine, "before_cursor_execute", record)


# 8. Decompression bombs and big files


def test_parquet_bomb_is_refused_before_its_rows_are_decoded(engine, tmp_path):
    rows = 400_000  # the attack: four times the default cap, one repeated value, a few hundred KB on disk
    text = "The patient is stable. " * 20
    table = pa.table({
        "benchmark": pa.array(["medi_qa"] * rows), "instance_id": pa.array(range(rows)),
        "model": pa.array(["m"] * rows), "input": pa.array([text] * rows), "output": pa.array([text] * rows),
    })
    path = tmp_path / "bomb.parquet"
    pq.write_table(table, path, compression="zstd")
    del table
    assert path.stat().st_size < 2_000_000
    error = refused(engine, [path])
    assert str(path) in str(error) and "limit of 100,000 rows" in str(error) and "--max-rows" in str(error)


def test_parquet_that_decodes_past_the_byte_cap_is_refused(engine, tmp_path, monkeypatch):
    big = "x" * 200_000  # 50 rows of 200 KB compress to almost nothing and decode to 20 MB
    table = pa.table({"benchmark": ["medi_qa"] * 50, "instance_id": [str(i) for i in range(50)], "model": ["m"] * 50,
                      "input": [big] * 50, "output": [big] * 50})
    path = tmp_path / "wide.parquet"
    pq.write_table(table, path, compression="zstd")
    assert path.stat().st_size < 100_000
    monkeypatch.setenv("MEDHELM_IMPORT_MAX_BYTES", "1MB")
    error = refused(engine, [path])
    assert str(path) in str(error) and "limit of 1.0 MB" in str(error) and "--max-bytes" in str(error)


def test_jsonl_over_the_byte_cap_is_refused_before_it_is_read(engine, tmp_path, monkeypatch):
    path = tmp_path / "big.jsonl"
    path.write_text(jsonl([dict(GOOD, instance_id=str(i), output="y" * 1000) for i in range(3000)]))
    monkeypatch.setenv("MEDHELM_IMPORT_MAX_BYTES", "1MB")
    error = refused(engine, [path])
    assert str(path) in str(error) and "MEDHELM_IMPORT_MAX_BYTES" in str(error)
    assert "limit of 1.0 MB (the file is 3.2 MB)" in str(error)


def test_the_caps_can_be_raised_and_lowered_on_the_command_line(engine, tmp_path, capsys):
    url = engine.url.render_as_string(hide_password=False)
    path = tmp_path / "items.jsonl"
    path.write_text(jsonl([dict(GOOD, instance_id=str(i)) for i in range(20)]))
    too_many = run_cli(capsys, url, "import", "s", str(path), "--max-rows", "10")
    assert too_many.returncode != 0 and "limit of 10 rows" in too_many.stderr and "Traceback" not in too_many.stderr
    too_big = run_cli(capsys, url, "import", "s", str(path), "--max-bytes", "1K")
    assert too_big.returncode != 0 and "limit of 1,024 bytes" in too_big.stderr
    assert run_cli(capsys, url, "import", "s", str(path), "--max-rows", "20", "--max-bytes", "1MB").returncode == 0


# 11. A ratings CSV naming existing accounts as raters


def ratings_file(medhelm_ratings_csv, tmp_path, rater: str, row: int = 1):
    lines = medhelm_ratings_csv.read_text().splitlines()
    cells = lines[row].split(",")
    cells[0] = rater
    lines[row] = ",".join(cells)
    path = tmp_path / "ratings.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("account", [("admin", "admin"), ("clinician1", "clinician")])
def test_ratings_csv_naming_an_account_as_rater_is_refused(engine, tmp_path, medhelm_ratings_csv, account):
    username, role = account
    with transaction(engine) as s:
        add_user(s, username, role, "a long enough passphrase 2931")
    path = ratings_file(medhelm_ratings_csv, tmp_path, username, row=3)
    error = refused(engine, [path])
    assert (error.line, error.field) == (4, "rater_id") and "existing account" in str(error)
    with Session(engine) as s:
        assert s.exec(select(Rating)).all() == []


def test_ratings_import_reuses_only_the_raters_it_created(engine, medhelm_ratings_csv):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        first = import_paths(s, study, [medhelm_ratings_csv])
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        again = import_paths(s, study, [medhelm_ratings_csv])
    assert first.raters_created == 17 and again.raters_created == 0 and again.ratings_unchanged == 132


@pytest.mark.parametrize("rater", ["[x](https://evil.example/a.png)", "=cmd|' /C calc'!A0", "r" * 400, "dr who"])
def test_rater_ids_follow_the_username_rules(engine, tmp_path, medhelm_ratings_csv, rater):
    error = refused(engine, [ratings_file(medhelm_ratings_csv, tmp_path, rater, row=2)])
    assert (error.line, error.field) == (3, "rater_id") and "not a valid username" in str(error)


# 13. Malformed input


def test_deep_json_line_is_refused(engine, tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text(jsonl([GOOD]) + '{"meta": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    error = refused(engine, [path])
    assert error.line == 2 and "nested too deeply" in str(error)


def test_deep_but_parsable_metadata_is_refused(engine, tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text(jsonl([dict(GOOD, extra=json.loads("[" * 200 + "]" * 200))]))
    error = refused(engine, [path])
    assert (error.line, error.field) == (1, "extra") and "nested more than" in str(error)


def test_deep_helm_scenario_state_is_refused(engine, tmp_path):
    run = write_helm_run(tmp_path / "suite", "medi_qa", "m", [request_state("1", "q", "a", [])])
    (run / "scenario_state.json").write_text('{"request_states": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested too deeply" in str(refused(engine, [run]))


HELM_WRONG_TYPES = {
    "input is a number": (lambda rs: rs["instance"].update(input=5), "request_states[0].instance.input"),
    "id is a list": (lambda rs: rs["instance"].update(id=[1, 2]), "request_states[0].instance.id"),
    "references is an object": (lambda rs: rs["instance"].update(references={"a": 1}),
                                "request_states[0].instance.references"),
    "result is a number": (lambda rs: rs.update(result=3), "request_states[0].result"),
    "completions is an object": (lambda rs: rs["result"].update(completions={"text": "a"}),
                                 "request_states[0].result.completions"),
    "completion text is a number": (lambda rs: rs["result"]["completions"][0].update(text=42),
                                    "request_states[0].result.completions[0].text"),
}


@pytest.mark.parametrize("case", list(HELM_WRONG_TYPES))
def test_helm_field_of_the_wrong_json_type_is_refused(engine, tmp_path, case):
    edit, field = HELM_WRONG_TYPES[case]
    state = request_state("1", "q", "a", [("ref", ["correct"])])
    edit(state)
    run = write_helm_run(tmp_path / "suite", "medi_qa", "m", [state])
    error = refused(engine, [run])
    assert error.field == field and str(run / "scenario_state.json") in str(error)


def test_helm_run_spec_that_is_not_an_object_is_refused(engine, tmp_path):
    run = write_helm_run(tmp_path / "suite", "medi_qa", "m", [request_state("1", "q", "a", [])])
    (run / "run_spec.json").write_text("[1, 2]")
    assert str(run / "run_spec.json") in str(refused(engine, [run]))


def test_helm_split_of_the_wrong_type_is_skipped_not_a_crash(engine, tmp_path):
    state = request_state("1", "q", "a", [])
    state["instance"]["split"] = ["test"]
    run = write_helm_run(tmp_path / "suite", "medi_qa", "m", [state])
    assert "no evaluation request states" in str(refused(engine, [run]))


ITEM_ATTACKS = {
    "NUL in an output": ({"output": f"{SECRET} \x00 after"}, "output", "NUL character"),
    "NUL in metadata": ({"note": f"{SECRET}\x00"}, "note", "NUL character"),
    "NaN in a score": ({"score": float("nan"), "input": SECRET}, "score", "not a number JSON can hold"),
    "infinity in a score": ({"score": float("inf"), "input": SECRET}, "score", "not a number JSON can hold"),
    "20,000-character id": ({"instance_id": "i" * 20_000, "input": SECRET}, "instance_id", "20,000 characters"),
    "control character in a model": ({"model": "gpt\x1b[31m-4o", "input": SECRET}, "model", "U+001B"),
    "direction override in a model": ({"model": "gpt\u202e-4o", "input": SECRET}, "model", "U+202E"),
    "lone surrogate in an input": ({"input": SECRET + "\ud800"}, "input", "lone surrogate"),
}


@pytest.mark.parametrize("case", list(ITEM_ATTACKS))
def test_values_the_database_cannot_hold_are_refused_before_sending(engine, tmp_path, sent, case):
    change, field, message = ITEM_ATTACKS[case]
    path = tmp_path / "items.jsonl"
    path.write_text(jsonl([dict(GOOD, instance_id="0"), dict(GOOD, **change)]))
    error = refused(engine, [path])
    assert (error.line, error.field) == (2, field) and message in str(error) and str(path) in str(error)
    assert not any(SECRET in p for p in sent), "a refused file's text was sent to the database"


def test_nan_in_a_parquet_column_is_refused(engine, tmp_path):
    path = tmp_path / "items.parquet"
    pq.write_table(pa.table({**{k: [v, v] for k, v in GOOD.items()}, "instance_id": ["1", "2"],
                             "score": pa.array([1.0, float("nan")])}), path)
    error = refused(engine, [path])
    assert (error.line, error.field) == (2, "score")


def test_nul_in_a_ratings_csv_is_refused(engine, tmp_path, medhelm_ratings_csv):
    lines = medhelm_ratings_csv.read_text().splitlines()
    lines[2] = lines[2].replace(lines[2].split(",")[1], "cardio\x00logy", 1)
    path = tmp_path / "ratings.csv"
    path.write_text("\n".join(lines) + "\n")
    error = refused(engine, [path])
    assert (error.line, error.field) == (3, "specialty")


# 14. Duplicate ratings and absurd scales


def test_duplicate_rater_and_item_rows_are_refused_naming_both_lines(engine, tmp_path, medhelm_ratings_csv):
    lines = medhelm_ratings_csv.read_text().splitlines()
    path = tmp_path / "ratings.csv"
    path.write_text("\n".join([*lines, lines[5]]) + "\n")
    error = refused(engine, [path])
    assert error.line == len(lines) + 1 and "first at line 6" in str(error) and error.field == "rater_id"


RUBRIC = """name = "r"
version = 1
[[criteria]]
name = "accuracy"
label = "Accuracy"
scale = {scale}
"""


@pytest.mark.parametrize("scale", ["[1, 1000000000]", "[1, 1e9]", "[0, 11]", "[-1000, -998]", "[true, 5]"])
def test_rubric_scale_beyond_a_sane_size_is_refused(tmp_path, scale):
    path = tmp_path / "r.toml"
    path.write_text(RUBRIC.format(scale=scale))
    with pytest.raises(InputFileError) as info:
        load_rubric_file(path)
    assert info.value.field == "criteria[0].scale" and str(path) in str(info.value)


def test_rubric_scale_of_zero_to_ten_is_accepted(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text(RUBRIC.format(scale="[0, 10]"))
    assert load_rubric_file(path).criteria[0].scale_max == 10


BAD_RUBRICS = {
    "criteria are numbers": ('name = "r"\ncriteria = [1, 2]\n', "criteria[0]"),
    "anchors are a list": ('name = "r"\n[[criteria]]\nname = "a"\nanchors = ["x"]\n', "criteria[0].anchors"),
    "version is text": ('name = "r"\nversion = "two"\n[[criteria]]\nname = "a"\n', "version"),
    "name holds NUL": ('name = "r\\u0000"\n[[criteria]]\nname = "a"\n', "name"),
    "criterion name too long": (f'name = "r"\n[[criteria]]\nname = "{"a" * 500}"\n', "criteria[0].name"),
    "label is a table": ('name = "r"\n[[criteria]]\nname = "a"\nlabel = {x = 1}\n', "criteria[0].label"),
    "not TOML": ('name = "r\n', None),
}


@pytest.mark.parametrize("case", list(BAD_RUBRICS))
def test_bad_rubric_toml_is_refused_with_its_field(tmp_path, case):
    content, field = BAD_RUBRICS[case]
    path = tmp_path / "r.toml"
    path.write_text(content)
    with pytest.raises(InputFileError) as info:
        load_rubric_file(path)
    assert info.value.field == field and str(path) in str(info.value) and "\n" not in str(info.value)


def test_imported_raters_stay_passwordless_accounts_marked_as_imported(engine, medhelm_ratings_csv):
    with transaction(engine) as s:
        study, _ = get_or_create_study(s, "s")
        import_paths(s, study, [medhelm_ratings_csv])
    with Session(engine) as s:
        raters = s.exec(select(User)).all()
    assert raters and all(u.password_hash is None and u.meta.get("recorded_rater") for u in raters)
