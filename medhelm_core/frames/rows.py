"""How the loader reads rows into frames: the long table's columns, Core selects, JSON columns, gold items.

The long score table has one row per (item, rater, criterion) with columns ``item_id``, ``rater_id``,
``rater_kind`` (clinician, jury, judge, metric), ``criterion``, ``score``, ``benchmark`` and ``model``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Select
from sqlmodel import Session

LONG_COLUMNS = ["item_id", "rater_id", "rater_kind", "criterion", "score", "benchmark", "model"]


def select_frame(session: Session, statement: Select, columns: Sequence[str]) -> pd.DataFrame:
    """The rows of a select of plain columns as a frame, read through SQLAlchemy Core and built column by column.

    The ORM's rows and ``pd.DataFrame(rows)`` cost seconds on the 120,000 ratings of a 20,000-item study;
    Core rows turned into one list per column cost a fraction of that and give the same frame.

    Examples
    --------
    >>> select_frame(session, select(Item.id, Item.benchmark), ["item_id", "benchmark"])  # doctest: +SKIP
    """
    rows = session.connection().execute(statement).all()
    if not rows:
        return pd.DataFrame(rows, columns=list(columns))
    return pd.DataFrame(dict(zip(columns, map(list, zip(*rows, strict=True)), strict=True)))


def json_values(values: list[Any]) -> list[Any]:
    """JSON columns read as text (``type_coerce(column, Text)``), decoded in one call.

    60,000 separate decodes are a third of a second; a driver that decodes JSON itself (psycopg) hands
    over objects, kept as they are.
    """
    texts = [v for v in values if isinstance(v, str)]
    decoded = iter(json.loads("[" + ",".join(texts) + "]"))
    return [next(decoded) if isinstance(v, str) else v for v in values]


def without_items(frame: pd.DataFrame, item_ids: Collection[int]) -> pd.DataFrame:
    """``frame`` without the rows of ``item_ids`` (its ``item_id`` column may hold ints or their strings).

    Agreement figures leave the study's gold items out with it (:func:`~medhelm_core.rating.gold.gold_item_ids`):
    they measure the clinicians, every clinician rates them and they are chosen for being clear-cut.
    """
    if not item_ids or frame.empty:
        return frame
    ids = frame["item_id"]
    keys = {str(i) for i in item_ids}
    return frame[~(ids if pd.api.types.is_string_dtype(ids) else ids.astype(str)).isin(keys)].reset_index(drop=True)
