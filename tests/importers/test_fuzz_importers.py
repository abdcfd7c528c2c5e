"""Fuzzed files at the importers: whatever the bytes, JSON, CSV, Parquet table, HELM run or rubric, an import
either succeeds or raises InputFileError (a message naming the file), never another exception, and a refused
import changes nothing."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.helpers import request_state, table_counts, write_helm_run

from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.migrate import upgrade_database
from medhelm_core.errors import InputFileError
from medhelm_core.importers import import_paths
from medhelm_core.rubric import RubricSpec, load_rubric_file
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


def import_or_refuse(engine, name: str, content: bytes | None, fmt: str | None = None, write=None) -> None:
    """Import a file (``content``, or what ``write(path)`` puts there) and accept only success or our refusal."""
    before = table_counts(engine)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        if write is None:
            path.write_bytes(content)
        else:
            path = write(path)
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


texts = st.text(max_size=12) | st.sampled_from(["", "a\x00b", "x" * 400, "gpt\x1b[31m", "\u202e", "NaN"])
PARQUET_COLUMNS = {
    "text": (st.none() | texts, pa.string()),
    "int": (st.none() | st.integers(-2**63, 2**63 - 1), pa.int64()),
    "float": (st.none() | st.floats(allow_nan=True, allow_infinity=True), pa.float64()),
    "bool": (st.none() | st.booleans(), pa.bool_()),
    "list": (st.none() | st.lists(texts, max_size=2), pa.list_(pa.string())),
}


@st.composite
def parquet_tables(draw):
    n = draw(st.integers(0, 4))
    names = draw(st.lists(st.sampled_from(ITEM_COLUMNS + ["extra", "score"]), min_size=1, max_size=7, unique=True))
    columns = {}
    for name in names:
        values, kind = PARQUET_COLUMNS[draw(st.sampled_from(list(PARQUET_COLUMNS)))]
        columns[name] = pa.array(draw(st.lists(values, min_size=n, max_size=n)), type=kind)
    return pa.table(columns)


@FUZZ
@given(table=parquet_tables())
def test_random_parquet_tables_import_or_are_refused_cleanly(fuzz_engine, table):
    def write(path):
        pq.write_table(table, path)
        return path

    import_or_refuse(fuzz_engine, "items.parquet", None, write=write)


HELM_PATHS = [("instance",), ("instance", "id"), ("instance", "input"), ("instance", "input", "text"),
              ("instance", "references"), ("instance", "split"), ("result",), ("result", "completions"),
              ("request",), ("request", "model"), ("train_trial_index",)]


@FUZZ
@given(replacements=st.lists(st.tuples(st.sampled_from(HELM_PATHS), json_values), max_size=3),
       adapter=json_values, run_spec=st.none() | json_values)
def test_random_helm_runs_import_or_are_refused_cleanly(fuzz_engine, replacements, adapter, run_spec):
    state = request_state("1", "question", "answer", [("ref", ["correct"])])
    for path, value in replacements:
        target = state
        for key in path[:-1]:
            target = target.get(key) if isinstance(target, dict) else None
        if isinstance(target, dict):
            target[path[-1]] = value

    def write(folder):
        run = write_helm_run(folder, "medi_qa", "m", [state])
        doc = json.loads((run / "scenario_state.json").read_text())
        doc["adapter_spec"] = adapter
        (run / "scenario_state.json").write_text(json.dumps(doc))
        if run_spec is not None:
            (run / "run_spec.json").write_text(json.dumps(run_spec))
        return run

    import_or_refuse(fuzz_engine, "suite", None, "helm", write=write)


JURY_PATHS = [("annotations",), ("annotations", "medi_qa"), ("annotations", "medi_qa", "prompt_text"),
              ("annotations", "medi_qa", "gpt"), ("annotations", "medi_qa", "gpt", "accuracy"),
              ("annotations", "medi_qa", "gpt", "accuracy", "score"), ("annotations", "medi_qa", "llama")]


@FUZZ
@given(replacements=st.lists(st.tuples(st.sampled_from(JURY_PATHS), json_values), max_size=3),
       stats=json_values, stat=json_values)
def test_random_jury_annotations_and_helm_metrics_import_or_are_refused_cleanly(fuzz_engine, replacements, stats,
                                                                                stat):
    state = request_state("1", "question", "answer", [("ref", ["correct"])])
    verdict = {c: {"score": 4, "explanation": "fine"} for c in ("accuracy", "completeness", "clarity")}
    state["annotations"] = {"medi_qa": {"prompt_text": "prompt", "gpt": verdict, "llama": dict(verdict)}}
    for path, value in replacements:
        target = state
        for key in path[:-1]:
            target = target.get(key) if isinstance(target, dict) else None
        if isinstance(target, dict):
            target[path[-1]] = value

    def write(folder):
        run = write_helm_run(folder, "medi_qa", "m", [state])
        entry = {"instance_id": "1", "train_trial_index": 0,
                 "stats": [{"name": {"name": "rouge_l", "split": "test"}, "count": 1, "mean": stat}]}
        (run / "per_instance_stats.json").write_text(json.dumps([entry, stats]))
        return run

    import_or_refuse(fuzz_engine, "suite", None, "helm", write=write)


rubric_values = st.none() | st.integers() | st.floats() | texts | st.lists(st.integers(-10**10, 10**10), max_size=3)


@FUZZ
@given(rubric=st.fixed_dictionaries({}, optional={
    "name": rubric_values, "version": rubric_values, "title": rubric_values,
    "criteria": st.lists(st.fixed_dictionaries({}, optional={
        "name": rubric_values, "label": rubric_values, "scale": rubric_values,
        "anchors": st.dictionaries(st.text(max_size=3), rubric_values, max_size=2) | rubric_values,
    }) | json_values, max_size=3) | json_values,
}) | json_values)
def test_random_rubrics_load_or_are_refused_cleanly(rubric):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rubric.json"
        path.write_text(json.dumps(rubric))
        try:
            assert isinstance(load_rubric_file(path), RubricSpec)
        except InputFileError as exc:
            assert str(exc).startswith(str(path))


@FUZZ
@given(text=st.text(max_size=300) | st.sampled_from(['name = "r"\n[[criteria]]\nname = "a"\nscale = [1, 5]\n']))
def test_random_rubric_toml_loads_or_is_refused_cleanly(text):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rubric.toml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            assert isinstance(load_rubric_file(path), RubricSpec)
        except InputFileError as exc:
            assert str(exc).startswith(str(path))
