"""A study's data version: a value that changes whenever a frame of the loader could, read in constant time."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from medhelm_core.db.data_versions import study_versions
from medhelm_core.db.models import Study


def data_version(session: Session, study: Study) -> tuple[Any, ...]:
    """The study's data version: it changes whenever the dashboard's figures could.

    The counters of :mod:`medhelm_core.db.data_versions` (one per benchmark of the study, one for the whole
    study, one for writes whose study was not known), which every write of ratings, submissions, items, jury
    runs, verdicts, metric scores, gold ranges and study settings bumps in its own transaction: one primary-key
    read, whatever the study's size (the fingerprint it replaces scanned the study eight times, 0.5 s at
    100,000 items). Pages key their caches on it, so a cached figure is never stale.

    Examples
    --------
    >>> before = data_version(session, study)  # doctest: +SKIP
    >>> record_rating(session, item=item, rater=dr_lee, rubric=rubric, scores=scores)  # doctest: +SKIP
    >>> data_version(session, study) != before  # doctest: +SKIP
    True
    """
    return (int(study.id), float(study.speed_threshold_seconds), study_versions(session, int(study.id)))
