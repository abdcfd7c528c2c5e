"""Recorded jury runs: verdicts given elsewhere, stored as a jury run labelled ``recorded``.

MedHELM's published jury means (a ratings file) and the verdicts of MedHELM's jury in HELM's run folders
were not asked for by this app, but once stored as a :class:`~medhelm_core.db.models.JuryRun` with
``source='recorded'`` everything built on jury runs (the jury mean, agreement, judge subsets, versions, the
drill-down) reads them as it reads a live run, and every page and report labels them as recorded.

A recorded run is found again by its study and name, and each verdict by its item and judge, so importing
the same files twice writes nothing the second time. A verdict that could not be read is stored as failed
with its reason and raw text, never as a score.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, func, select

from medhelm_core.db.models import JudgeVerdict, JuryRun, RunSource, RunStatus, Study, VerdictStatus, utcnow
from medhelm_core.importers.records import ImportReport


def sha256_json(value: Any) -> str:
    """The SHA-256 of ``value`` as canonical JSON, as :func:`medhelm_core.jury.config.sha256_json` (which is
    not imported here: the jury package loads pandas, and an import should start fast)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class RecordedVerdict:
    """One judge's verdict on one item as a file recorded it: scores when it could be read, else the reason."""

    item_id: int
    judge: str
    status: str = VerdictStatus.ok.value
    scores: dict[str, float] = field(default_factory=dict, hash=False)
    explanations: dict[str, str] = field(default_factory=dict, hash=False)
    prompt: str = ""
    raw_response: str = ""
    error: str | None = None

    @property
    def failed(self) -> bool:
        """True when the verdict holds no usable score."""
        return self.status != VerdictStatus.ok.value


def recorded_run(session: Session, study: Study, name: str, config: dict[str, Any]) -> tuple[JuryRun, bool]:
    """The study's recorded run called ``name``, created with ``config`` when it is new: ``(run, created)``.

    The caller decides what an existing run's config may become (:func:`update_config`).
    """
    run = session.exec(
        select(JuryRun).where(JuryRun.study_id == study.id, JuryRun.source == RunSource.recorded,
                              JuryRun.name == name)
    ).first()
    if run is not None:
        return run, False
    run = JuryRun(
        study_id=study.id,
        name=name,
        source=RunSource.recorded,
        config=config,
        config_hash=sha256_json(config),
        status=RunStatus.recorded,
        finished_at=utcnow(),
    )
    session.add(run)
    session.flush()
    return run, True


def update_config(session: Session, run: JuryRun, config: dict[str, Any]) -> None:
    """Store ``config`` (and its hash) on ``run`` when it differs from the stored one."""
    if run.config != config:
        run.config = config
        run.config_hash = sha256_json(config)
        session.add(run)


def write_recorded_verdicts(
    session: Session, run: JuryRun, verdicts: Iterable[RecordedVerdict], report: ImportReport, cache_key: str
) -> None:
    """Insert or update ``verdicts`` in ``run`` (one per item and judge) and count what changed.

    A verdict equal to the stored one (status, scores, explanations, prompt, raw text, error) is left as it
    is; the run's ``calls_done`` and ``calls_failed`` then say how many verdicts it holds and how many failed.
    ``cache_key`` marks the verdicts as this recorded run's, so no live run ever copies them as its own.
    """
    current = {
        (v.item_id, v.judge): v
        for v in session.exec(select(JudgeVerdict).where(JudgeVerdict.jury_run_id == run.id)).all()
    }
    for verdict in verdicts:
        if verdict.failed:
            report.verdicts_failed += 1
        stored = current.get((verdict.item_id, verdict.judge))
        wanted = (verdict.status, verdict.scores, verdict.explanations, verdict.prompt, verdict.raw_response,
                  verdict.error, cache_key)
        if stored is not None and wanted == (stored.status, stored.scores, stored.explanations, stored.prompt,
                                             stored.raw_response, stored.error, stored.cache_key):
            report.verdicts_unchanged += 1
            continue
        if stored is None:
            stored = JudgeVerdict(jury_run_id=run.id, item_id=verdict.item_id, judge=verdict.judge)
            current[(verdict.item_id, verdict.judge)] = stored
        stored.status, stored.scores, stored.explanations = verdict.status, dict(verdict.scores), dict(
            verdict.explanations)
        stored.prompt, stored.raw_response, stored.error = verdict.prompt, verdict.raw_response, verdict.error
        stored.cache_key = cache_key
        session.add(stored)
        report.verdicts_written += 1
    session.flush()
    counts = session.exec(
        select(func.count(), func.count().filter(JudgeVerdict.status != VerdictStatus.ok.value))
        .where(JudgeVerdict.jury_run_id == run.id)
    ).one()
    if (run.calls_done, run.calls_failed) != (int(counts[0]), int(counts[1])):
        run.calls_done, run.calls_failed = int(counts[0]), int(counts[1])
        session.add(run)
        session.flush()
