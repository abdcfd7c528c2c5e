"""``medhelm agreement`` (a study's agreement table) and ``medhelm icc`` (every ICC of any long file)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from sqlmodel import Session

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import RunSource, Study
from medhelm_core.errors import InputFileError, NotFoundError, ValidationError
from medhelm_core.format import number
from medhelm_core.studies import agreement_view, get_study

if TYPE_CHECKING:
    import pandas as pd

# pandas, scipy and the agreement engine load only inside the commands, so `medhelm --help` starts fast.
PROTOCOL_NAMES = ("medhelm", "full")
TABLE_FORMATS = ("csv", "jsonl", "parquet")
_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


def plain(value: Any) -> Any:
    """A value as JSON can hold it: NaN and infinities as null, numpy scalars as Python, tuples as lists."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _interval(low: Any, high: Any) -> str:
    if any(v is None or not math.isfinite(float(v)) for v in (low, high)):
        return "n/a"
    return f"{low:.2f} to {high:.2f}"


def aligned(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """A plain-text table with a header rule; the last column is left unpadded (notes run long)."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells[:-1], widths[:-1], right[:-1], strict=True)]
        return "  ".join([*parts, cells[-1]]).rstrip()

    rule = ["-" * w for w in widths]
    return "\n".join([line(headers), line(rule), *(line(r) for r in rows)])


def _jury_run_label(session: Session, study: Study, jury_run_id: int | None) -> str:
    """Which jury run the table uses; a run id that is not this study's is an error, not an empty jury."""
    from medhelm_core.frames import study_jury_run

    run = study_jury_run(session, study, jury_run_id)
    if run is None:
        return "no jury run"
    return f"jury run {run.id} ({run.name}; {run.source}" + ("; newest with verdicts)" if jury_run_id is None else ")")


@app.command("agreement")
def agreement_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    protocol: str | None = typer.Option(
        None, "--protocol", "-p", help="medhelm (the paper's ICC(C,k) on z-scores) or full (adds ICC(A,1) and "
        "ICC(A,k) on the raw scale); default: the study's saved view (as the Agreement page opens)."
    ),
    benchmarks: list[str] = typer.Option(
        [], "--benchmark", "-b", help="Benchmark to include and pool (repeatable; default: the study's saved view, "
        "else all)."
    ),
    criteria: list[str] = typer.Option(
        [], "--criterion", "-c", help="Criterion of the composite and of the rows (repeatable; default all)."
    ),
    jury_run: int | None = typer.Option(None, "--jury-run", help="Jury run id (default: the newest with verdicts)."),
    resamples: int = typer.Option(2000, "--resamples", help="Bootstrap resamples of the full protocol "
                                  "(and of --versions)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    versions: bool = typer.Option(False, "--versions", help="Compare the jury runs (versions of judges, rubric "
                                  "and prompt) with each other: agreement of each on the items all scored."),
    baseline: int | None = typer.Option(None, "--baseline", help="With --versions: the run the others are "
                                        "compared with (default the oldest)."),
    as_json: bool = JsonOption,
) -> None:
    """Agreement of the jury and metrics with the clinicians, and of clinicians with each other.

    A block per benchmark, then 'pooled' over them; MedHELM's 0.474 is pooled with -b aci_bench -b medi_qa.
    With --versions: one row per jury run, MedHELM's ICC(3,k) on the items every run scored (pooled).
    Each run's change from --baseline gets a paired bootstrap interval; --criterion adds a block for each.
    """
    if protocol is not None and protocol not in PROTOCOL_NAMES:
        raise ValidationError(f"--protocol {protocol!r} unknown; use one of {', '.join(PROTOCOL_NAMES)}")
    if resamples < 1:
        raise ValidationError(f"--resamples must be at least 1, got {resamples}")
    if versions:
        if protocol not in (None, "medhelm"):
            raise ValidationError("--versions compares runs with MedHELM's protocol; leave out --protocol full")
        if jury_run is not None:
            raise ValidationError("--versions compares every jury run; leave out --jury-run")
        _versions(ctx, study, baseline, benchmarks, criteria, resamples, seed, as_json)
        return
    if baseline is not None:
        raise ValidationError("--baseline goes with --versions")
    from medhelm_core.agreement import agreement_table
    from medhelm_core.frames import scores_long_frame

    with transaction(engine_for(ctx)) as session:
        target = get_study(session, study)
        protocol, benchmarks = agreement_view(target, protocol, benchmarks)
        jury_label = _jury_run_label(session, target, jury_run)
        long = scores_long_frame(session, target, jury_run)
    table = agreement_table(
        long,
        protocol=protocol,
        benchmarks=benchmarks or None,
        criteria=criteria or None,
        n_resamples=resamples,
        seed=seed,
    )
    records = [{k: plain(v) for k, v in rec.items()} for rec in table.to_dict("records")]
    scope = ", ".join(benchmarks) if benchmarks else "all benchmarks"
    header = f"study {study}: protocol {protocol}, {jury_label}; pooled = {scope}"
    headers = [
        "comparison",
        "benchmark",
        "criterion",
        "method",
        "estimate",
        "95% CI",
        "CI by",
        "items (of)",
        "ratings",
        "raters",
        "r",
        "rho",
        "kappa",
        "reading",
        "note",
    ]
    rows = [
        [
            r["comparison"],
            r["benchmark"],
            r["criterion"],
            r["method"],
            number(r["estimate"]),
            _interval(r["ci_low"], r["ci_high"]),
            r["ci_method"],
            f"{r['n_items']} of {r['n_available']}" if r.get("n_available") else str(r["n_items"]),
            str(r["n_ratings"]),
            str(r["n_raters"]),
            number(r["pearson_r"]),
            number(r["spearman_rho"]),
            number(r["kappa_qw"]),
            r["reading"] or "",
            r["note"] or "",
        ]
        for r in records
    ]
    right = [False] * 4 + [True, False, False, True, True, True, True, True, True, False, False]
    from medhelm_core.agreement.interpret import KOO_LI_REFERENCE, form_words

    forms = "; ".join(f"{m} = {form_words(m)}" for m in dict.fromkeys(r["method"] for r in records))
    legend = "\n".join([f"methods: {forms}", KOO_LI_REFERENCE,
                        "items (of): items used, of those the comparison could have used; n/a: undefined (see note)"])
    emit(records, as_json, "\n".join([header, "", aligned(headers, rows, right), "", legend]))


def _versions(ctx: typer.Context, study: str, baseline: int | None, benchmarks: list[str], criteria: list[str],
              resamples: int, seed: int, as_json: bool) -> None:
    """``medhelm agreement STUDY --versions``: each jury run's agreement, and its change from the baseline."""
    from medhelm_core.figures.jury_versions_data import load_version_inputs, version_table

    with transaction(engine_for(ctx)) as session:
        target = get_study(session, study)
        benchmarks = agreement_view(target, None, benchmarks)[1]
        inputs = load_version_inputs(session, target)
    if not inputs.runs:
        raise NotFoundError(f"study {study!r} has no jury run with verdicts to compare; run the jury first")
    if baseline is not None and baseline not in [r.run_id for r in inputs.runs]:
        known = ", ".join(str(r.run_id) for r in inputs.runs)
        raise NotFoundError(f"study {study!r} has no jury run {baseline} with verdicts (runs with verdicts: {known})")
    table = version_table(inputs, baseline=baseline, criteria=criteria or None, by_criterion=bool(criteria),
                          benchmarks=benchmarks or None, n_resamples=resamples, seed=seed)
    records = [{k: plain(v) for k, v in rec.items()} for rec in table.to_dict("records")]
    base = next(r for r in records if r["baseline"])
    scope = ", ".join(benchmarks) if benchmarks else "all benchmarks"
    header = (f"study {study}: jury-clinician agreement per jury run (MedHELM's ICC(3,k) on z-scores), {scope}; "
              f"each run on the {base['n_items']} items the clinicians and every run scored; "
              f"differences from baseline run {base['run_id']} with paired bootstrap intervals")
    headers = ["run", "criterion", "judges; rubric; prompt", "ICC3k", "95% CI (F)", "bootstrap CI", "r", "rho",
               "items", "own items", "diff", "diff 95% CI", "change"]
    rows = [
        [
            f"{r['run_id']}{' recorded' if r['source'] == RunSource.recorded else ''}"
            f"{' (baseline)' if r['baseline'] else ''}",
            r["criterion"],
            r["label"].split(": ", 1)[-1],
            number(r["estimate"]),
            _interval(r["ci_low"], r["ci_high"]),
            _interval(r["boot_ci_low"], r["boot_ci_high"]),
            number(r["pearson_r"]),
            number(r["spearman_rho"]),
            str(r["n_items"]),
            str(r["n_items_run"]),
            "" if r["baseline"] else number(r["diff"]),
            "" if r["baseline"] else _interval(r["diff_ci_low"], r["diff_ci_high"]),
            r["change"] or "",
        ]
        for r in records
    ]
    right = [False, False, False, True, False, False, True, True, True, True, True, False, False]
    legend = ("change: 'higher' or 'lower' when the paired 95% interval of the difference excludes 0, "
              "else 'no clear change'")
    emit(records, as_json, "\n".join([header, "", aligned(headers, rows, right), "", legend]))


def read_long_file(path: Path, fmt: str | None) -> tuple[pd.DataFrame, list[int]]:
    """A CSV, JSONL or Parquet file as a DataFrame, with the file line (or row) of every record."""
    import pandas as pd

    from medhelm_core.importers.tabular import rows

    if fmt is None:
        if path.is_dir():
            raise InputFileError(path, "is a folder; the ICC reads one CSV, JSONL or Parquet file")
        fmt = _SUFFIXES.get(path.suffix.lower())
        if fmt is None:
            raise InputFileError(
                path, f"cannot tell the format from the suffix {path.suffix!r}; pass --format csv, jsonl or parquet"
            )
    elif fmt not in TABLE_FORMATS:
        raise ValidationError(f"--format {fmt!r} unknown; use one of {', '.join(TABLE_FORMATS)}")
    pairs = list(rows(path, fmt, {}))
    if not pairs:
        raise InputFileError(path, "the file has no rows")
    return pd.DataFrame([row for _, row in pairs]), [line for line, _ in pairs]


def long_scores(path: Path, frame: pd.DataFrame, lines: list[int], target: str, rater: str, score: str) -> pd.DataFrame:
    """The (target, rater, score) columns checked; an empty score stays NaN (a missing rating)."""
    import numpy as np
    import pandas as pd

    for option, column in (("--target", target), ("--rater", rater), ("--score", score)):
        if column not in frame.columns:
            known = ", ".join(map(str, frame.columns))
            raise InputFileError(path, f"no such column (given as {option}); the file has: {known}", field=column)
    out = pd.DataFrame({"target": frame[target], "rater": frame[rater], "line": lines})
    for column, key in ((target, "target"), (rater, "rater")):
        blank = out[key].isna() | (out[key].astype(str).str.strip() == "")
        if blank.any():
            raise InputFileError(path, "empty value", line=int(out.loc[blank, "line"].iloc[0]), field=column)
        out[key] = out[key].astype(str)
    raw = frame[score]
    blank = raw.isna() | (raw.astype(str).str.strip() == "")
    values = pd.to_numeric(raw.where(~blank), errors="coerce").astype(float)
    # A JSON true/false would otherwise count as a score of 1 or 0.
    boolean = raw.map(lambda v: isinstance(v, bool))
    bad = ~blank & (boolean | ~np.isfinite(values.fillna(0.0)) | values.isna())
    if bad.any():
        first = bad.to_numpy().nonzero()[0][0]
        raise InputFileError(
            path, f"not a finite number: {raw.iloc[first]!r}", line=int(out["line"].iloc[first]), field=score
        )
    out["score"] = values
    dup = out.duplicated(["target", "rater"], keep=False)
    if dup.any():
        first = out[dup].iloc[0]
        same = out[dup & (out["target"] == first["target"]) & (out["rater"] == first["rater"])]["line"].tolist()
        raise InputFileError(
            path,
            f"rater {first['rater']!r} scores target {first['target']!r} more than once (lines "
            f"{', '.join(map(str, same))}); keep one score per target and rater",
        )
    return out


@app.command("icc")
def icc_cmd(
    file: Path = typer.Argument(..., help="Long table (CSV, JSONL or Parquet): one row per target and rater."),
    target: str = typer.Option(..., "--target", help="Column naming the rated target (item)."),
    rater: str = typer.Option(..., "--rater", help="Column naming the rater."),
    score: str = typer.Option(..., "--score", help="Column holding the numeric score."),
    fmt: str | None = typer.Option(None, "--format", "-f", help="csv, jsonl or parquet (default: from the suffix)."),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the F-based intervals."),
    as_json: bool = JsonOption,
) -> None:
    """Every ICC form (ICC1 ... ICC3k) with its F-based interval, for any long file of scores.

    An empty score is a missing rating; targets lacking a rater are dropped (as pingouin does) and counted.
    """
    if not 0 < confidence < 1:
        raise ValidationError(f"--confidence must lie between 0 and 1, got {confidence}")
    from medhelm_core.agreement import icc_table

    frame, lines = read_long_file(file, fmt)
    scores = long_scores(file, frame, lines, target, rater, score)
    rated = scores.dropna(subset=["score"])
    table = icc_table(rated, "target", "rater", "score", confidence=confidence)
    records = [{k: plain(v) for k, v in rec.items()} for rec in table.to_dict("records")]
    n_targets = scores["target"].nunique()
    used, n_raters = int(table["n_items"].iloc[0]), int(table["n_raters"].iloc[0])
    n_blank = int(len(scores) - len(rated))
    result = {
        "file": str(file),
        "target": target,
        "rater": rater,
        "score": score,
        "confidence": confidence,
        "n_targets": n_targets,
        "n_targets_used": used,
        "n_raters": n_raters,
        "n_rows_without_score": n_blank,
        "icc": records,
    }
    level = f"{confidence * 100:g}%"
    dropped = n_targets - used
    header = f"{file}: ICC over {used} targets x {n_raters} raters"
    if dropped:
        header += f"; {dropped} of {n_targets} targets dropped (not scored by every rater)"
    if n_blank:
        header += f"; {n_blank} row(s) without a score"
    headers = ["type", "ICC", f"{level} CI", "F", "df1", "df2", "p", "description"]
    rows = [
        [
            r["type"],
            number(r["icc"]),
            _interval(r["ci_low"], r["ci_high"]),
            number(r["F"], 2),
            "n/a" if r["df1"] is None else f"{r['df1']:g}",
            "n/a" if r["df2"] is None else f"{r['df2']:g}",
            "n/a" if r["pval"] is None else f"{r['pval']:.2g}",
            r["description"],
        ]
        for r in records
    ]
    notes = sorted({r["note"] for r in records if r["note"]})
    text = "\n".join(
        [
            header,
            "",
            aligned(headers, rows, [False, True, False, True, True, True, True, False]),
            *(f"note: {n}" for n in notes),
        ]
    )
    emit(result, as_json, text)
