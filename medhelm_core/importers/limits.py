"""How much one import may read: a budget of rows and bytes shared by all its files.

An import is all-or-nothing, so every row stays in memory until all files are checked; without a cap a
small file can still be huge once read (a 593 KB Parquet file of one repeated value held 400,000 rows and
3.6 GB). Every reader asks the budget before it holds more, and the budget refuses with the file, the cap
and how to raise it, before the memory is spent wherever the size can be known in advance (a text file's
size, a Parquet file's row count).
"""

from __future__ import annotations

import os
from pathlib import Path

from medhelm_core.errors import InputFileError
from medhelm_core.settings import IMPORT_MAX_BYTES_ENV, IMPORT_MAX_ROWS_ENV, ImportLimits, import_limits


def _megabytes(n: int) -> str:
    return f"{n / 2**20:,.1f} MB" if n >= 2**20 else f"{n:,} bytes"


class ReadBudget:
    """Rows and bytes left for one import; each reader takes from it and is refused past the caps."""

    def __init__(self, limits: ImportLimits | None = None) -> None:
        self.limits = limits or import_limits()
        self.rows = 0
        self.bytes = 0

    def _too_many_rows(self, source: str | Path, line: int | None) -> InputFileError:
        return InputFileError(
            source,
            f"the import holds more than its limit of {self.limits.max_rows:,} rows; raise it with --max-rows "
            f"or {IMPORT_MAX_ROWS_ENV} if this is the file you meant to import",
            line=line,
        )

    def _too_many_bytes(self, source: str | Path, line: int | None, size: str = "") -> InputFileError:
        return InputFileError(
            source,
            f"the import reads more than its limit of {_megabytes(self.limits.max_bytes)}{size}; raise it with "
            f"--max-bytes or {IMPORT_MAX_BYTES_ENV} if this is the file you meant to import",
            line=line,
        )

    def take_row(self, source: str | Path, line: int | None = None) -> None:
        """Count one more row held in memory."""
        self.rows += 1
        if self.rows > self.limits.max_rows:
            raise self._too_many_rows(source, line)

    def take_bytes(self, source: str | Path, n: int, line: int | None = None) -> None:
        """Count ``n`` more bytes read (or decoded)."""
        self.bytes += n
        if self.bytes > self.limits.max_bytes:
            raise self._too_many_bytes(source, line)

    def expect_rows(self, source: str | Path, n: int) -> None:
        """Refuse now when a file says it holds more rows than are left (its rows are counted as read)."""
        if self.rows + n > self.limits.max_rows:
            raise self._too_many_rows(source, None)

    def expect_file(self, path: Path) -> None:
        """Refuse a file larger than the bytes left before reading any of it."""
        try:
            size = os.stat(path).st_size
        except OSError:
            return  # the reader reports a missing or unreadable file in its own words
        if self.bytes + size > self.limits.max_bytes:
            raise self._too_many_bytes(path, None, f" (the file is {_megabytes(size)})")
