"""HELM's own per-instance metrics (``per_instance_stats.json``), stored as recorded metric scores.

HELM scores each instance with ROUGE-L (``rouge_l``: rouge-score's ``rougeL`` F-measure with the Porter
stemmer on, the best over the instance's references) and, where the run spec asks for it, BERTScore
(``BERTScore-F``/``-P``/``-R``, with the model its summarization metric names, such as
distilbert-base-uncased). They are stored under the app's own metric names (``rougeL_f``, ``bertscore_f1``
...) with settings that say where they came from (``source: helm``) and how they were computed, so they sit
beside the scores the app computes as another settings variant: the Metrics page lists both, and the
agreement engine reads whichever variant was stored last (:func:`~medhelm_core.frames.newest_variants`).

HELM's ROUGE-L equals the app's :class:`~medhelm_core.metrics.rouge.RougeScorer` with the stemmer on, bit
for bit, on the same texts: HELM strips the completion and drops a leading ``{`` and a trailing ``}``, but
rouge-score's tokenizer keeps only lower-cased ``[a-z0-9]`` runs, so neither changes a token. They differ
only where an instance has several references (HELM keeps the best score, the app scores the one reference
it imports: the one tagged ``correct``, else the first); MedHELM's open-ended benchmarks have one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlmodel import Session, col, select

from medhelm_core.db.models import MetricScore
from medhelm_core.errors import InputFileError
from medhelm_core.importers.records import ImportReport

if TYPE_CHECKING:
    from medhelm_core.db.models import Item
    from medhelm_core.importers.helm import HelmRun

#: HELM's stat name -> (the app's metric family, the app's metric name)
HELM_STATS = {
    "rouge_l": ("rougeL", "rougeL_f"),
    "BERTScore-F": ("bertscore", "bertscore_f1"),
    "BERTScore-P": ("bertscore", "bertscore_p"),
    "BERTScore-R": ("bertscore", "bertscore_r"),
}
#: ROUGE-L as HELM computes it (``get_rouge_function("rougeL")``: rouge-score with ``use_stemmer=True``)
ROUGE_SETTINGS: dict[str, Any] = {
    "family": "rougeL",
    "source": "helm",
    "helm_stat": "rouge_l",
    "use_stemmer": True,
    "tokenizer": "rouge_score.tokenizers.DefaultTokenizer",
    "references": "the best over the instance's references",
}


@dataclass
class InstanceStats:
    """HELM's metric values of a run's instances under the app's metric names, and their settings per family."""

    #: instance id -> {metric name -> value}
    values: dict[str, dict[str, float]] = field(default_factory=dict)
    #: metric family -> the settings stored with its scores
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)


def bertscore_settings(run_spec: Mapping[str, Any]) -> dict[str, Any]:
    """BERTScore's settings as the run spec's metric specs give them (model, rescaling), with their origin.

    Examples
    --------
    >>> spec = {"metric_specs": [{"class_name": "helm.benchmark.metrics.summarization_metrics.SummarizationMetric",
    ...          "args": {"task": "medication_qa", "device": "cuda", "bertscore_model": "distilbert-base-uncased",
    ...                   "rescale_with_baseline": False}}]}
    >>> settings = bertscore_settings(spec)
    >>> settings["model"], settings["rescale_with_baseline"]
    ('distilbert-base-uncased', False)
    """
    args: dict[str, Any] = {}
    metric = None
    specs = run_spec.get("metric_specs")
    for spec in specs if isinstance(specs, list) else []:
        found = spec.get("args") if isinstance(spec, dict) else None
        if isinstance(found, dict) and "bertscore_model" in found:
            args, metric = found, spec.get("class_name")
            break
    return {
        "family": "bertscore",
        "source": "helm",
        "helm_stats": ["BERTScore-F", "BERTScore-P", "BERTScore-R"],
        "helm_metric": str(metric) if metric else "not stated in run_spec.json",
        "model": str(args["bertscore_model"]) if "bertscore_model" in args else "not stated in run_spec.json",
        "rescale_with_baseline": args.get("rescale_with_baseline"),
        "scorer": "bert-score",
    }


def _number(stat: dict[str, Any]) -> float | None:
    """The stat's value (its mean over ``count`` observations), None when it has none."""
    count = stat.get("count", 1)
    if count == 0:
        return None
    value = stat.get("mean")
    if value is None and isinstance(stat.get("sum"), (int, float)) and isinstance(count, (int, float)):
        value = stat["sum"] / count
    return value


def read_instance_stats(
    data: Any, source: str, run_spec: Mapping[str, Any], wanted: set[str]
) -> InstanceStats:
    """The ROUGE-L and BERTScore values in a ``per_instance_stats.json`` for the instances in ``wanted``.

    Only the first trial and unperturbed stats count (as for the items). A value that is not a finite
    number, or an instance given two different values of one stat, is refused naming the file and field.
    """
    if not isinstance(data, list):
        raise InputFileError(source, "expected a list of per-instance stats", field="(the file)")
    out = InstanceStats()
    for index, entry in enumerate(data):
        if not isinstance(entry, dict) or entry.get("perturbation") or entry.get("train_trial_index", 0) != 0:
            continue
        instance_id = entry.get("instance_id")
        if isinstance(instance_id, bool) or not isinstance(instance_id, (str, int)) or str(instance_id) not in wanted:
            continue
        stats = entry.get("stats")
        if not isinstance(stats, list):
            raise InputFileError(source, f"instance {instance_id!r}: expected a list of stats",
                                 field=f"[{index}].stats")
        for number, stat in enumerate(stats):
            name = stat.get("name") if isinstance(stat, dict) else None
            if not isinstance(name, dict) or name.get("name") not in HELM_STATS or name.get("perturbation"):
                continue
            at = f"[{index}].stats[{number}]"
            value = _number(stat)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputFileError(source, f"instance {instance_id!r}: {name['name']} is {value!r}, not a finite "
                                     "number", field=f"{at}.mean")
            family, metric = HELM_STATS[name["name"]]
            scores = out.values.setdefault(str(instance_id), {})
            if metric in scores and scores[metric] != float(value):
                raise InputFileError(source, f"instance {instance_id!r}: {name['name']} is given twice, as "
                                     f"{scores[metric]!r} and {value!r}", field=f"{at}.mean")
            scores[metric] = float(value)
            if family not in out.settings:
                out.settings[family] = dict(ROUGE_SETTINGS) if family == "rougeL" else bertscore_settings(run_spec)
    return out


def store_helm_metrics(
    session: Session, runs: Sequence[HelmRun], items: Mapping[tuple[str, str, str], Item], report: ImportReport
) -> None:
    """Store the runs' HELM metric values beside the app's own, in the caller's transaction.

    A score is keyed by item, metric and settings hash: the same value again is left alone, a changed one
    (the run was scored again) replaces it.
    """
    from medhelm_core.metrics.spec import settings_hash  # the metrics package loads pandas

    wanted: dict[tuple[int, str, str], tuple[float, dict[str, Any]]] = {}
    for run in runs:
        if run.stats is None:
            continue
        for rec in run.records:
            for metric, value in run.stats.values.get(rec.instance_id, {}).items():
                family = next(f for f, m in HELM_STATS.values() if m == metric)
                settings = run.stats.settings[family]
                wanted[(int(items[rec.key].id), metric, settings_hash(settings))] = (value, settings)
    if not wanted:
        return
    item_ids = sorted({key[0] for key in wanted})
    hashes = sorted({key[2] for key in wanted})
    stored: dict[tuple[int, str, str], MetricScore] = {}
    for start in range(0, len(item_ids), 500):  # keeps the IN list within every database's parameter limit
        for score in session.exec(
            select(MetricScore).where(col(MetricScore.item_id).in_(item_ids[start:start + 500]),
                                      col(MetricScore.settings_hash).in_(hashes))
        ).all():
            stored[(score.item_id, score.metric, score.settings_hash)] = score
    for (item_id, metric, digest), (value, settings) in wanted.items():
        score = stored.get((item_id, metric, digest))
        if score is not None and score.value == value:
            report.metric_scores_unchanged += 1
            continue
        if score is None:
            score = MetricScore(item_id=item_id, metric=metric, value=value, settings=settings, settings_hash=digest)
        else:
            score.value = value
        session.add(score)
        report.metric_scores_written += 1
    session.flush()
