"""The agreement engine's input: clinicians, the jury and the metrics in one long table."""

from __future__ import annotations

import pandas as pd
from sqlmodel import Session

from medhelm_core.db.models import Study
from medhelm_core.frames.clinicians import clinician_ratings_frame
from medhelm_core.frames.jury import jury_long_frame
from medhelm_core.frames.metrics import metrics_long_frame
from medhelm_core.frames.rows import LONG_COLUMNS, without_items
from medhelm_core.rating.gold import gold_item_ids


def scores_long_frame(session: Session, study: Study, jury_run_id: int | None = None) -> pd.DataFrame:
    """Clinicians, the jury and the metrics in one long table for the agreement engine (``item_id`` as text;
    gold items left out: they measure the clinicians, see :mod:`medhelm_core.rating.gold`).

    Examples
    --------
    >>> long = scores_long_frame(session, study)  # doctest: +SKIP
    >>> long.groupby("rater_kind").size()  # doctest: +SKIP
    """
    parts = [
        clinician_ratings_frame(session, study),
        jury_long_frame(session, study, jury_run_id)[LONG_COLUMNS],
        metrics_long_frame(session, study),
    ]
    return stack_long(session, study, parts)


def stack_long(session: Session, study: Study, parts: list[pd.DataFrame]) -> pd.DataFrame:
    """``parts`` (long frames of :data:`LONG_COLUMNS`) as one, item ids as text and the study's gold items left
    out: how every loader of agreement inputs ends (:func:`scores_long_frame`, the verdict's frame)."""
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=LONG_COLUMNS)
    frame = pd.concat(parts, ignore_index=True)
    frame["item_id"] = frame["item_id"].astype(str)
    return without_items(frame, gold_item_ids(session, study))
