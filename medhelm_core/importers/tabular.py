"""Read rows from CSV, JSONL and Parquet files, with the file and line of every problem.

Rows come out as ``(line, dict)`` pairs, read as they come (never the whole file at once) and counted
against the import's :class:`~medhelm_core.importers.limits.ReadBudget`. Column names can be renamed on the
way in with a mapping (``--map their_name=our_name``), so files from other tools import without editing.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from medhelm_core.errors import InputFileError, ValidationError
from medhelm_core.importers.limits import ReadBudget
from medhelm_core.importers.records import ItemRecord, require_text
from medhelm_core.importers.values import check_meta

#: The columns of an item file; ``reference`` may be absent or empty, other columns go to ``meta``.
ITEM_COLUMNS = ("benchmark", "instance_id", "model", "input", "output", "reference")
REQUIRED_ITEM_COLUMNS = ("benchmark", "instance_id", "model", "input", "output")


#: Parquet rows are decoded this many at a time, so a file whose few bytes decode to gigabytes is refused
#: after one small batch instead of after it is all in memory.
PARQUET_BATCH_ROWS = 64
#: A CSV header longer than this is not a header (it would be read whole just to detect the format).
MAX_HEADER_BYTES = 2**20


def _not_utf8(path: Path, raw: bytes, start: int, line: int) -> InputFileError:
    return InputFileError(path, f"not UTF-8 text (byte 0x{raw[start]:02x})", line=line)


def text_lines(path: Path, budget: ReadBudget) -> Iterator[tuple[int, str]]:
    """The lines of a UTF-8 text file one at a time (with their line ends), counted against ``budget``.

    The file's size is checked against the budget before anything is read. A non-UTF-8 byte is reported
    with its line; a file with nothing but blanks is "empty".
    """
    if not path.is_file():
        raise InputFileError(path, "no such file")
    budget.expect_file(path)
    seen_text = False
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                budget.take_bytes(path, len(raw), line=number)
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise _not_utf8(path, raw, exc.start, number) from None
                if number == 1:
                    line = line.removeprefix("\ufeff")
                seen_text = seen_text or bool(line.strip())
                yield number, line
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc.strerror}") from None
    if not seen_text:
        raise InputFileError(path, "the file is empty")


def rename(row: Mapping[str, Any], column_map: Mapping[str, str]) -> dict[str, Any]:
    """Apply ``column_map`` (their name -> our name) to one row."""
    return {column_map.get(k, k): v for k, v in row.items()}


def csv_rows(
    path: Path, column_map: Mapping[str, str], budget: ReadBudget | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows of a CSV file with a header, read as they come; the line is where the row starts in the file."""
    budget = budget or ReadBudget()
    reader = csv.DictReader((line for _, line in text_lines(path, budget)), strict=True)
    try:
        header = reader.fieldnames
        if not header:
            raise InputFileError(path, "no header row", line=1)
        width = len(header)
        start = reader.line_num + 1
        for raw in reader:
            if None in raw or len(raw) != width or any(v is None for v in raw.values()):
                raise InputFileError(path, f"expected {width} columns as in the header", line=start)
            budget.take_row(path, start)
            yield start, rename(raw, column_map)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputFileError(path, f"malformed CSV: {exc}", line=reader.line_num) from None


def csv_header(path: Path, column_map: Mapping[str, str]) -> list[str]:
    """The CSV header after renaming (for column checks before any row is read); reads only the header."""
    if not path.is_file():
        raise InputFileError(path, "no such file")
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_HEADER_BYTES + 1)
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc.strerror}") from None
    if not raw.strip():
        raise InputFileError(path, "the file is empty")
    if len(raw) > MAX_HEADER_BYTES:
        raw = raw[: raw.rfind(b"\n") + 1]
        if not raw:
            raise InputFileError(path, f"the first line is longer than {MAX_HEADER_BYTES:,} bytes; not a CSV header",
                                 line=1)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, raw, exc.start, raw.count(b"\n", 0, exc.start) + 1) from None
    try:
        first = next(csv.reader(io.StringIO(text, newline="")), [])
    except csv.Error as exc:
        raise InputFileError(path, f"malformed CSV: {exc}", line=1) from None
    return [column_map.get(c, c) for c in first]


def jsonl_rows(
    path: Path, column_map: Mapping[str, str], budget: ReadBudget | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Objects of a JSON Lines file, one per non-blank line, read a line at a time."""
    budget = budget or ReadBudget()
    for number, line in text_lines(path, budget):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputFileError(path, f"invalid JSON: {exc.msg} (column {exc.colno})", line=number) from None
        except RecursionError:
            raise InputFileError(path, "invalid JSON: nested too deeply", line=number) from None
        except ValueError as exc:  # an integer of thousands of digits
            raise InputFileError(path, f"invalid JSON: {exc}", line=number) from None
        if not isinstance(obj, dict):
            raise InputFileError(path, "each line must be a JSON object", line=number)
        budget.take_row(path, number)
        yield number, rename(obj, column_map)


def parquet_rows(
    path: Path, column_map: Mapping[str, str], budget: ReadBudget | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows of a Parquet file, decoded a small batch at a time; 'line' is the 1-based row number.

    The row count in the file's footer is checked against the budget before any row is decoded, and the
    decoded size of every batch after it (a repeated value compresses to almost nothing on disk).
    """
    import pyarrow.parquet as pq

    budget = budget or ReadBudget()
    if not path.is_file():
        raise InputFileError(path, "no such file")
    budget.expect_file(path)
    try:
        parquet = pq.ParquetFile(path)
        total = parquet.metadata.num_rows
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise InputFileError(path, f"cannot read Parquet: {exc}") from None
    if total <= 0:
        raise InputFileError(path, "the file has no rows")
    budget.expect_rows(path, total)
    batches = parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, use_threads=False)
    number = 0
    while True:
        try:
            batch = next(batches, None)
            if batch is None:
                break
            budget.take_bytes(path, batch.nbytes, line=number + 1)
            decoded = batch.to_pylist()
        except InputFileError:
            raise
        except Exception as exc:  # damaged pages show up only when they are decoded
            raise InputFileError(path, f"cannot read Parquet: {exc}", line=number + 1) from None
        for row in decoded:
            number += 1
            budget.take_row(path, number)
            yield number, rename(row, column_map)


def rows(
    path: Path, fmt: str, column_map: Mapping[str, str], budget: ReadBudget | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows of ``path`` in format ``csv``, ``jsonl`` or ``parquet``, within ``budget`` (default: the settings)."""
    readers = {"csv": csv_rows, "jsonl": jsonl_rows, "parquet": parquet_rows}
    return readers[fmt](path, column_map, budget)


def item_records(
    path: Path, fmt: str, column_map: Mapping[str, str], budget: ReadBudget | None = None
) -> list[ItemRecord]:
    """Items from an item file (columns :data:`ITEM_COLUMNS`; others are kept as metadata)."""
    source = str(path)
    records: list[ItemRecord] = []
    for line, row in rows(path, fmt, column_map, budget):
        missing = [c for c in REQUIRED_ITEM_COLUMNS if c not in row]
        if missing:
            raise InputFileError(
                source,
                f"missing column(s) {', '.join(missing)}; an item file needs "
                f"{', '.join(REQUIRED_ITEM_COLUMNS)} (rename with --map THEIRS=OURS)",
                line=line,
            )
        reference = row.get("reference")
        if isinstance(reference, float) and reference != reference:
            reference = None
        if reference is not None:
            reference = require_text(reference, source, line, "reference", allow_empty=True) or None
        meta = check_meta({k: v for k, v in row.items() if k not in ITEM_COLUMNS}, source, line)
        try:
            json.dumps(meta)
        except (TypeError, ValueError):
            meta = {k: str(v) for k, v in meta.items()}
        records.append(
            ItemRecord(
                benchmark=require_text(row["benchmark"], source, line, "benchmark").strip(),
                instance_id=require_text(row["instance_id"], source, line, "instance_id").strip(),
                model=require_text(row["model"], source, line, "model").strip(),
                input_text=require_text(row["input"], source, line, "input"),
                output_text=require_text(row["output"], source, line, "output", allow_empty=True),
                reference_text=reference,
                meta={"source_file": path.name, **meta},
                source=source,
                line=line,
            )
        )
    if not records:
        raise InputFileError(source, "no items in the file")
    return records


def file_columns(path: Path, fmt: str, budget: ReadBudget | None = None, sample_rows: int = 50) -> list[str]:
    """The column names of an item file in format ``csv``, ``jsonl`` or ``parquet``, in the order first seen in its
    first ``sample_rows`` rows (a JSON Lines file may name different keys on different lines): what a mapping of
    their names to ours (:data:`ITEM_COLUMNS`) is chosen from.

    Examples
    --------
    >>> file_columns(Path("outputs.jsonl"), "jsonl")  # doctest: +SKIP
    ['task', 'id', 'model', 'question', 'answer']
    """
    if fmt == "csv":
        return csv_header(path, {})
    seen: dict[str, None] = {}
    for count, (_, row) in enumerate(rows(path, fmt, {}, budget), start=1):
        seen.update(dict.fromkeys(row))
        if count >= sample_rows:
            break
    return list(seen)


def column_map_for(chosen: Mapping[str, str | None], columns: list[str]) -> dict[str, str]:
    """The mapping (their name -> ours) that makes the file column ``chosen[ours]`` our column ``ours``, for each of
    ours given a column; as ``--map THEIRS=OURS`` does on the command line.

    A file column that already bears one of our names but is not the one chosen for it is kept, as metadata,
    under ``<name>_in_file`` (instead of being overwritten by the chosen one). A file column chosen twice is a
    :class:`~medhelm_core.errors.ValidationError`.

    Examples
    --------
    >>> column_map_for({"input": "question", "output": "answer", "model": "model"}, ["question", "answer", "model"])
    {'question': 'input', 'answer': 'output'}
    >>> column_map_for({"input": "prompt"}, ["prompt", "input"])
    {'prompt': 'input', 'input': 'input_in_file'}
    """
    picked = {ours: theirs for ours, theirs in chosen.items() if theirs}
    twice = sorted({theirs for theirs in picked.values() if list(picked.values()).count(theirs) > 1})
    if twice:
        raise ValidationError(f"the file's column {', '.join(twice)} is chosen for more than one of ours")
    mapping = {theirs: ours for ours, theirs in picked.items() if theirs != ours}
    for ours in picked:
        if ours in columns and ours not in mapping and picked.get(ours) != ours:
            mapping[ours] = f"{ours}_in_file"
    return mapping


#: names other tools give our columns, most likely first (compared case-insensitively)
COLUMN_SYNONYMS: dict[str, tuple[str, ...]] = {
    "benchmark": ("benchmark", "task", "dataset", "dataset_name", "scenario"),
    "instance_id": ("instance_id", "id", "instance", "example_id", "question_id"),
    "model": ("model", "model_name", "model_key", "model_id"),
    "input": ("input", "prompt", "question", "request", "query"),
    "output": ("output", "response", "answer", "completion", "prediction"),
    "reference": ("reference", "gold", "reference_answer", "target", "expected", "ideal"),
}


def suggested_columns(columns: list[str]) -> dict[str, str | None]:
    """For each of our columns (:data:`ITEM_COLUMNS`), the file column most likely to hold it (the same name, else
    a common other name, see :data:`COLUMN_SYNONYMS`), or None; no file column is suggested twice.

    Examples
    --------
    >>> suggested_columns(["Task", "id", "model", "question", "answer"])
    {'benchmark': 'Task', 'instance_id': 'id', 'model': 'model', 'input': 'question', 'output': 'answer', \
'reference': None}
    """
    by_name = {c.strip().lower(): c for c in reversed(columns)}  # the first of two that differ only in case
    used: set[str] = set()
    suggested: dict[str, str | None] = {}
    for ours in ITEM_COLUMNS:
        found = next((by_name[n] for n in COLUMN_SYNONYMS[ours] if n in by_name and by_name[n] not in used), None)
        suggested[ours] = found
        if found is not None:
            used.add(found)
    return suggested
