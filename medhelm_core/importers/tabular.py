"""Read rows from CSV, JSONL and Parquet files, with the file and line of every problem.

Rows come out as ``(line, dict)`` pairs. Column names can be renamed on the way in with a mapping
(``--map their_name=our_name``), so files from other tools import without editing.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from medhelm_core.errors import InputFileError
from medhelm_core.importers.records import ItemRecord, require_text

#: The columns of an item file; ``reference`` may be absent or empty, other columns go to ``meta``.
ITEM_COLUMNS = ("benchmark", "instance_id", "model", "input", "output", "reference")
REQUIRED_ITEM_COLUMNS = ("benchmark", "instance_id", "model", "input", "output")


def read_text(path: Path) -> str:
    """The file as UTF-8 text; a non-UTF-8 byte is reported with its line."""
    if not path.is_file():
        raise InputFileError(path, "no such file")
    data = path.read_bytes()
    if not data.strip():
        raise InputFileError(path, "the file is empty")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputFileError(path, f"not UTF-8 text (byte 0x{data[exc.start]:02x})", line=line) from None


def rename(row: Mapping[str, Any], column_map: Mapping[str, str]) -> dict[str, Any]:
    """Apply ``column_map`` (their name -> our name) to one row."""
    return {column_map.get(k, k): v for k, v in row.items()}


def csv_rows(path: Path, column_map: Mapping[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows of a CSV file with a header; the line is where the row starts in the file."""
    text = read_text(path)
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    try:
        header = reader.fieldnames
        if not header:
            raise InputFileError(path, "no header row", line=1)
        width = len(header)
        start = reader.line_num + 1
        for raw in reader:
            if None in raw or len(raw) != width or any(v is None for v in raw.values()):
                raise InputFileError(path, f"expected {width} columns as in the header", line=start)
            yield start, rename(raw, column_map)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputFileError(path, f"malformed CSV: {exc}", line=reader.line_num) from None


def csv_header(path: Path, column_map: Mapping[str, str]) -> list[str]:
    """The CSV header after renaming (for column checks before any row is read)."""
    first = read_text(path).splitlines()[0]
    return [column_map.get(c, c) for c in next(csv.reader([first]))]


def jsonl_rows(path: Path, column_map: Mapping[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Objects of a JSON Lines file, one per non-blank line."""
    text = read_text(path)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputFileError(path, f"invalid JSON: {exc.msg} (column {exc.colno})", line=number) from None
        if not isinstance(obj, dict):
            raise InputFileError(path, "each line must be a JSON object", line=number)
        yield number, rename(obj, column_map)


def parquet_rows(path: Path, column_map: Mapping[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows of a Parquet file; 'line' is the 1-based row number."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise InputFileError(path, "no such file")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise InputFileError(path, f"cannot read Parquet: {exc}") from None
    if table.num_rows == 0:
        raise InputFileError(path, "the file has no rows")
    for number, row in enumerate(table.to_pylist(), start=1):
        yield number, rename(row, column_map)


def rows(path: Path, fmt: str, column_map: Mapping[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows of ``path`` in format ``csv``, ``jsonl`` or ``parquet``."""
    readers = {"csv": csv_rows, "jsonl": jsonl_rows, "parquet": parquet_rows}
    return readers[fmt](path, column_map)


def item_records(path: Path, fmt: str, column_map: Mapping[str, str]) -> list[ItemRecord]:
    """Items from an item file (columns :data:`ITEM_COLUMNS`; others are kept as metadata)."""
    source = str(path)
    records: list[ItemRecord] = []
    for line, row in rows(path, fmt, column_map):
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
        meta = {k: v for k, v in row.items() if k not in ITEM_COLUMNS}
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
