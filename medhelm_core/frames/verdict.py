"""What the verdict and the judge bias panel read: clinicians, the jury mean and each judge, and output lengths."""

from __future__ import annotations

import pandas as pd
from sqlmodel import Session, select

from medhelm_core.db.models import Item, Study
from medhelm_core.frames.clinicians import clinician_ratings_frame
from medhelm_core.frames.items import item_identity_frame
from medhelm_core.frames.jury import judge_scores_frame, jury_long
from medhelm_core.frames.long import stack_long
from medhelm_core.frames.rows import LONG_COLUMNS, select_frame
from medhelm_core.frames.runs import study_jury_run
from medhelm_core.rating.gold import gold_item_ids


def verdict_long_frame(session: Session, study: Study, jury_run_id: int | None = None) -> pd.DataFrame:
    """Clinicians, the jury mean and (when the run has two or more) each judge in the long contract.

    ``item_id`` as text; gold items left out, as in :func:`~medhelm_core.frames.scores_long_frame`; no metrics
    (the verdict is about the jury).

    Examples
    --------
    >>> verdict_long_frame(session, study).groupby("rater_kind").rater_id.nunique()  # doctest: +SKIP
    """
    parts = [clinician_ratings_frame(session, study)]
    run = study_jury_run(session, study, jury_run_id)
    if run is not None:
        scores = judge_scores_frame(session, run.id)
        parts.append(jury_long(scores, item_identity_frame(session, study), judges=True)[LONG_COLUMNS])
    return stack_long(session, study, parts)


def judge_samples_frame(session: Session, study: Study, jury_run_id: int | None = None) -> pd.DataFrame:
    """Every sample of every judge of the study's jury run (the verdict's run), one row per criterion, with
    ``sample``: what :func:`medhelm_core.agreement.bias.self_consistency` reads. Gold items left out.

    Examples
    --------
    >>> judge_samples_frame(session, study).groupby("judge")["sample"].nunique()  # doctest: +SKIP
    """
    run = study_jury_run(session, study, jury_run_id)
    if run is None:
        return pd.DataFrame(columns=["item_id", "judge", "status", "criterion", "score", "sample"])
    frame = judge_scores_frame(session, run.id, samples=True)
    gold = {str(i) for i in gold_item_ids(session, study)}
    return frame[~frame["item_id"].astype(str).isin(gold)] if gold else frame


def output_lengths(session: Session, study: Study) -> pd.Series:
    """Each item's output length in words, indexed by ``item_id`` as text (the verbosity slope's input).

    Examples
    --------
    >>> output_lengths(session, study).describe()  # doctest: +SKIP
    """
    frame = select_frame(session, select(Item.id, Item.output_text).where(Item.study_id == study.id),
                         ["item_id", "output"])
    if frame.empty:
        return pd.Series(dtype=float)
    return pd.Series(frame["output"].fillna("").str.split().str.len().to_numpy(dtype=float),
                     index=frame["item_id"].astype(str))
