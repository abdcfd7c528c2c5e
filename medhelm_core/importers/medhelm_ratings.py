"""Import MedHELM's clinician annotation CSV: clinicians, items, their ratings, and the jury's scores.

The layout is that of ``../shared/data/medhelm_validation/ratings.csv`` (the MedHELM paper's validation
study): one row per clinician rating with ``rater_id``, ``dataset_name``, ``instance_id``, ``model_key``,
the clinician's ``accuracy``/``completeness``/``clarity`` and the jury's mean scores in ``llm_*``. The file
holds no item texts. A texts file (``item_texts.csv``: ``dataset_name``, ``instance_id``, ``model_key``,
``question``, ``answer``) gives each item its request and response; an item without one is created with
empty texts and ``meta.text_available = false``, and gets its texts from a later import that has them (even
once rated: the texts are what was rated, they were only missing). The public release has no reference
answers, so the items have none.

The jury scores become one *recorded* jury run: a single pseudo-judge per item holding MedHELM's published
jury means (over GPT-4o, Llama 3.3 70B and Claude 3.7 Sonnet). It is labelled as recorded everywhere, never
as judges this app called.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from medhelm_core.accounts.users import USERNAME_RE
from medhelm_core.db.models import RECORDED_RATER, Role, RunSource, Study, User
from medhelm_core.errors import InputFileError, ValidationError
from medhelm_core.importers.limits import ReadBudget
from medhelm_core.importers.recorded import RecordedVerdict, recorded_run, write_recorded_verdicts
from medhelm_core.importers.records import ImportReport, ItemRecord, require_text, store_items, validation_at
from medhelm_core.importers.tabular import csv_header, csv_rows
from medhelm_core.importers.values import check_text
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import RubricSpec

REQUIRED_COLUMNS = ("rater_id", "instance_id", "dataset_name", "model_key")
#: The columns of a texts file (MedHELM's ``item_texts.csv``): the item's key, its request and its response.
TEXT_COLUMNS = ("dataset_name", "instance_id", "model_key", "question", "answer")
JURY_PREFIX = "llm_"
RECORDED_RUN_NAME = "MedHELM jury (recorded means)"
RECORDED_JUDGE = "medhelm-jury-mean"
MEDHELM_JUDGES = (
    "openai/gpt-4o-2024-05-13",
    "meta/llama-3.3-70b-instruct",
    "anthropic/claude-3-7-sonnet-20250219",
)


def looks_like_medhelm_ratings(header: list[str]) -> bool:
    """True when a CSV header has MedHELM's rating columns (used to detect the format)."""
    return {"rater_id", "instance_id", "dataset_name", "model_key"} <= set(header)


def import_medhelm_ratings(
    session: Session,
    study: Study,
    rubric: RubricSpec,
    path: Path,
    column_map: dict[str, str],
    report: ImportReport,
    budget: ReadBudget | None = None,
    texts: Path | None = None,
) -> None:
    """Import one MedHELM ratings CSV into ``study`` inside the caller's transaction.

    Every row is checked before anything is written: rater ids follow the rules of usernames, name no
    account this kind of import did not create, and rate an item at most once per file. ``texts`` is a
    texts file (:data:`TEXT_COLUMNS`) whose rows give the items their request and response.
    """
    source = str(path)
    item_texts = read_item_texts(texts, column_map, budget) if texts is not None else {}
    header = csv_header(path, column_map)
    needed = list(REQUIRED_COLUMNS) + rubric.criterion_names
    missing = [c for c in needed if c not in header]
    if missing:
        raise InputFileError(source, f"missing column(s) {', '.join(missing)}", line=1)
    jury_columns = {c: f"{JURY_PREFIX}{c}" for c in rubric.criterion_names if f"{JURY_PREFIX}{c}" in header}

    rows = list(csv_rows(path, column_map, budget))
    records: dict[tuple[str, str, str], ItemRecord] = {}
    jury: dict[tuple[str, str, str], tuple[int, dict[str, float]]] = {}
    rated: dict[tuple[str, tuple[str, str, str]], int] = {}
    rater_lines: dict[str, int] = {}
    for line, row in rows:
        key = (
            require_text(row["dataset_name"], source, line, "dataset_name").strip(),
            require_text(row["instance_id"], source, line, "instance_id").strip(),
            require_text(row["model_key"], source, line, "model_key").strip(),
        )
        rater = _rater_id(row["rater_id"], source, line)
        for column in ("specialty", "team"):  # kept on the rater's account
            if isinstance(row.get(column), str):
                check_text(row[column], source, line, column)
        rater_lines.setdefault(rater, line)
        if (rater, key) in rated:
            raise InputFileError(
                source, f"rater {rater!r} rates item {key} twice (first at line {rated[(rater, key)]}); "
                "a file holds one rating per rater and item", line=line, field="rater_id",
            )
        rated[(rater, key)] = line
        if key not in records:
            text = item_texts.get(key)
            records[key] = ItemRecord(
                benchmark=key[0],
                instance_id=key[1],
                model=key[2],
                input_text=text[0] if text else "",
                output_text=text[1] if text else "",
                reference_text=None,
                meta={
                    "source": "medhelm-ratings",
                    "source_file": path.name,
                    "text_available": text is not None,
                    **({"texts_file": texts.name} if text is not None and texts is not None else {}),
                    "entry_id": row.get("entry_id"),
                    "user_label": row.get("user_label"),
                },
                source=source,
                line=line,
                has_texts=text is not None,
            )
        if jury_columns:
            scores = {c: _jury_score(row[col], rubric, c, source, line, col) for c, col in jury_columns.items()}
            if key in jury and jury[key][1] != scores:
                raise InputFileError(
                    source, f"jury scores for item {key} differ from those at line {jury[key][0]}", line=line
                )
            jury.setdefault(key, (line, scores))

    for _ in item_texts.keys() - records.keys():
        report.skip("texts of an item the ratings file does not hold")
    _check_existing_raters(session, rater_lines, source)
    items = store_items(session, study, list(records.values()), report)
    raters = _clinicians(session, rows, report)
    for line, row in rows:
        key = (row["dataset_name"].strip(), row["instance_id"].strip(), row["model_key"].strip())
        try:
            _, written = record_rating(
                session,
                item=items[key],
                rater=raters[row["rater_id"].strip()],
                rubric=rubric,
                scores={c: row[c] for c in rubric.criterion_names},
            )
        except ValidationError as exc:
            field = next((c for c in rubric.criterion_names if c in str(exc).lower()), None)
            raise validation_at(exc, source, line, field) from None
        if written:
            report.ratings_written += 1
        else:
            report.ratings_unchanged += 1
    if jury:
        _store_recorded_jury(session, study, rubric, items, jury, report, path)


def _jury_score(value: Any, rubric: RubricSpec, criterion: str, source: str, line: int, column: str) -> float:
    spec = rubric.criterion(criterion)
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise InputFileError(source, f"{value!r} is not a number", line=line, field=column) from None
    if math.isnan(score) or not spec.scale_min <= score <= spec.scale_max:
        raise InputFileError(
            source, f"{value} is outside the scale {spec.scale_min} to {spec.scale_max}", line=line, field=column
        )
    return score


def _rater_id(value: Any, source: str, line: int) -> str:
    """A rater id that is a valid username (it becomes one), or an error naming the line and field."""
    rater = require_text(value, source, line, "rater_id").strip()
    if not USERNAME_RE.fullmatch(rater):
        raise InputFileError(
            source, f"rater id {rater[:40]!r}{'...' if len(rater) > 40 else ''} is not a valid username: "
            "2 to 150 letters, digits or _ . @ - (no spaces)", line=line, field="rater_id",
        )
    return rater


def is_imported_rater(user: User) -> bool:
    """True for an account a ratings import created: a clinician with no password, marked ``recorded_rater``.

    Only those may receive a file's ratings: writing under a real account would put words in a person's
    mouth (and the audit trail would show them as theirs).
    """
    return bool((user.meta or {}).get(RECORDED_RATER)) and user.password_hash is None and (
        user.role == Role.clinician.value
    )


def _check_existing_raters(session: Session, rater_lines: dict[str, int], source: str) -> None:
    """Refuse a rater id that names an account other than an imported rater, naming its first line."""
    names = list(rater_lines)
    for start in range(0, len(names), 500):  # keeps the IN list within every database's parameter limit
        chunk = names[start:start + 500]
        for user in session.exec(select(User).where(User.username.in_(chunk))).all():
            if not is_imported_rater(user):
                raise InputFileError(
                    source, f"rater id {user.username!r} is an existing account, not a rater imported from a "
                    "ratings file; ratings from a file are never recorded under a person's account (rename the "
                    "rater in the file)", line=rater_lines[user.username], field="rater_id",
                )


def _clinicians(session: Session, rows: list[tuple[int, dict[str, Any]]], report: ImportReport) -> dict[str, User]:
    """Get or create one clinician account per rater id (no password: they cannot sign in until given one).

    The accounts are marked ``recorded_rater``: they hold another study's ratings, so assignment leaves them
    out unless a researcher names them.
    """
    wanted: dict[str, dict[str, Any]] = {}
    for _, row in rows:
        wanted.setdefault(row["rater_id"].strip(),
                          {**{k: row[k] for k in ("specialty", "team") if k in row}, RECORDED_RATER: True})
    existing = {u.username: u for u in session.exec(select(User).where(User.username.in_(list(wanted)))).all()}
    for name, meta in wanted.items():
        if name not in existing:
            user = User(username=name, display_name=name, role=Role.clinician.value, meta=meta)
            session.add(user)
            existing[name] = user
            report.raters_created += 1
    session.flush()
    return existing


def _store_recorded_jury(
    session: Session,
    study: Study,
    rubric: RubricSpec,
    items: dict,
    jury: dict,
    report: ImportReport,
    path: Path,
) -> None:
    config = {
        "source": RunSource.recorded.value,
        "description": "MedHELM's published jury mean per item and criterion (not judges called by this app)",
        "judges": list(MEDHELM_JUDGES),
        "aggregation": "mean over judges",
        "rubric": {"name": rubric.name, "version": rubric.version},
        "file": path.name,
    }
    config_hash = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
    run, _ = recorded_run(session, study, RECORDED_RUN_NAME, config)
    verdicts = [
        RecordedVerdict(item_id=items[key].id, judge=RECORDED_JUDGE, scores=scores, raw_response=json.dumps(scores))
        for key, (_, scores) in jury.items()
    ]
    write_recorded_verdicts(session, run, verdicts, report, cache_key=config_hash)


def read_item_texts(
    path: Path, column_map: dict[str, str], budget: ReadBudget | None = None
) -> dict[tuple[str, str, str], tuple[str, str]]:
    """The request and response of each item in a texts file, by (dataset_name, instance_id, model_key).

    An item given twice is refused with both lines; every text must be storable (no NUL character).
    """
    source = str(path)
    missing = [c for c in TEXT_COLUMNS if c not in csv_header(path, column_map)]
    if missing:
        raise InputFileError(source, f"missing column(s) {', '.join(missing)}; a texts file needs "
                             f"{', '.join(TEXT_COLUMNS)}", line=1)
    texts: dict[tuple[str, str, str], tuple[str, str]] = {}
    lines: dict[tuple[str, str, str], int] = {}
    for line, row in csv_rows(path, column_map, budget):
        key = (
            require_text(row["dataset_name"], source, line, "dataset_name").strip(),
            require_text(row["instance_id"], source, line, "instance_id").strip(),
            require_text(row["model_key"], source, line, "model_key").strip(),
        )
        if key in lines:
            raise InputFileError(source, f"item {key} appears twice (first at line {lines[key]})", line=line,
                                 field="instance_id")
        lines[key] = line
        question = check_text(require_text(row["question"], source, line, "question"), source, line, "question")
        answer = check_text(require_text(row["answer"], source, line, "answer", allow_empty=True), source, line,
                            "answer")
        texts[key] = (question, answer)
    return texts
