"""The one CSV writer: every CSV file the product hands out goes through it, so a spreadsheet opens it as data.

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula, and one that starts with a
tab or a carriage return too (it drops the blank first). A model output, a clinician's comment, a model, rater
or study name beginning ``=HYPERLINK("http://...")`` would then be a live link, or a command (DDE), when a
researcher opens ``medhelm export``, the report's data bundle or the audit trail. As OWASP's CSV injection
guidance says, such a cell is written with a single quote in front, which spreadsheets show as text.

What is changed, and what is not:

* **Only text.** Numbers stored as numbers (scores, ``-0.25``, ids, counts) are never touched: only ``str``
  cells, and the header, are looked at. The columns that change are text (outputs, comments, names), never
  the scores the report's figures are computed from.
* **A text that is a plain number stays as it is** (``-0.25``, ``+3``, ``-1e-3``). OWASP quotes these too; we
  do not, because no formula can hide in a cell that is a number and nothing else, a spreadsheet reads it as
  the number it says, and a quote would change the value that pandas or R read back. ``-2+3``, ``-1;cmd``
  and ``- 1`` are not plain numbers and are quoted.
* **Reversible.** A text that, after any single quotes it starts with, begins with a formula character gets
  one more quote; :func:`unquote` takes exactly that one away, so the bundle's ``scores_long.csv`` still gives
  the agreement table its exact input (``medhelm_core.report.read_scores_long`` reads it back through it).

Rows end with ``\r\n`` (RFC 4180). Python's CSV writer quotes a field only for the characters of its line
ending, so with ``\n`` alone a bare carriage return inside a text went out unquoted, and a spreadsheet broke
the row there: ``fine\r=HYPERLINK(...)`` became a new row whose first cell is a formula.

JSON Lines and Parquet exports are data formats that no spreadsheet runs: they are written exactly as stored.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from pathlib import Path
from typing import TypeVar

import pandas as pd
from pandas.api.types import is_object_dtype, is_string_dtype

__all__ = ["FORMULA_START", "LINE_END", "csv_text", "neutralise", "safe_frame", "unquote", "write_csv"]

#: the characters a spreadsheet starts a formula with (tab and carriage return: it skips them, then reads on)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A number and nothing else, in the form a spreadsheet and pandas read as one (ASCII digits only: \d would
# take other scripts' digits, which a spreadsheet reads as text).
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

#: every row ends so; a text holding ``\r`` or ``\n`` is then always quoted (see the module's docstring)
LINE_END = "\r\n"

T = TypeVar("T")


def _needs_quote(text: str) -> bool:
    if text.startswith("'"):  # quoted already, or text that starts with a quote: see unquote
        return text.lstrip("'").startswith(FORMULA_START)
    return text.startswith(FORMULA_START) and _PLAIN_NUMBER.fullmatch(text) is None


def neutralise(cell: T) -> T | str:
    """``cell`` as a spreadsheet may open it: a text that would start a formula gets a leading ``'``.

    Anything that is not a ``str`` (numbers, None, NaN, dates) is returned as it is.

    Examples
    --------
    >>> neutralise('=HYPERLINK("http://x", "click")')
    '\\'=HYPERLINK("http://x", "click")'
    >>> neutralise("-2+3"), neutralise("\\t=1"), neutralise("@SUM(1)")
    ("'-2+3", "'\\t=1", "'@SUM(1)")
    >>> neutralise(-0.25), neutralise("-0.25"), neutralise("fine"), neutralise(None)
    (-0.25, '-0.25', 'fine', None)
    >>> neutralise("'=1")  # already quoted by someone: one more, so that unquote gives it back
    "''=1"
    """
    if isinstance(cell, str) and _needs_quote(cell):
        return "'" + cell
    return cell


def unquote(cell: T) -> T | str:
    """The text :func:`neutralise` was given: for reading back a CSV this module wrote.

    Examples
    --------
    >>> unquote("'=1"), unquote("''=1"), unquote("'quoted'"), unquote("-0.25"), unquote(3)
    ('=1', "'=1", "'quoted'", '-0.25', 3)
    """
    if isinstance(cell, str) and cell.startswith("'") and cell.lstrip("'").startswith(FORMULA_START):
        return cell[1:]
    return cell


def _text_column(column: pd.Series) -> bool:
    return is_object_dtype(column.dtype) or is_string_dtype(column.dtype) or isinstance(
        column.dtype, pd.CategoricalDtype)


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` with every formula-like text cell and column name quoted; numbers untouched.

    Examples
    --------
    >>> out = safe_frame(pd.DataFrame({"model": ["=cmd", "gpt"], "score": [-0.25, 3.0]}))
    >>> out["model"].tolist(), out["score"].tolist()
    (["'=cmd", 'gpt'], [-0.25, 3.0])
    """
    out = frame.copy()
    for position in range(out.shape[1]):
        column = out.iloc[:, position]
        if _text_column(column):
            out.isetitem(position, column.astype(object).map(neutralise))
    out.columns = [_header(c) for c in out.columns]
    return out


def _header(name: Hashable) -> Hashable:
    return neutralise(name) if isinstance(name, str) else name


def csv_text(frame: pd.DataFrame) -> str:
    """``frame`` as CSV text (no index), formula cells quoted: for a download button or standard output.

    Examples
    --------
    >>> csv_text(pd.DataFrame({"rater": ["+1+1", "a\\rb"], "score": [-1, 2]})).split("\\r\\n")
    ['rater,score', "'+1+1,-1", '"a\\rb",2', '']
    """
    return safe_frame(frame).to_csv(index=False, lineterminator=LINE_END)


def write_csv(frame: pd.DataFrame, target: Path) -> Path:
    """Write ``frame`` to ``target`` as CSV (no index), formula cells quoted; returns ``target``.

    The file is written under ``<target>.tmp`` and renamed, so an interrupted write never leaves a
    half-written file under the final name.
    """
    target = Path(target)
    tmp = target.with_name(target.name + ".tmp")
    safe_frame(frame).to_csv(tmp, index=False, lineterminator=LINE_END)
    tmp.replace(target)
    return target
