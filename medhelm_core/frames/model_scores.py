"""What the model figures read: the study's items, every score on them (clinicians, the jury and each judge,
ROUGE-L and BERTScore) and how the rated items were chosen (the rating design).

Built from the loader's own pieces (:func:`~medhelm_core.frames.clinicians.clinician_ratings_frame`,
:func:`~medhelm_core.frames.jury.judge_scores_frame` and :func:`~medhelm_core.frames.jury.jury_long`,
:func:`~medhelm_core.frames.metrics.metrics_long_frame`); gold items are left out, as in the agreement figures
(they measure the clinicians and are chosen for being clear-cut, not at random).
"""

from __future__ import annotations

import pandas as pd
from sqlmodel import Session, select

from medhelm_core.db.models import Assignment, Item, JuryRun, Rating, Study
from medhelm_core.frames.clinicians import clinician_ratings_frame
from medhelm_core.frames.items import ITEM_COLUMNS, item_identity_frame
from medhelm_core.frames.jury import judge_scores_frame, jury_long
from medhelm_core.frames.metrics import metrics_long_frame
from medhelm_core.frames.rows import LONG_COLUMNS, select_frame, without_items
from medhelm_core.frames.runs import study_jury_run
from medhelm_core.rating.gold import gold_item_ids

#: the metric scores set beside the raters on the Models page: ROUGE-L and BERTScore F1
MODEL_METRICS = ("rougeL_f", "bertscore_f1")
DESIGN_COLUMNS = [*ITEM_COLUMNS, "rated", "assigned", "drawn", "draw_probability"]


def model_items_frame(session: Session, study: Study) -> pd.DataFrame:
    """The study's items but its gold ones, by identity (``item_id`` an int), sorted by id."""
    items = item_identity_frame(session, study)
    return without_items(items, gold_item_ids(session, study)).sort_values("item_id", ignore_index=True)


def model_scores_long(
    session: Session, study: Study, jury_run_id: int | None = None, items: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, JuryRun | None]:
    """Every score on the study's items in the long contract (``item_id`` an int, gold items left out):
    the clinicians' current ratings, the jury mean of ``jury_run_id`` (default: the newest run with a
    surviving verdict) and each of its judges, and the :data:`MODEL_METRICS`; and the jury run used.

    Examples
    --------
    >>> long, run = model_scores_long(session, study)  # doctest: +SKIP
    >>> long.groupby("rater_kind").size()  # doctest: +SKIP
    """
    items = model_items_frame(session, study) if items is None else items
    run = study_jury_run(session, study, jury_run_id)
    parts = [clinician_ratings_frame(session, study)]
    if run is not None:
        parts.append(jury_long(judge_scores_frame(session, run.id), items, judges=True)[LONG_COLUMNS])
    parts.append(metrics_long_frame(session, study, MODEL_METRICS))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=LONG_COLUMNS), run
    long = pd.concat(parts, ignore_index=True)
    return long[long["item_id"].isin(items["item_id"])].reset_index(drop=True), run


def rating_design_frame(session: Session, study: Study, items: pd.DataFrame | None = None) -> pd.DataFrame:
    """How each item came to be rated or not: :data:`DESIGN_COLUMNS`.

    ``rated``: a clinician has a current rating of it; ``assigned``: an ordinary (not test-retest) assignment of
    this app gave it to a clinician; ``drawn``: the "rate these next" mode drew it, with ``draw_probability``
    (the largest recorded, when it was drawn more than once).

    Examples
    --------
    >>> rating_design_frame(session, study).groupby(["rated", "assigned"]).size()  # doctest: +SKIP
    """
    items = model_items_frame(session, study) if items is None else items
    rated = set(session.exec(
        select(Rating.item_id).join(Item, Item.id == Rating.item_id).where(Item.study_id == study.id).distinct()
    ).all())
    assignments = select_frame(
        session,
        select(Assignment.item_id, Assignment.draw_probability)
        .where(Assignment.study_id == study.id, Assignment.retest == False),  # noqa: E712 - SQL comparison
        ["item_id", "draw_probability"],
    )
    drawn = assignments.dropna(subset=["draw_probability"]).groupby("item_id")["draw_probability"].max()
    ids = items["item_id"]
    return items[ITEM_COLUMNS].assign(
        rated=ids.isin(rated),
        assigned=ids.isin(set(assignments["item_id"])),
        drawn=ids.isin(set(drawn.index)),
        draw_probability=ids.map(drawn).astype(float),
    ).reset_index(drop=True)[DESIGN_COLUMNS]
