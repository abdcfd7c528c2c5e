"""Gold items: items with an expected score range per criterion, set by the researchers.

A gold item is rated like any other (the clinician is never told which items are gold, nor the expected
range), is assigned to every clinician of the study (so that every clinician's gold accuracy can be
measured; see :func:`medhelm_core.rating.assignment.assign_balanced`), and is left out of the agreement figures
(every clinician sharing it would make it dominate the clinician pair, and gold items are chosen for being
clear-cut). A clinician's gold accuracy (:func:`medhelm_core.rating.quality_flags.gold_accuracy`) is the share
of their scores on gold items that fall within the expected range; only researchers see it.

A gold file (CSV, JSON Lines or Parquet) has one row per item and criterion: the item, by ``item_id`` or
by ``benchmark``, ``instance_id`` and ``model``; ``criterion``; and ``low`` and ``high`` (inclusive), or
``score`` for a single expected level; ``note`` is optional. Importing is all or nothing and replaces the
range of every (item, criterion) the file names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, col, select

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import AuditAction, GoldRange, Item, Study
from medhelm_core.errors import InputFileError
from medhelm_core.importers.tabular import rows as file_rows
from medhelm_core.rubric import rubric_spec

if TYPE_CHECKING:  # pandas is imported where it is used: `medhelm --help` should not wait for it
    import pandas as pd

GOLD_COLUMNS: tuple[str, ...] = ("item_id", "benchmark", "instance_id", "model", "criterion", "low", "high", "note")
_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


@dataclass(frozen=True)
class GoldImport:
    """What a gold import did."""

    study: str
    rows: int
    created: int
    updated: int
    unchanged: int
    gold_items: int


def _integer(value: Any, source: str, line: int, field: str) -> int:
    if value is None or (isinstance(value, str) and not value.strip()) or isinstance(value, bool):
        raise InputFileError(source, "missing value", line=line, field=field)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputFileError(source, f"{value!r} is not a number", line=line, field=field) from None
    if number != number or not number.is_integer():
        raise InputFileError(source, f"{value!r} is not a whole number", line=line, field=field)
    return int(number)


def _item_key(row: dict[str, Any]) -> tuple[str, str, str] | None:
    if all(str(row.get(k) or "").strip() for k in ("benchmark", "instance_id", "model")):
        return (str(row["benchmark"]).strip(), str(row["instance_id"]).strip(), str(row["model"]).strip())
    return None


def read_gold_file(session: Session, study: Study, path: str | Path) -> list[GoldRange]:
    """Read and check a gold file against the study's items and rubric; nothing is written.

    Every problem names the file, line and field: an unknown item or criterion, a bound that is not a
    whole number on the criterion's scale, ``low`` above ``high``, or an (item, criterion) given twice.
    """
    p = Path(path)
    fmt = _FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise InputFileError(p, f"unknown gold file type {p.suffix!r}; use .csv, .jsonl or .parquet")
    source = str(p)
    rubric = rubric_spec(session, study.rubric_id)
    items = session.exec(select(Item.id, Item.benchmark, Item.instance_id, Item.model).where(Item.study_id == study.id))
    by_key = {(benchmark, instance_id, model): item_id for item_id, benchmark, instance_id, model in items.all()}
    known = set(by_key.values())
    ranges: list[GoldRange] = []
    seen: dict[tuple[int, str], int] = {}
    for line, row in file_rows(p, fmt, {}):
        key = _item_key(row)
        if key is not None:
            item_id = by_key.get(key)
            if item_id is None:
                raise InputFileError(source, f"no item {key} in study {study.name!r}", line=line, field="instance_id")
        elif str(row.get("item_id") or "").strip():
            item_id = _integer(row["item_id"], source, line, "item_id")
            if item_id not in known:
                raise InputFileError(source, f"no item {row['item_id']} in study {study.name!r}", line=line,
                                     field="item_id")
        else:
            raise InputFileError(source, "name the item by item_id or by benchmark, instance_id and model", line=line)
        name = str(row.get("criterion") or "").strip()
        if name not in rubric.criterion_names:
            raise InputFileError(source, f"unknown criterion {name!r}; the rubric has "
                                 f"{', '.join(rubric.criterion_names)}", line=line, field="criterion")
        criterion = rubric.criterion(name)
        if "low" in row or "high" in row:
            low = _integer(row.get("low"), source, line, "low")
            high = _integer(row.get("high"), source, line, "high")
        else:
            low = high = _integer(row.get("score"), source, line, "score")
        for field, value in (("low", low), ("high", high)):
            if not criterion.scale_min <= value <= criterion.scale_max:
                raise InputFileError(source, f"{value} is off the scale {criterion.scale_min} to "
                                     f"{criterion.scale_max}", line=line, field=field)
        if low > high:
            raise InputFileError(source, f"low {low} is above high {high}", line=line, field="low")
        if (item_id, name) in seen:
            raise InputFileError(source, f"item {item_id} has a second {name} range (first on line "
                                 f"{seen[(item_id, name)]})", line=line, field="criterion")
        seen[(item_id, name)] = line
        note = row.get("note")
        ranges.append(GoldRange(item_id=item_id, criterion=name, low=low, high=high,
                                note="" if note is None or note != note else str(note)))
    if not ranges:
        raise InputFileError(source, "no gold ranges in the file")
    return ranges


def import_gold(session: Session, study: Study, path: str | Path, *, actor: Actor = None) -> GoldImport:
    """Check a gold file, then store its ranges in the caller's transaction (all or nothing).

    Examples
    --------
    >>> with transaction(engine) as s:  # doctest: +SKIP
    ...     import_gold(s, get_study(s, "demo"), "gold.csv", actor=who)
    """
    ranges = read_gold_file(session, study, path)
    current = {(g.item_id, g.criterion): g for g in session.exec(
        select(GoldRange).where(col(GoldRange.item_id).in_({r.item_id for r in ranges}))
    ).all()}
    created = updated = unchanged = 0
    for new in ranges:
        old = current.get((new.item_id, new.criterion))
        if old is None:
            session.add(new)
            created += 1
        elif (old.low, old.high, old.note) == (new.low, new.high, new.note):
            unchanged += 1
        else:
            old.low, old.high, old.note = new.low, new.high, new.note
            session.add(old)
            updated += 1
    session.flush()
    total = len(gold_item_ids(session, study))
    record_event(session, AuditAction.gold_import, actor=actor, study_id=study.id, file=Path(path).name,
                 rows=len(ranges), created=created, updated=updated)
    return GoldImport(study.name, len(ranges), created, updated, unchanged, total)


def clear_gold(session: Session, study: Study, *, actor: Actor = None) -> int:
    """Remove every gold range of the study (its items become ordinary items again); returns how many."""
    rows = session.exec(
        select(GoldRange).join(Item, Item.id == GoldRange.item_id).where(Item.study_id == study.id)
    ).all()
    for row in rows:
        session.delete(row)
    session.flush()
    if rows:
        record_event(session, AuditAction.gold_clear, actor=actor, study_id=study.id, rows=len(rows))
    return len(rows)


def gold_item_ids(session: Session, study: Study) -> set[int]:
    """The ids of the study's gold items."""
    return set(
        session.exec(
            select(GoldRange.item_id).join(Item, Item.id == GoldRange.item_id).where(Item.study_id == study.id)
        ).all()
    )


def gold_ranges_frame(session: Session, study: Study) -> pd.DataFrame:
    """The study's gold ranges: ``item_id``, ``benchmark``, ``instance_id``, ``model``, ``criterion``, ``low``,
    ``high``, ``note`` (researchers only: it holds the model's name)."""
    import pandas as pd

    rows = session.exec(
        select(GoldRange.item_id, Item.benchmark, Item.instance_id, Item.model, GoldRange.criterion, GoldRange.low,
               GoldRange.high, GoldRange.note)
        .join(Item, Item.id == GoldRange.item_id)
        .where(Item.study_id == study.id)
        .order_by(GoldRange.item_id, GoldRange.criterion)
    ).all()
    return pd.DataFrame(rows, columns=list(GOLD_COLUMNS))

