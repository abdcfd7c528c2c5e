"""Importers: HELM run folders, item files (JSONL, CSV, Parquet) and MedHELM's ratings CSV.

:func:`import_paths` is the one entry point. It reads and validates every file first, then writes
everything in the caller's single transaction: an import is all-or-nothing, and importing the same files
again creates nothing new (the report counts what was unchanged). Files are read as streams within caps on
rows and bytes (:class:`~medhelm_core.settings.ImportLimits`), so an oversized file is refused, naming the
file and the cap, before it fills the memory.

A HELM run folder brings, besides its items, MedHELM's jury verdicts (a recorded jury run per suite,
:mod:`.helm_jury`) and HELM's own ROUGE-L and BERTScore (recorded metric scores, :mod:`.helm_metrics`); a
MedHELM ratings file brings clinicians, ratings, the published jury means and, with a texts file, the items'
texts (:mod:`.medhelm_ratings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from sqlmodel import Session

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import AuditAction, Study
from medhelm_core.errors import InputFileError, ValidationError
from medhelm_core.importers.helm import HelmRun, helm_runs, is_run_folder
from medhelm_core.importers.helm_jury import judge_keys, parse_judge_names, store_helm_juries
from medhelm_core.importers.helm_metrics import store_helm_metrics
from medhelm_core.importers.limits import ReadBudget
from medhelm_core.importers.medhelm_ratings import import_medhelm_ratings, looks_like_medhelm_ratings
from medhelm_core.importers.records import ImportReport, ItemRecord, store_items
from medhelm_core.importers.tabular import csv_header, item_records
from medhelm_core.rubric import rubric_spec
from medhelm_core.settings import ImportLimits

FORMATS = ("helm", "jsonl", "csv", "parquet", "medhelm-ratings")
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}

__all__ = ["FORMATS", "ImportReport", "detect_format", "import_paths", "parse_column_map", "parse_judge_names"]


def detect_format(path: Path, column_map: Mapping[str, str] | None = None) -> str:
    """Guess the format of ``path`` from what it is: a folder is HELM, else the suffix (and the CSV header)."""
    if path.is_dir():
        return "helm"
    if not path.exists():
        raise InputFileError(path, "no such file or folder")
    fmt = _SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise InputFileError(
            path, f"cannot tell the format from the suffix {path.suffix!r}; pass --format ({', '.join(FORMATS)})"
        )
    if fmt == "csv" and looks_like_medhelm_ratings(csv_header(path, column_map or {})):
        return "medhelm-ratings"
    return fmt


def parse_column_map(pairs: Sequence[str]) -> dict[str, str]:
    """``["question=input", "answer=output"]`` -> ``{"question": "input", "answer": "output"}``."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        theirs, sep, ours = pair.partition("=")
        if not sep or not theirs.strip() or not ours.strip():
            raise ValidationError(f"--map expects THEIRS=OURS, got {pair!r}")
        mapping[theirs.strip()] = ours.strip()
    return mapping


def import_paths(
    session: Session,
    study: Study,
    paths: Sequence[str | Path],
    fmt: str | None = None,
    column_map: Mapping[str, str] | None = None,
    actor: Actor = "cli",
    limits: ImportLimits | None = None,
    judge_names: Mapping[str, str] | None = None,
    texts: str | Path | None = None,
) -> ImportReport:
    """Import ``paths`` into ``study`` inside the caller's transaction and report the counts.

    Parameters
    ----------
    session
        A session inside a transaction; the caller commits (or everything is rolled back on error).
    study
        The study the items belong to.
    paths
        Files or folders; a HELM suite folder imports all its runs.
    fmt
        One of :data:`FORMATS`, or None to detect each path's format.
    column_map
        Renames of columns (their name -> ours) for tabular files.
    actor
        Who is importing, for the audit trail (a User, a Principal or a name). An import that writes
        anything is recorded in the same transaction, so a failed import leaves no audit row either.
    limits
        The most rows and bytes the whole import may read; None reads them from the environment
        (:func:`~medhelm_core.settings.import_limits`).
    judge_names
        Names for the judges of HELM's jury blocks, by their key in the file (``{"gpt": "openai/gpt-4o"}``);
        a judge not named keeps the name the run spec gives its model, else its key.
    texts
        A texts file for a ``medhelm-ratings`` import: the items' requests and responses.
    """
    if fmt is not None and fmt not in FORMATS:
        raise ValidationError(f"unknown format {fmt!r}; formats are: {', '.join(FORMATS)}")
    mapping = dict(column_map or {})
    report = ImportReport()
    budget = ReadBudget(limits)
    item_batch: list[ItemRecord] = []
    runs: list[HelmRun] = []
    ratings_files: list[Path] = []
    formats: set[str] = set()
    for raw in paths:
        path = Path(raw)
        kind = fmt or detect_format(path, mapping)
        if kind == "helm" and not path.is_dir():
            raise InputFileError(path, "a HELM import needs a run or suite folder")
        if kind != "helm" and path.is_dir() and not is_run_folder(path):
            raise InputFileError(path, f"is a folder; --format {kind} needs a file")
        formats.add(kind)
        report.files.append(str(path))
        if kind == "helm":
            for run in helm_runs(path, report, budget):
                runs.append(run)
                item_batch.extend(run.records)
        elif kind == "medhelm-ratings":
            ratings_files.append(path)
        else:
            item_batch.extend(item_records(path, kind, mapping, budget))
    report.format = ",".join(sorted(formats))
    _check_options(runs, ratings_files, judge_names, texts)
    rubric = rubric_spec(session, study.rubric_id)
    if item_batch:
        items = store_items(session, study, item_batch, report)
        store_helm_juries(session, study, rubric, runs, items, report, judge_names)
        store_helm_metrics(session, runs, items, report)
    for path in ratings_files:
        import_medhelm_ratings(session, study, rubric, path, mapping, report, budget,
                               Path(texts) if texts is not None else None)
    wrote = (report.items_created, report.items_updated, report.raters_created, report.ratings_written,
             report.verdicts_written, report.metric_scores_written)
    if any(wrote):  # the trail records changes: re-importing the same files (or re-seeding the demo) adds none
        record_event(session, AuditAction.import_, actor=actor, study_id=study.id, **report.__dict__)
    return report


def _check_options(
    runs: Sequence[HelmRun], ratings_files: Sequence[Path], judge_names: Mapping[str, str] | None,
    texts: str | Path | None,
) -> None:
    """Refuse an option that the files cannot use: a misspelt judge would otherwise keep its file name."""
    if judge_names:
        keys = judge_keys(runs)
        unknown = sorted(set(judge_names) - keys)
        if unknown:
            found = ", ".join(sorted(keys)) if keys else "none: the HELM runs hold no jury annotations"
            raise ValidationError(f"--judge-name names {', '.join(map(repr, unknown))}, which no jury annotation "
                                  f"of the HELM runs holds (their judges: {found})")
    if texts is not None and not ratings_files:
        raise ValidationError("a texts file goes with a medhelm-ratings file (--format medhelm-ratings)")
