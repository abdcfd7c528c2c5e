"""A study's pre-registered verdict: fix the acceptance protocol, read the verdict and the judge bias panel.

The protocol (:class:`~medhelm_core.agreement.verdict.VerdictProtocol`) is stored with the study with the
time it was fixed; every change is an audit event (``study.verdict_protocol``). The first time the verdict's
results are shown (the Verdict page, ``medhelm verdict STUDY``, the report) is recorded too
(``verdict.viewed``), so that a protocol fixed after that is flagged: "protocol changed after results were
viewed". The statistics are :mod:`medhelm_core.agreement.verdict` and :mod:`medhelm_core.agreement.bias`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from sqlmodel import Session

from medhelm_core.agreement.bias import (
    bias_panel,
    bias_sentences,
    calibration_map,
    judge_pairs,
    scale_use,
    self_consistency,
    self_consistency_sentences,
)
from medhelm_core.agreement.contract import rater_scores, validate_long
from medhelm_core.agreement.verdict import VerdictProtocol, design_sentences, verdict_sentences, verdict_table
from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import AuditAction, Study, utcnow
from medhelm_core.errors import AgreementInputError, ValidationError
from medhelm_core.frames.verdict import judge_samples_frame, output_lengths, verdict_long_frame


def study_protocol(study: Study) -> VerdictProtocol:
    """The study's protocol, or the default one when none was fixed."""
    return VerdictProtocol.from_dict(study.verdict_protocol)


def _aware(when: datetime | None) -> datetime | None:
    # SQLite hands timezone-aware columns back naive; they were written in UTC
    return when.replace(tzinfo=UTC) if when is not None and when.tzinfo is None else when


def changed_after_viewing(study: Study) -> bool:
    """True when the protocol was (re)fixed after the verdict's results were first viewed."""
    fixed, viewed = _aware(study.verdict_protocol_fixed_at), _aware(study.verdict_viewed_at)
    return fixed is not None and viewed is not None and fixed > viewed


def fix_protocol(session: Session, study: Study, changes: dict[str, Any], *, actor: Actor = None) -> VerdictProtocol:
    """Fix (or change) the study's protocol, in the caller's transaction, with its audit event.

    ``changes`` are merged into the current protocol and checked; the event records the protocol before and
    after and whether the verdict had already been viewed.

    Examples
    --------
    >>> fix_protocol(session, study, {"epsilon": 0.15, "min_items": 60}, actor=user)  # doctest: +SKIP
    """
    before = study_protocol(study)
    try:
        after = VerdictProtocol.from_dict({**before.to_dict(), **changes})
    except AgreementInputError as exc:
        raise ValidationError(str(exc)) from None
    viewed = study.verdict_viewed_at is not None
    previous = before.to_dict() if study.verdict_protocol is not None else None
    study.verdict_protocol = after.to_dict()
    study.verdict_protocol_fixed_at = utcnow()
    session.add(study)
    record_event(session, AuditAction.study_verdict_protocol, actor=actor, study_id=study.id,
                 protocol=after.to_dict(), previous=previous,
                 after_results_viewed=viewed)
    return after


def mark_viewed(session: Session, study: Study, *, actor: Actor = None) -> None:
    """Record the first viewing of the verdict's results (later viewings change nothing)."""
    if study.verdict_viewed_at is not None:
        return
    study.verdict_viewed_at = utcnow()
    session.add(study)
    record_event(session, AuditAction.verdict_viewed, actor=actor, study_id=study.id,
                 protocol_fixed=study.verdict_protocol is not None)


@dataclass
class StudyVerdict:
    """The verdict of a study and its bias panel, with the words that go with them."""

    protocol: VerdictProtocol
    pre_registered: bool
    changed_after_viewing: bool
    protocol_fixed_at: datetime | None
    table: pd.DataFrame
    sentences: list[str]
    design: list[str]
    bias: pd.DataFrame
    scale: pd.DataFrame
    calibration: pd.DataFrame | None
    calibration_fit: dict[str, Any] | None
    bias_words: list[str] = field(default_factory=list)
    #: each judge's agreement with itself over repeated samples (:func:`~medhelm_core.agreement.bias.self_consistency`)
    self_consistency: pd.DataFrame | None = None

    @property
    def flags(self) -> list[str]:
        """Warnings about the protocol, for the top of the page and the report."""
        out = []
        if not self.pre_registered:
            out.append("No protocol was fixed before the results were computed: the default protocol is shown, "
                       "and the verdict is not pre-registered.")
        if self.changed_after_viewing:
            out.append("Protocol changed after results were viewed (see the audit trail).")
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the protocol, flags, verdict rows, words and bias figures."""
        def records(frame: pd.DataFrame | None) -> list[dict[str, Any]]:
            if frame is None:
                return []
            return [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
                    for r in frame.to_dict("records")]

        return {"protocol": self.protocol.to_dict(), "pre_registered": self.pre_registered,
                "protocol_fixed_at": self.protocol_fixed_at.isoformat() if self.protocol_fixed_at else None,
                "changed_after_viewing": self.changed_after_viewing, "flags": self.flags,
                "verdict": records(self.table), "sentences": self.sentences, "design": self.design,
                "bias": records(self.bias), "scale_use": records(self.scale),
                "calibration_map": records(self.calibration), "calibration_fit": self.calibration_fit,
                "bias_words": self.bias_words, "self_consistency": records(self.self_consistency)}


def study_verdict(session: Session, study: Study, jury_run_id: int | None = None, *, actor: Actor = None,
                  record_view: bool = True, benchmarks: Sequence[str] | None = None) -> StudyVerdict:
    """Compute the study's verdict and bias panel under its protocol; record the viewing unless told not to.

    The benchmarks pooled are ``benchmarks``, else the study's saved Agreement view, else all.

    Examples
    --------
    >>> result = study_verdict(session, study, actor=user)  # doctest: +SKIP
    >>> result.table.query("benchmark == 'pooled'")  # doctest: +SKIP
    """
    protocol = study_protocol(study)
    long = verdict_long_frame(session, study, jury_run_id)
    lengths = output_lengths(session, study)
    if record_view:
        mark_viewed(session, study, actor=actor)
    benchmarks = list(benchmarks or study.agreement_benchmarks or []) or None
    if long.empty or not (long["rater_kind"] == "clinician").any() or not long["rater_kind"].isin(["jury"]).any():
        empty = pd.DataFrame()
        return StudyVerdict(protocol, study.verdict_protocol is not None, changed_after_viewing(study),
                            _aware(study.verdict_protocol_fixed_at), empty,
                            ["No verdict yet: the study needs clinicians' ratings and a jury run."], [], empty, empty,
                            None, None)
    known = set(long["benchmark"])
    benchmarks = [b for b in benchmarks if b in known] if benchmarks else None
    table = verdict_table(long, protocol, benchmarks or None)
    scores = rater_scores(validate_long(long), protocol.criterion)
    if benchmarks:
        scores = scores[scores["benchmark"].isin(benchmarks)]
    pairs = judge_pairs(scores)
    bias = bias_panel(pairs, lengths if not lengths.empty else None)
    scale = scale_use(scores)
    jury = pairs[pairs["rater_id"] == "jury"]
    calibration, fit = None, None
    if len(jury) >= 10:
        x = jury["score"].to_numpy()
        # read the map only where the jury's scores lie: outside them an isotonic fit is flat by construction
        grid = [g / 2 for g in range(2, 11) if x.min() <= g / 2 <= x.max()] or [float(x.mean())]
        calibration, fit = calibration_map(x, jury["clinician_mean"].to_numpy(), grid=grid, n_boot=200, seed=0)
    consistency = self_consistency(judge_samples_frame(session, study, jury_run_id))
    return StudyVerdict(protocol, study.verdict_protocol is not None, changed_after_viewing(study),
                        _aware(study.verdict_protocol_fixed_at), table, verdict_sentences(table, protocol),
                        design_sentences(scores, protocol), bias, scale, calibration, fit,
                        bias_sentences(bias, scale, calibration) + self_consistency_sentences(consistency),
                        consistency)
