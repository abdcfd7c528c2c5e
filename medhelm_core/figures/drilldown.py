"""One item in full, for the dashboard's drill-down: its texts, each clinician's scores and comment, each
judge's score and explanation. Researchers only: the model's name is part of it.

Read live from the database (never cached), so a comment or a revision made a moment ago is there.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from sqlmodel import Session

from medhelm_core.db.models import Study
from medhelm_core.frames import item_clinicians_frame, item_verdicts_frame
from medhelm_core.studies import study_item


@dataclass(frozen=True)
class ItemDetail:
    """An item with everything said about it."""

    item_id: int
    benchmark: str
    instance_id: str
    model: str
    input_text: str
    output_text: str
    reference_text: str | None
    #: one row per clinician: rater, revision, submitted_at, score_<criterion> ..., comment, flag
    clinicians: pd.DataFrame
    #: one row per judge of the run: judge, status, score_<criterion> ..., explanation_<criterion> ..., error
    judges: pd.DataFrame

    @property
    def judge_scores(self) -> pd.DataFrame:
        """:attr:`judges` without the explanations (they run long; :meth:`explanations` lists them)."""
        return self.judges[[c for c in self.judges.columns if not c.startswith("explanation_")]]

    def explanations(self) -> list[tuple[str, str, str]]:
        """Each judge's explanation per criterion, as (judge, criterion, text), leaving out empty ones."""
        return [
            (record["judge"], key.removeprefix("explanation_"), value)
            for record in self.judges.to_dict("records")
            for key, value in record.items()
            if key.startswith("explanation_") and isinstance(value, str) and value
        ]


def item_detail(session: Session, study: Study, item_id: int, jury_run_id: int | None = None) -> ItemDetail:
    """The item ``item_id`` of ``study`` with its clinicians' latest submissions and the run's verdicts.

    Raises :class:`NotFoundError` when the item is not in the study (an id typed by hand, or a stale click).

    Examples
    --------
    >>> detail = item_detail(session, study, 42, jury_run_id=3)  # doctest: +SKIP
    >>> detail.judges[["judge", "status", "score_accuracy", "explanation_accuracy"]]  # doctest: +SKIP
    """
    item = study_item(session, study, item_id)
    return ItemDetail(
        item_id=int(item.id),
        benchmark=item.benchmark,
        instance_id=item.instance_id,
        model=item.model,
        input_text=item.input_text,
        output_text=item.output_text,
        reference_text=item.reference_text,
        clinicians=item_clinicians_frame(session, item.id),
        judges=item_verdicts_frame(session, jury_run_id, item.id) if jury_run_id is not None else pd.DataFrame(),
    )
