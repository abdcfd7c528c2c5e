"""A run's results as tidy frames: each judge's score and explanation, and the jury mean per item.

The jury mean of an item is the unweighted mean over every surviving (``ok``) judge and criterion, on the
rubric's scale, with ``n_judges`` saying how many judges it rests on and ``n_failed`` how many failed. An
item with no surviving judge has no jury score (NaN), never a default. The frames come from the loader
(:mod:`medhelm_core.frames.jury`), so the per-criterion means are those the agreement engine reads; this
module names the run and says when there is no such run.
"""

from __future__ import annotations

import pandas as pd
from sqlmodel import Session

from medhelm_core.db.models import JuryRun, Study
from medhelm_core.errors import NotFoundError
from medhelm_core.frames import item_jury_scores as study_item_jury_scores
from medhelm_core.frames import judge_scores_frame, jury_long_frame


def _run(session: Session, run_id: int) -> JuryRun:
    run = session.get(JuryRun, run_id)
    if run is None:
        raise NotFoundError(f"no jury run with id {run_id}")
    return run


def verdict_scores_frame(session: Session, run_id: int) -> pd.DataFrame:
    """One row per verdict and criterion (a failed verdict: one row, no criterion, with its error and raw text),
    in item and judge order, with the item's identity and the judge's explanation.

    Examples
    --------
    >>> frame = verdict_scores_frame(session, run.id)  # doctest: +SKIP
    >>> frame.query("status == 'ok'").groupby("judge").score.mean()  # doctest: +SKIP
    """
    _run(session, run_id)
    return judge_scores_frame(session, run_id, texts=True)


def item_jury_scores(session: Session, run_id: int) -> pd.DataFrame:
    """Per item of the study: the jury score over surviving judges and criteria, and how many judges.

    Every item of the study is listed; one without a surviving judge has ``jury_score`` NaN.
    """
    return study_item_jury_scores(session, _run(session, run_id))


def criterion_means(session: Session, run_id: int) -> pd.DataFrame:
    """The jury mean per item and criterion over surviving judges, with ``n_judges`` (long format)."""
    run = _run(session, run_id)
    return jury_long_frame(session, session.get(Study, run.study_id), run_id)
