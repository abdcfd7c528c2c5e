"""Fuzzed files at the importers: whatever the bytes, JSON or CSV, an import either succeeds or raises
InputFileError (a message naming the file), never another exception, and a refused import changes nothing."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.helpers import table_counts

from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.migrate import upgrade_database
from medhelm_core.errors import InputFileError
from medhelm_core.importers import import_paths
from medhelm_core.studies import get_or_create_study

ITEM_COLUMNS = ["benchmark", "instance_id", "model", "input", "output", "reference"]
RATING_COLUMNS = ["rater_id", "specialty", "team", "entry_id", "instance_id", "dataset_name", "model_key",
                  "user_label", "accuracy", "completeness", "clarity", "llm_accuracy", "llm_completeness",
                  "llm_clarity"]
FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10**12) | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
cells = st.one_of(st.text(max_size=20), st.integers(-5, 10).map(str), st.sampled_from(["", "1", "5", "NA", "nan"]))


@pytest.fixture(scope="module")
def fuzz_engine(tmp_path_factory):
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'fuzz.db'}")
    upgrade_database(engine)
    yield engine
    engine.dispose()


def import_or_refuse(engine, name: str, content: bytes, fmt: str | None = None) -> None:
    before = table_counts(engine)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(content)
        try:
            with transaction(engine) as s:
                study, _ = get_or_create_study(s, "fuzz")
                import_paths(s, study, [path], fmt)
        except InputFileError as exc:
            assert str(exc).startswith(str(path))
            assert table_counts(engine) == before, "a refused import changed the database"


@FUZZ
@given(content=st.binary(max_size=400), name=st.sampled_from(["x.jsonl", "x.csv", "x.parquet"]))
def test_random_bytes_import_or_are_refused_cleanly(fuzz_engine, content, name):
    import_or_refuse(fuzz_engine, name, content)


@FUZZ
@given(rows=st.lists(st.one_of(
    st.fixed_dictionaries({}, optional={c: json_values for c in ITEM_COLUMNS}),
    json_values,
), max_size=5))
def test_random_json_lines_import_or_are_refused_cleanly(fuzz_engine, rows):
    content = "\n".join(json.dumps(r) for r in rows).encode()
    import_or_refuse(fuzz_engine, "items.jsonl", content)


@FUZZ
@given(columns=st.lists(st.sampled_from(ITEM_COLUMNS + ["extra"]), min_size=1, max_size=8),
       rows=st.lists(st.lists(cells, min_size=0, max_size=9), max_size=5))
def test_random_item_csv_imports_or_is_refused_cleanly(fuzz_engine, columns, rows):
    import_or_refuse(fuzz_engine, "items.csv", _csv(columns, rows))


@FUZZ
@given(drop=st.sets(st.sampled_from(RATING_COLUMNS), max_size=3),
       rows=st.lists(st.lists(cells, min_size=len(RATING_COLUMNS) - 2, max_size=len(RATING_COLUMNS) + 1),
                     min_size=1, max_size=4))
def test_random_medhelm_ratings_import_or_are_refused_cleanly(fuzz_engine, drop, rows):
    columns = [c for c in RATING_COLUMNS if c not in drop]
    import_or_refuse(fuzz_engine, "ratings.csv", _csv(columns, rows), "medhelm-ratings")


def _csv(columns: list[str], rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue().encode()
