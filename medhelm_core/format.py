"""How a figure is printed: one number formatter and one interval formatter for the pages, the report and the CLI.

A figure that reads ``0.47 (0.10 to 0.69)`` on the Agreement page must read the same in the report and in the
terminal; keeping the rounding rules here (``n/a`` for a missing value, never ``-0.000``) is what makes that so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

__all__ = ["interval", "intervals", "number"]


def number(value: Any, digits: int = 3) -> str:
    """A figure for a table: rounded to ``digits``, ``n/a`` for a missing or infinite one, never ``-0.000``.

    Examples
    --------
    >>> number(0.4736)
    '0.474'
    >>> number(-0.0001), number(float("nan")), number(None), number(2, 1)
    ('0.000', 'n/a', 'n/a', '2.0')
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)) or pd.isna(value):
        return "n/a"
    # Round first, then add 0.0, so that -0.0001 prints as 0.000, not -0.000.
    return f"{round(float(value), digits) + 0.0:.{digits}f}"


def interval(low: Any, high: Any) -> str:
    """A 95% interval as ``0.10 to 0.69`` (``n/a`` when either end is missing).

    Examples
    --------
    >>> interval(0.1012, 0.6893)
    '0.10 to 0.69'
    >>> interval(None, 0.5)
    'n/a'
    """
    if any(v is None or pd.isna(v) for v in (low, high)):
        return "n/a"
    return f"{number(low, 2)} to {number(high, 2)}"


def intervals(lows: Iterable[Any], highs: Iterable[Any]) -> list[str]:
    """:func:`interval` of each pair, for a table's column (``ci_low`` and ``ci_high`` side by side).

    Examples
    --------
    >>> intervals([0.1, None], [0.69, 0.8])
    ['0.10 to 0.69', 'n/a']
    """
    return [interval(low, high) for low, high in zip(lows, highs, strict=True)]
