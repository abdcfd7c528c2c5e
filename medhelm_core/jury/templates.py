"""Versioned judge prompt templates: an edit is a new version, a stored version never changes.

A template has a name (``medhelm`` is the bundled one) and versions 1, 2, 3 ... Version 1 of ``medhelm``
is :data:`~medhelm_core.jury.prompt.DEFAULT_TEMPLATE`, stored on first use. Saving text identical to the
latest version's adds no version, so pressing Save twice, or re-adding an unchanged file, keeps the list
short. A jury run records which version it used (see :class:`~medhelm_core.jury.config.JuryConfig`); the
config hash is taken over the text, so two versions with the same text share their cached verdicts.

Every new version is written with a ``prompt_template.saved`` audit event in the caller's transaction.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import event
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import AuditAction, PromptTemplate
from medhelm_core.errors import MedhelmError, NotFoundError, ValidationError
from medhelm_core.jury.prompt import DEFAULT_TEMPLATE, DEFAULT_TEMPLATE_NAME, check_template

DEFAULT_TEMPLATE_NOTE = "bundled default: MedHELM's jury prompt with the evaluated texts fenced"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}$")


def text_hash(text: str) -> str:
    """SHA-256 of a template's text: what :attr:`JuryConfig.template_hash` is, so both always agree."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class TemplateVersion:
    """One stored version of a prompt template, as plain data."""

    name: str
    version: int
    text: str
    text_hash: str
    note: str
    created_by: str
    created_at: datetime | None

    @property
    def label(self) -> str:
        """``medhelm v2``: how runs, tables and the CLI name it."""
        return f"{self.name} v{self.version}"


def _plain(row: PromptTemplate) -> TemplateVersion:
    at = row.created_at
    if at is not None and at.tzinfo is None:  # SQLite gives back naive UTC
        at = at.replace(tzinfo=UTC)
    return TemplateVersion(row.name, row.version, row.text, row.text_hash, row.note, row.created_by, at)


@event.listens_for(PromptTemplate, "before_update")
def _refuse_update(_mapper: object, _connection: object, target: PromptTemplate) -> None:
    # Runs name their template by (name, version); changing a stored version would rewrite their history.
    raise ValidationError(
        f"prompt template {target.name} v{target.version} is stored and cannot change; save a new version instead"
    )


def check_template_name(name: str) -> str:
    """A template name: letters, digits, ``_ . -``, starting with a letter or digit, at most 200 characters."""
    cleaned = (name or "").strip()
    if not _NAME.match(cleaned):
        raise ValidationError(
            f"template name {name!r} must be letters, digits, '_', '.' or '-' (at most 200 characters), "
            f"e.g. {DEFAULT_TEMPLATE_NAME}"
        )
    return cleaned


def _rows(session: Session, name: str) -> list[PromptTemplate]:
    return list(session.exec(select(PromptTemplate).where(PromptTemplate.name == name)
                             .order_by(col(PromptTemplate.version))).all())


def ensure_default_template(session: Session) -> TemplateVersion:
    """Version 1 of ``medhelm``, storing the bundled template first if it is not stored yet (idempotent).

    Call it inside a transaction: the first call adds a row (and its audit event) to ``session``.
    """
    row = session.exec(
        select(PromptTemplate).where(PromptTemplate.name == DEFAULT_TEMPLATE_NAME, PromptTemplate.version == 1)
    ).first()
    if row is not None:
        return _plain(row)
    row = PromptTemplate(name=DEFAULT_TEMPLATE_NAME, version=1, text=DEFAULT_TEMPLATE,
                         text_hash=text_hash(DEFAULT_TEMPLATE), note=DEFAULT_TEMPLATE_NOTE, created_by="system")
    return _add(session, row, actor=None)


def _add(session: Session, row: PromptTemplate, actor: Actor) -> TemplateVersion:
    audit = record_event(session, AuditAction.prompt_template_saved, actor=actor, name=row.name, version=row.version,
                         text_hash=row.text_hash, chars=len(row.text))
    row.created_by = audit.actor[:150]
    session.add(row)
    try:
        session.flush()
    except IntegrityError:
        raise MedhelmError(
            f"prompt template {row.name} v{row.version} was saved by someone else at the same moment; try again"
        ) from None
    return _plain(row)


def save_template_version(
    session: Session, name: str, text: str, note: str = "", actor: Actor = None
) -> tuple[TemplateVersion, bool]:
    """Store ``text`` as the next version of template ``name``, unless it equals the latest version's text.

    Parameters
    ----------
    session : Session
        The caller's session; the version and its audit event are committed with the caller's transaction.
    name : str
        The template's name (``medhelm`` for the bundled one, or a new name).
    text : str
        The template, with ``$placeholders`` (checked by :func:`~medhelm_core.jury.prompt.check_template`).
    note : str
        What changed and why, shown beside the version.
    actor
        Who saved it (a user, a principal, ``"cli"``), for ``created_by`` and the audit trail.

    Returns
    -------
    tuple of (TemplateVersion, bool)
        The version that holds ``text`` and whether it was created now (False: the latest had this text).

    Raises
    ------
    ValidationError
        A malformed name, or a template with an unknown or missing placeholder.

    Examples
    --------
    >>> v, created = save_template_version(session, "medhelm", DEFAULT_TEMPLATE + "Be strict.\\n",
    ...                                    note="stricter", actor="cli")  # doctest: +SKIP
    >>> v.label, created  # doctest: +SKIP
    ('medhelm v2', True)
    """
    name = check_template_name(name)
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("the prompt template is empty")
    check_template(text)
    if name == DEFAULT_TEMPLATE_NAME:
        ensure_default_template(session)
    rows = _rows(session, name)
    digest = text_hash(text)
    if rows and rows[-1].text_hash == digest and rows[-1].text == text:
        return _plain(rows[-1]), False
    row = PromptTemplate(name=name, version=(rows[-1].version + 1) if rows else 1, text=text, text_hash=digest,
                         note=(note or "").strip())
    return _add(session, row, actor), True


def template_names(session: Session) -> list[str]:
    """Every template name stored, ``medhelm`` first (stored now if it was not)."""
    ensure_default_template(session)
    names = session.exec(select(PromptTemplate.name).distinct()).all()
    return sorted(set(names), key=lambda n: (n != DEFAULT_TEMPLATE_NAME, n))


def list_template_versions(session: Session, name: str | None = None) -> list[TemplateVersion]:
    """The stored versions of template ``name`` (of every template when None), oldest first.

    The bundled ``medhelm`` v1 is stored first if it is not yet, so it is always listed.
    """
    ensure_default_template(session)
    query = select(PromptTemplate).order_by(col(PromptTemplate.name), col(PromptTemplate.version))
    if name is not None:
        query = query.where(PromptTemplate.name == name)
    rows = [_plain(r) for r in session.exec(query).all()]
    if name is not None and not rows:
        raise NotFoundError(f"no prompt template named {name!r} (templates: {', '.join(template_names(session))})")
    return rows


def get_template_version(session: Session, name: str, version: int | None = None) -> TemplateVersion:
    """Version ``version`` of template ``name``; its latest when ``version`` is None."""
    versions = list_template_versions(session, name)
    if version is None:
        return versions[-1]
    for v in versions:
        if v.version == version:
            return v
    known = ", ".join(f"v{v.version}" for v in versions)
    raise NotFoundError(f"prompt template {name} has no version {version} (its versions: {known})")


def latest_template_version(session: Session, name: str = DEFAULT_TEMPLATE_NAME) -> TemplateVersion:
    """The newest version of template ``name``."""
    return get_template_version(session, name, None)


def find_template_by_text(session: Session, text: str, name: str | None = None) -> TemplateVersion | None:
    """The oldest stored version whose text is ``text`` (of template ``name`` when given), else None."""
    query = select(PromptTemplate).where(PromptTemplate.text_hash == text_hash(text))
    if name is not None:
        query = query.where(PromptTemplate.name == name)
    for row in session.exec(query.order_by(col(PromptTemplate.version), col(PromptTemplate.id))).all():
        if row.text == text:
            return _plain(row)
    return None


def template_for_text(
    session: Session, name: str, text: str, note: str = "", actor: Actor = None
) -> tuple[TemplateVersion, bool]:
    """The version of ``name`` holding ``text``: an existing one (any version), else a new one saved now.

    For a template given as a file (``jury.toml``), so that every run names a stored version.
    """
    name = check_template_name(name)
    check_template(text)
    if name == DEFAULT_TEMPLATE_NAME:
        ensure_default_template(session)
    found = find_template_by_text(session, text, name)
    if found is not None:
        return found, False
    return save_template_version(session, name, text, note, actor)

