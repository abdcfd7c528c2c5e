"""Import MedHELM's clinician annotation CSV: clinicians, items, their ratings, and the jury's scores.

The layout is that of ``../shared/data/medhelm_validation/ratings.csv`` (the MedHELM paper's validation
study): one row per clinician rating with ``rater_id``, ``dataset_name``, ``instance_id``, ``model_key``,
the clinician's ``accuracy``/``completeness``/``clarity`` and the jury's mean scores in ``llm_*``. The file
holds no item texts, so items are created with empty texts and ``meta.text_available = false``.

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
from medhelm_core.db.models import (
    RECORDED_RATER,
    JudgeVerdict,
    JuryRun,
    Role,
    RunSource,
    RunStatus,
    Study,
    User,
    VerdictStatus,
    utcnow,
)
from medhelm_core.errors import InputFileError, ValidationError
from medhelm_core.importers.limits import ReadBudget
from medhelm_core.importers.records import ImportReport, ItemRecord, require_text, store_items, validation_at
from medhelm_core.importers.tabular import csv_header, csv_rows
from medhelm_core.importers.values import check_text
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import RubricSpec

REQUIRED_COLUMNS = ("rater_id", "instance_id", "dataset_name", "model_key")
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
) -> None:
    """Import one MedHELM ratings CSV into ``study`` inside the caller's transaction.

    Every row is checked before anything is written: rater ids follow the rules of usernames, name no
    account this kind of import did not create, and rate an item at most once per file.
    """
    source = str(path)
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
            records[key] = ItemRecord(
                benchmark=key[0],
                instance_id=key[1],
                model=key[2],
                input_text="",
                output_text="",
                reference_text=None,
                meta={
                    "source": "medhelm-ratings",
                    "source_file": path.name,
                    "text_available": False,
                    "entry_id": row.get("entry_id"),
                    "user_label": row.get("user_label"),
                },
                source=source,
                line=line,
            )
        if jury_columns:
            scores = {c: _jury_score(row[col], rubric, c, source, line, col) for c, col in jury_columns.items()}
            if key in jury and jury[key][1] != scores:
                raise InputFileError(
                    source, f"jury scores for item {key} differ from those at line {jury[key][0]}", line=line
                )
            jury.setdefault(key, (line, scores))

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
    run = session.exec(
        select(JuryRun).where(
            JuryRun.study_id == study.id, JuryRun.source == RunSource.recorded, JuryRun.name == RECORDED_RUN_NAME
        )
    ).first()
    if run is None:
        run = JuryRun(
            study_id=study.id,
            name=RECORDED_RUN_NAME,
            source=RunSource.recorded,
            config=config,
            config_hash=config_hash,
            status=RunStatus.recorded,
            finished_at=utcnow(),
        )
        session.add(run)
        session.flush()
    current = {
        v.item_id: v
        for v in session.exec(select(JudgeVerdict).where(JudgeVerdict.jury_run_id == run.id)).all()
    }
    for key, (_, scores) in jury.items():
        item = items[key]
        verdict = current.get(item.id)
        if verdict is not None and verdict.scores == scores:
            report.verdicts_unchanged += 1
            continue
        if verdict is None:
            verdict = JudgeVerdict(jury_run_id=run.id, item_id=item.id, judge=RECORDED_JUDGE)
        verdict.scores = scores
        verdict.status = VerdictStatus.ok.value
        verdict.cache_key = config_hash
        verdict.raw_response = json.dumps(scores)
        session.add(verdict)
        report.verdicts_written += 1
    run.calls_done = len(current) + sum(1 for k in jury if items[k].id not in current)
    session.add(run)
    session.flush()
