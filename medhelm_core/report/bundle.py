"""The report's data bundle: CSV files and a JSON manifest, enough to recompute every figure elsewhere.

``scores_long.csv`` is the exact input of the agreement table and ``agreement.csv`` its output, so
``agreement_table(read(scores_long.csv), **manifest["analysis"])`` gives ``agreement.csv`` back. The raw
tables (current ratings, every revision, every verdict, every metric score) are beside them, and the
manifest names the study, rubric, jury configuration, prompt hash, package versions and the database's
schema revision. Item texts are not in the bundle (they may hold patient text and are not needed to
recompute a figure); ``items.csv`` holds each item's identity.

The CSVs are written by :func:`medhelm_core.csv_safe.write_csv`, which quotes a text cell (a model, rater,
benchmark or item name) that a spreadsheet would run as a formula; :func:`read_scores_long` takes the quote
away again, so the agreement table's input is exact. Scores are numbers and are never touched.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
from sqlmodel import Session

from medhelm_core.csv_safe import unquote, write_csv
from medhelm_core.db.models import Study
from medhelm_core.frames import clinician_ratings_frame, metric_scores_frame, rating_history_frame, verdicts_frame
from medhelm_core.jury.config import rubric_to_dict
from medhelm_core.report.content import ReportContent
from medhelm_core.report.model_sections import model_manifest

BUNDLE_DIR = "data"
MANIFEST = "manifest.json"


def _tuples_as_text(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    for column in ("raters_used", "items_used"):
        if column in out:
            out[column] = out[column].map(lambda t: json.dumps(list(t)) if isinstance(t, (tuple, list)) else "[]")
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def bundle_tables(session: Session, study: Study, content: ReportContent) -> dict[str, pd.DataFrame]:
    """The bundle's tables by file stem: inputs and outputs of the figures, and the raw study data."""
    run = content.data.jury_run
    verdicts = verdicts_frame(session, study)
    if run is not None and not verdicts.empty:
        verdicts = verdicts[verdicts["jury_run_id"] == run.id]
    metrics = metric_scores_frame(session, study)
    if not metrics.empty:
        metrics = metrics.assign(settings=metrics["settings"].map(lambda s: json.dumps(s, sort_keys=True)))
    return {
        "scores_long": content.long,
        "agreement": _tuples_as_text(content.agreement),
        "headline": content.headline,
        "item_means": content.means,
        "clinician_leniency": content.leniency,
        "items": content.data.items,
        "ratings": clinician_ratings_frame(session, study),
        "rating_history": rating_history_frame(session, study),
        "verdicts": verdicts,
        "metrics": metrics,
        **_alignment_tables(content),
    }


def _alignment_tables(content: ReportContent) -> dict[str, pd.DataFrame]:
    """The tables behind the report's sections on trusting the jury (only those that hold rows)."""
    tables: dict[str, pd.DataFrame | None] = {
        "robust_agreement": content.robust,
        "judge_subsets": content.subsets,
        "jury_versions": content.version_figures.table if content.version_figures is not None else None,
    }
    if content.quality is not None:
        tables.update(rater_speed=content.quality.speed, gold_accuracy=content.quality.gold,
                      test_retest=content.quality.retest)
    if content.models is not None:
        tables.update(content.models.tables())
    out = {}
    for stem, frame in tables.items():
        if frame is not None and not frame.empty:
            out[stem] = frame.assign(**{c: frame[c].map(lambda t: json.dumps(list(t)))
                                        for c in ("judges",) if c in frame})
    return out


def manifest(content: ReportContent, files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The manifest: what was analysed, how, with which software, and a checksum of every file."""
    data, opts = content.data, content.options
    run = data.jury_run
    rubric = data.rubric
    return {
        "format": "medhelm-calibrate calibration report bundle, version 1",
        "generated_at": content.generated_at,
        "study": content.study,
        # The rubric as the jury stores it, without the description (the manifest has never held it).
        "rubric": {k: v for k, v in rubric_to_dict(rubric).items() if k != "description"},
        "jury_run": None
        if run is None
        else {
            "id": run.id,
            "name": run.name,
            "source": run.source,
            "recorded": run.recorded,
            "status": run.status,
            "judges": list(run.judges),
            "n_verdicts": run.n_verdicts,
            "n_failed": run.n_failed,
            "config_hash": run.config_hash,
            "config": run.config,
        },
        "prompt_hash": None if run is None else run.prompt_hash,
        "metrics": data.metric_settings,
        "analysis": {
            "function": "medhelm_core.agreement.agreement_table",
            "protocol": opts.protocol,
            "benchmarks": content.benchmarks,
            "models": list(opts.models) or None,
            "n_resamples": opts.n_resamples,
            "seed": opts.seed,
            "confidence": 0.95,
            "input": f"{BUNDLE_DIR}/scores_long.csv",
            "output": f"{BUNDLE_DIR}/agreement.csv",
            "read_as_text": ["item_id", "rater_id", "rater_kind", "criterion", "benchmark", "model"],
        },
        # medhelm_core.csv_safe: how to get a quoted text back (read_scores_long does it)
        "csv_formula_quoting": "a text cell that would start a spreadsheet formula (= + - @ tab or carriage "
                               "return, after any leading ') has one ' prepended: remove it to read the value",
        "models": model_manifest(content.models),
        "schema_revision": content.schema_revision,
        "package_versions": content.versions,
        "files": files,
    }


def write_bundle(session: Session, study: Study, content: ReportContent, out_dir: Path) -> dict[str, Any]:
    """Write ``out_dir/data/*.csv`` and ``out_dir/manifest.json``; returns the manifest.

    Each file is written under a temporary name and renamed, so an interrupted export never leaves a
    half-written file under its final name; formula-like text cells are quoted (see :mod:`medhelm_core.csv_safe`).
    """
    folder = out_dir / BUNDLE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, Any]] = {}
    for stem, frame in bundle_tables(session, study, content).items():
        target = write_csv(frame, folder / f"{stem}.csv")
        files[f"{BUNDLE_DIR}/{target.name}"] = {"rows": len(frame), "sha256": _sha256(target)}
    result = manifest(content, files)
    target = out_dir / MANIFEST
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str, allow_nan=False, ensure_ascii=False), encoding="utf-8")
    tmp.replace(target)
    return result


def read_scores_long(path: Path) -> pd.DataFrame:
    """Read a bundle's ``scores_long.csv`` back with its ids as text (as the agreement engine had them).

    A name the bundle quoted against spreadsheet formulas (``'=x``) is read back as it was stored (``=x``).
    """
    text = {c: str for c in ("item_id", "rater_id", "rater_kind", "criterion", "benchmark", "model")}
    frame = pd.read_csv(path, dtype=text, keep_default_na=False, na_values={"score": [""]})
    for column in text:
        if column in frame:
            frame[column] = frame[column].map(unquote)
    return frame
