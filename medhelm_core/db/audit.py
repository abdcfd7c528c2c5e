"""The audit trail: who did what, when, to which study.

:func:`record_event` adds one :class:`~medhelm_core.db.models.AuditEvent` to the caller's session, so it is
committed, or rolled back, together with the change it describes: there is never a rating without its
audit row, nor an audit row for a change that did not happen. :func:`audit_events` reads the trail back
for ``medhelm audit export``.

Actions in use: ``rating.submitted``, ``adjudication.submit``, ``assignment.balanced``,
``assignment.drawn`` (the "rate these next" mode), ``assignment.moved``, ``import``, ``export``,
``report.export``, ``user.added``, ``user.disabled``, ``user.enabled``, ``user.role_changed``,
``user.password_changed``; study design adds
``study.plan``, ``study.retest``, ``study.speed_threshold``, ``adjudication.threshold``, ``gold.import`` and
``gold.clear``; the jury adds ``jury.run``, ``prompt_template.saved`` and ``rubric.version_saved``.
Details never hold passwords, tokens, keys or free text a clinician typed (that may name a patient).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session, select

from medhelm_core.db.models import AuditAction, AuditEvent, Study, User
from medhelm_core.errors import ValidationError

#: who an event is attributed to: an account, a signed-in principal, a name (``"cli"``), or nobody
#: (a Principal is taken by its attributes: importing medhelm_core.accounts.auth here would be circular via users)
Actor = Any
SYSTEM_ACTOR = "system"


def _who(actor: Actor) -> tuple[int | None, str]:
    if isinstance(actor, User):
        return actor.id, actor.username
    if hasattr(actor, "user_id") and hasattr(actor, "username"):  # medhelm_core.accounts.auth.Principal
        return actor.user_id, actor.username
    return None, str(actor) if actor else SYSTEM_ACTOR


def record_event(
    session: Session, action: AuditAction, *, actor: Actor = None, study_id: int | None = None, **details: Any
) -> AuditEvent:
    """Add an audit event to ``session`` (inside the caller's transaction; nothing is committed here).

    Parameters
    ----------
    session
        The session that makes the change being recorded.
    action
        What happened, as ``noun.verb`` (``rating.submitted``, ``import`` ...).
    actor
        Who did it: a :class:`User`, a :class:`Principal`, a name such as ``"cli"``, or None (``system``).
    study_id
        The study concerned, if any.
    **details
        JSON-serialisable facts about the change (values that are not, such as paths, are stored as text).

    Returns
    -------
    AuditEvent
        The added row (its id is set when the session next flushes).

    Examples
    --------
    >>> record_event(session, AuditAction.export, actor="cli", study_id=3, format="csv")  # doctest: +SKIP
    """
    user_id, name = _who(actor)
    event = AuditEvent(
        user_id=user_id,
        actor=name,
        action=action,
        study_id=study_id,
        details=json.loads(json.dumps(details, default=str)),
    )
    session.add(event)  # flushed with the change it records (no extra round trip per rating of an import)
    return event


@dataclass(frozen=True)
class AuditRow:
    """One audit event as exported: plain values, the study by name."""

    id: int
    at: str
    actor: str
    user_id: int | None
    action: str
    study: str | None
    study_id: int | None
    details: dict[str, Any]


def parse_since(value: str | None) -> datetime | None:
    """An ISO 8601 date or time as UTC (a value without a zone is read as UTC)."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(
            f"--since {value!r} is not an ISO date or time (e.g. 2026-12-01 or 2026-12-01T08:00)"
        ) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def audit_events(
    session: Session,
    *,
    since: datetime | None = None,
    study: Study | None = None,
    actions: Sequence[str] | None = None,
) -> list[AuditRow]:
    """The audit trail in the order it was written, optionally from ``since`` on, for one study or action."""
    query = select(AuditEvent).order_by(AuditEvent.id)
    if since is not None:
        query = query.where(AuditEvent.at >= since)
    if study is not None:
        query = query.where(AuditEvent.study_id == study.id)
    if actions:
        query = query.where(AuditEvent.action.in_(list(actions)))
    names = dict(session.exec(select(Study.id, Study.name)).all())
    rows = []
    for event in session.exec(query).all():
        at = event.at if event.at.tzinfo else event.at.replace(tzinfo=UTC)  # SQLite returns naive UTC
        rows.append(
            AuditRow(event.id, at.isoformat(), event.actor, event.user_id, event.action,
                     names.get(event.study_id), event.study_id, dict(event.details or {}))
        )
    return rows
