"""Which jury runs the loader reads: a study's runs, the default one, one asked for by id, those to compare.

The default is the newest run with a surviving (``ok``) verdict: a run that failed or has not started
would otherwise hide the last usable jury. The dashboard, which always shows some run, falls back to the
newest run when none has a surviving verdict (``or_newest=True``); the CLI says "no jury run" instead.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from medhelm_core.db.models import JudgeVerdict, JuryRun, RunSource, RunStatus, Study, VerdictStatus
from medhelm_core.errors import NotFoundError

#: runs whose verdicts can be compared as versions: judges called here, or scores recorded elsewhere
COMPARABLE_SOURCES = (RunSource.litellm, RunSource.recorded)


def _with_verdicts():  # noqa: ANN202 - a scalar subquery
    return select(JudgeVerdict.jury_run_id).where(JudgeVerdict.status == VerdictStatus.ok.value)


def jury_runs(session: Session, study: Study) -> list[JuryRun]:
    """The study's jury runs, newest first (recorded runs included)."""
    return list(session.exec(select(JuryRun).where(JuryRun.study_id == study.id).order_by(col(JuryRun.id).desc())))


def default_jury_run(session: Session, study: Study, *, or_newest: bool = False) -> JuryRun | None:
    """The run agreement uses unless told otherwise: the newest with a surviving verdict.

    With ``or_newest``, a study whose runs have no surviving verdict gets its newest run rather than None
    (the dashboard names the run it shows, failed verdicts and all).

    Examples
    --------
    >>> default_jury_run(session, study)  # doctest: +SKIP
    JuryRun(id=3, name='openai/a+anthropic/b', ...)
    """
    runs = select(JuryRun).where(JuryRun.study_id == study.id).order_by(col(JuryRun.id).desc())
    run = session.exec(runs.where(col(JuryRun.id).in_(_with_verdicts()))).first()
    if run is None and or_newest:
        run = session.exec(runs).first()
    return run


def study_jury_run(
    session: Session, study: Study, jury_run_id: int | None = None, *, or_newest: bool = False
) -> JuryRun | None:
    """The run ``jury_run_id`` of ``study``, or the :func:`default_jury_run` when it is None.

    A run id that is not the study's is an error (a :class:`~medhelm_core.errors.NotFoundError` that lists
    the study's runs), never an empty jury.
    """
    if jury_run_id is None:
        return default_jury_run(session, study, or_newest=or_newest)
    run = session.get(JuryRun, jury_run_id)
    if run is None or run.study_id != study.id:
        known = ", ".join(str(r.id) for r in jury_runs(session, study)) or "none"
        raise NotFoundError(f"study {study.name!r} has no jury run {jury_run_id} (its runs: {known})")
    return run


def usable_run_ids(session: Session, study: Study) -> set[int]:
    """The ids of the study's runs worth listing: those with a surviving verdict, recorded runs, and runs a
    worker holds (running or stopping). The others (failed, or stopped before any verdict survived) are what a
    "show failed runs" switch brings back."""
    return set(session.exec(
        select(JuryRun.id).where(
            JuryRun.study_id == study.id,
            col(JuryRun.id).in_(_with_verdicts()) | (JuryRun.source == RunSource.recorded.value)
            | col(JuryRun.status).in_([RunStatus.running.value, RunStatus.stopping.value, RunStatus.pending.value]),
        )
    ).all())


def comparable_runs(session: Session, study: Study) -> list[JuryRun]:
    """The study's jury runs with at least one surviving verdict, oldest first (the versions to compare)."""
    return list(session.exec(
        select(JuryRun)
        .where(JuryRun.study_id == study.id, col(JuryRun.id).in_(_with_verdicts().distinct()),
               col(JuryRun.source).in_(COMPARABLE_SOURCES))
        .order_by(col(JuryRun.id))
    ).all())
