"""Compute ROUGE-L, ROUGE-Lsum and BERTScore for a study's items and store them, batch by batch.

Each batch of items is written in its own transaction, so a run that is stopped (Ctrl-C, a closed browser
tab, a crash) keeps every batch it finished, and running again picks up where it stopped: items that
already hold scores with the same settings are skipped. Items without a reference cannot be scored and
are counted, not silently dropped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import select

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, Study
from medhelm_core.errors import ValidationError
from medhelm_core.metrics.spec import BertScoreSpec, MetricSpec, RougeSpec, bertscore_spec, settings_hash
from medhelm_core.metrics.store import scored_item_ids, write_scores
from medhelm_core.studies import get_study_by_id

__all__ = ["MetricResult", "MetricsReport", "Progress", "compute_metrics", "metric_specs"]


@dataclass(frozen=True)
class Progress:
    """How far one metric has got: ``done`` of ``total`` items to score in this run."""

    family: str
    done: int
    total: int


ProgressCallback = Callable[[Progress], None]


@dataclass
class MetricResult:
    """What a run did for one metric."""

    family: str
    description: str
    settings: dict[str, Any]
    settings_hash: str
    scored: int = 0
    already_done: int = 0


@dataclass
class MetricsReport:
    """What a run did: items in the study, those without a reference (skipped), and per metric."""

    study: str
    items: int
    without_reference: int
    metrics: list[MetricResult] = field(default_factory=list)
    #: where BERTScore ran (cpu or cuda), or None when no model was loaded
    device: str | None = None


def metric_specs(
    *,
    rouge_l: bool = True,
    bertscore: bool = True,
    use_stemmer: bool = True,
    model: str | None = None,
    layer: int | None = None,
    idf: bool = False,
) -> list[MetricSpec]:
    """The specs for a usual run: ROUGE-L and ROUGE-Lsum (stemmer on, as HELM) and BERTScore.

    Examples
    --------
    >>> [s.family for s in metric_specs(bertscore=False)]
    ['rougeL', 'rougeLsum']
    """
    specs: list[MetricSpec] = []
    if rouge_l:
        specs += [RougeSpec("rougeL", use_stemmer), RougeSpec("rougeLsum", use_stemmer)]
    if bertscore:
        specs.append(bertscore_spec(model, layer, idf))
    return specs


def compute_metrics(
    engine: Engine,
    study: Study,
    specs: Sequence[MetricSpec],
    *,
    batch_size: int = 32,
    progress: ProgressCallback | None = None,
    device: str | None = None,
) -> MetricsReport:
    """Score every item of the study that has a reference with each spec, and store the scores.

    Takes an engine rather than a session because each batch of ``batch_size`` items is its own
    transaction: a stop keeps the batches done (``study`` is read again, so a row from any session will do).
    ``progress`` is called with a :class:`Progress` at the start of each metric and after each batch.
    BERTScore runs on ``device`` (default: GPU if any).

    Examples
    --------
    >>> report = compute_metrics(engine, study, metric_specs(bertscore=False))  # doctest: +SKIP
    >>> [(m.family, m.scored, m.already_done) for m in report.metrics]  # doctest: +SKIP
    [('rougeL', 48, 0), ('rougeLsum', 48, 0)]
    """
    if batch_size < 1:
        raise ValidationError(f"batch size must be at least 1, not {batch_size}")
    with transaction(engine) as session:
        study = get_study_by_id(session, study.id)
        items = session.exec(
            select(Item.id, Item.output_text, Item.reference_text).where(Item.study_id == study.id).order_by(Item.id)
        ).all()
    scorable = [(item_id, output or "", ref) for item_id, output, ref in items if ref is not None and ref.strip()]
    report = MetricsReport(study=study.name, items=len(items), without_reference=len(items) - len(scorable))
    for spec in specs:
        if isinstance(spec, BertScoreSpec):
            result, used = _run_bertscore(engine, study, spec, scorable, batch_size, progress, device)
            report.device = used or report.device
        else:
            result = _run_rouge(engine, study, spec, scorable, batch_size, progress)
        report.metrics.append(result)
    return report


def _pending(engine: Engine, study: Any, spec: MetricSpec, digest: str, scorable: list) -> tuple[list, int]:
    with transaction(engine) as session:
        done = scored_item_ids(session, study, spec.metric_names, digest)
    pending = [entry for entry in scorable if entry[0] not in done]
    return pending, len(scorable) - len(pending)


def _store_batches(
    engine: Engine,
    spec: MetricSpec,
    result: MetricResult,
    pending: list,
    batch_size: int,
    progress: ProgressCallback | None,
    score_batch: Callable[[list], list[tuple[float, float, float]]],
) -> None:
    """Score ``pending`` in batches, writing each batch in one transaction and reporting progress."""
    total = len(pending)
    if progress:
        progress(Progress(spec.family, 0, total))
    for start in range(0, total, batch_size):
        batch = pending[start : start + batch_size]
        values = score_batch(batch)
        rows = [(entry[0], dict(zip(spec.metric_names, triple, strict=True))) for entry, triple in zip(batch, values,
                                                                                                       strict=True)]
        with transaction(engine) as session:
            write_scores(session, rows, result.settings, result.settings_hash)
        result.scored += len(batch)
        if progress:
            progress(Progress(spec.family, min(start + batch_size, total), total))


def _run_rouge(engine: Engine, study: Any, spec: RougeSpec, scorable: list, batch_size: int,
               progress: ProgressCallback | None) -> MetricResult:
    from medhelm_core.metrics.rouge import RougeScorer

    settings = spec.settings()
    result = MetricResult(spec.family, spec.describe(), settings, settings_hash(settings))
    pending, result.already_done = _pending(engine, study, spec, result.settings_hash, scorable)
    if pending:
        scorer = RougeScorer(spec.use_stemmer)
        score = scorer.rouge_l if spec.variant == "rougeL" else scorer.rouge_lsum

        def score_batch(batch: list) -> list[tuple[float, float, float]]:
            out = []
            for _, output, reference in batch:
                s = score(reference, output)
                out.append((s.fmeasure, s.precision, s.recall))
            return out

        _store_batches(engine, spec, result, pending, batch_size, progress, score_batch)
    return result


def _run_bertscore(engine: Engine, study: Any, spec: BertScoreSpec, scorable: list, batch_size: int,
                   progress: ProgressCallback | None, device: str | None) -> tuple[MetricResult, str | None]:
    corpus = [reference for _, _, reference in scorable]
    corpus_sha = hashlib.sha256(json.dumps(corpus).encode()).hexdigest() if spec.idf else None
    settings = spec.settings(corpus_sha)
    result = MetricResult(spec.family, spec.describe(), settings, settings_hash(settings))
    pending, result.already_done = _pending(engine, study, spec, result.settings_hash, scorable)
    if not pending:
        return result, None  # nothing to do: the model is not even loaded
    from medhelm_core.metrics.bertscore import BertScoreModel

    model = BertScoreModel(spec, device)
    # idf weights over all the study's references, whichever batch an item falls in, so the scores
    # equal bert_score.score over the whole study.
    weights = model.idf_weights(corpus) if spec.idf else None

    def score_batch(batch: list) -> list[tuple[float, float, float]]:
        scores = model.score([o for _, o, _ in batch], [r for _, _, r in batch], idf_weights=weights)
        return [(s.f1, s.precision, s.recall) for s in scores]

    _store_batches(engine, spec, result, pending, batch_size, progress, score_batch)
    return result, model.device
