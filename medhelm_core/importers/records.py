"""What every importer produces, and how items are stored idempotently."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, select

from medhelm_core.db.models import Item, JudgeVerdict, Rating, Study
from medhelm_core.errors import InputFileError, ValidationError
from medhelm_core.importers.values import ID_LENGTHS, check_identifier, check_meta, check_text


@dataclass
class ItemRecord:
    """One item read from a file, with where it came from (for error messages)."""

    benchmark: str
    instance_id: str
    model: str
    input_text: str
    output_text: str
    reference_text: str | None
    meta: dict[str, Any]
    source: str
    line: int | None = None
    #: where in a nested file the record was (``request_states[3].``), prefixed to a field's name in errors
    at: str = ""
    #: False when the file held no texts for the item (a ratings file alone): such a record creates the item
    #: with empty texts but never changes a stored one
    has_texts: bool = True

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.benchmark, self.instance_id, self.model)

    def where(self) -> str:
        return f"{self.source}, line {self.line}" if self.line is not None else self.source


@dataclass
class ImportReport:
    """Counts of what an import did; re-importing the same files gives zero created or updated."""

    files: list[str] = field(default_factory=list)
    format: str = ""
    items_read: int = 0
    items_created: int = 0
    items_updated: int = 0
    items_unchanged: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    raters_created: int = 0
    ratings_written: int = 0
    ratings_unchanged: int = 0
    verdicts_written: int = 0
    verdicts_unchanged: int = 0
    #: recorded verdicts read that hold no score (stored as failed with their reason, never counted as scores)
    verdicts_failed: int = 0
    metric_scores_written: int = 0
    metric_scores_unchanged: int = 0

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def check_values(rec: ItemRecord) -> None:
    """Refuse a record the database cannot store as it is, naming the field (see :mod:`.values`)."""
    for name, max_length in ID_LENGTHS.items():
        check_identifier(getattr(rec, name), rec.source, rec.line, rec.at + name, max_length)
    for name in ("input_text", "output_text", "reference_text"):
        text = getattr(rec, name)
        if text is not None:
            check_text(text, rec.source, rec.line, rec.at + name.removesuffix("_text"))
    check_meta(rec.meta, rec.source, rec.line)


def check_unique(records: list[ItemRecord]) -> None:
    """Refuse two records for the same (benchmark, instance, model), naming both places."""
    seen: dict[tuple[str, str, str], ItemRecord] = {}
    for rec in records:
        first = seen.get(rec.key)
        if first is not None:
            raise InputFileError(
                rec.source,
                f"item {rec.key} appears twice (first at {first.where()})",
                line=rec.line,
            )
        seen[rec.key] = rec


def store_items(
    session: Session, study: Study, records: list[ItemRecord], report: ImportReport
) -> dict[tuple[str, str, str], Item]:
    """Insert new items and update changed ones; returns every record's stored item by key.

    An item whose texts changed is updated only while nobody has rated or judged it: once it has
    ratings or verdicts, changing what was rated would make them meaningless, so that is refused. Two
    exceptions change nothing that was rated: an item stored without its texts (``meta.text_available``
    false) gets them whenever a file has them, and a record without texts (``has_texts`` false) leaves a
    stored item as it is. Every record is checked before the first statement, so a refused file sends none
    of its text.
    """
    for rec in records:
        check_values(rec)
    check_unique(records)
    existing = {
        (i.benchmark, i.instance_id, i.model): i
        for i in session.exec(select(Item).where(Item.study_id == study.id)).all()
    }
    stored: dict[tuple[str, str, str], Item] = {}
    for rec in records:
        report.items_read += 1
        item = existing.get(rec.key)
        if item is None:
            item = Item(
                study_id=study.id,
                benchmark=rec.benchmark,
                instance_id=rec.instance_id,
                model=rec.model,
                input_text=rec.input_text,
                output_text=rec.output_text,
                reference_text=rec.reference_text,
                meta=rec.meta,
            )
            session.add(item)
            report.items_created += 1
        elif not rec.has_texts or (item.input_text, item.output_text, item.reference_text, item.meta) == (
            rec.input_text,
            rec.output_text,
            rec.reference_text,
            rec.meta,
        ):
            report.items_unchanged += 1
        else:
            if not _fills_missing_texts(item, rec) and _is_rated(session, item):
                raise InputFileError(
                    rec.source,
                    f"item {rec.key} is already rated or judged and its text differs from the stored one; "
                    "import changed outputs into a new study",
                    line=rec.line,
                )
            item.input_text, item.output_text = rec.input_text, rec.output_text
            item.reference_text, item.meta = rec.reference_text, rec.meta
            session.add(item)
            report.items_updated += 1
        stored[rec.key] = item
    session.flush()
    return stored


def _fills_missing_texts(item: Item, rec: ItemRecord) -> bool:
    """True when ``rec`` gives texts to an item stored without them, and changes no text it had."""
    return (
        (item.meta or {}).get("text_available") is False
        and not item.input_text
        and not item.output_text
        and item.reference_text == rec.reference_text
    )


def _is_rated(session: Session, item: Item) -> bool:
    return (
        session.exec(select(Rating.id).where(Rating.item_id == item.id).limit(1)).first() is not None
        or session.exec(select(JudgeVerdict.id).where(JudgeVerdict.item_id == item.id).limit(1)).first()
        is not None
    )


def require_text(value: Any, source: str, line: int | None, field_name: str, *, allow_empty: bool = False) -> str:
    """A field's value as text, or a clear error when it is missing or not text."""
    if value is None:
        raise InputFileError(source, "missing value", line=line, field=field_name)
    if isinstance(value, (dict, list)):
        raise InputFileError(source, "expected text, found a nested object", line=line, field=field_name)
    if isinstance(value, float) and value != value:  # NaN from a Parquet null
        raise InputFileError(source, "missing value", line=line, field=field_name)
    text = str(value)
    if not allow_empty and not text.strip():
        raise InputFileError(source, "empty value", line=line, field=field_name)
    return text


def validation_at(exc: ValidationError, source: str, line: int | None, field_name: str | None) -> InputFileError:
    """Turn a domain validation error into a file error that says where it happened."""
    return InputFileError(source, str(exc), line=line, field=field_name)
