"""A study's items as frames: in full (texts included, for exports) or by identity only (for figures)."""

from __future__ import annotations

import pandas as pd
from sqlmodel import Session, select

from medhelm_core.db.models import Item, Study
from medhelm_core.frames.rows import select_frame

ITEM_COLUMNS = ["item_id", "benchmark", "instance_id", "model"]


def items_frame(session: Session, study: Study) -> pd.DataFrame:
    """One row per item with its texts and identity (the model name included: researchers only)."""
    rows = session.exec(select(Item).where(Item.study_id == study.id).order_by(Item.id)).all()
    return pd.DataFrame(
        [
            {
                "item_id": i.id,
                "benchmark": i.benchmark,
                "instance_id": i.instance_id,
                "model": i.model,
                "input": i.input_text,
                "output": i.output_text,
                "reference": i.reference_text,
            }
            for i in rows
        ],
        columns=[*ITEM_COLUMNS, "input", "output", "reference"],
    )


def item_identity_frame(session: Session, study: Study) -> pd.DataFrame:
    """One row per item: ``item_id``, ``benchmark``, ``instance_id``, ``model`` (no texts), in the order the
    database reads them (no sort: the dashboard's 20,000 items are placed by id, never listed in order).

    What figures need to place a score; the texts, which may hold patient text, stay in the database.
    """
    return select_frame(
        session,
        select(Item.id, Item.benchmark, Item.instance_id, Item.model).where(Item.study_id == study.id),
        ITEM_COLUMNS,
    )
