"""Automated metrics of an output against its reference: ROUGE-L, ROUGE-Lsum and BERTScore.

- :mod:`~medhelm_core.metrics.rouge`: ROUGE-L and ROUGE-Lsum, equal to Google's rouge-score to the last
  bit, with a fast longest common subsequence.
- :mod:`~medhelm_core.metrics.bertscore`: BERTScore with the bert-score package on a local model (by
  default the bundled all-MiniLM-L6-v2, layer 6), offline, on the GPU when there is one. It comes with the
  ``bertscore`` extra (``pip install 'medhelm-calibrate[bertscore]'``); :func:`bertscore_available` says
  whether it is installed, and a lean install does everything else.
- :mod:`~medhelm_core.metrics.spec`: frozen specs whose settings and settings hash are stored with each
  score.
- :mod:`~medhelm_core.metrics.compute` and :mod:`~medhelm_core.metrics.store`: scoring a study's items in
  batches, each batch one transaction, skipping what is already stored.

Stored metric names: ``rougeL_f``, ``rougeL_p``, ``rougeL_r``, ``rougeLsum_f`` (``_p``, ``_r``),
``bertscore_f1``, ``bertscore_p``, ``bertscore_r``.

Importing this package is cheap: nltk, torch and bert-score load when first used.
"""

from medhelm_core.frames.metrics import metric_scores_frame
from medhelm_core.metrics.compute import MetricResult, MetricsReport, Progress, compute_metrics, metric_specs
from medhelm_core.metrics.rouge import RougeScore, RougeScorer, rouge_l, rouge_lsum
from medhelm_core.metrics.spec import (
    BERTSCORE_INSTALL,
    BUNDLED_MODEL,
    BUNDLED_MODEL_LAYERS,
    BertScoreSpec,
    MetricSpec,
    RougeSpec,
    bertscore_available,
    bertscore_spec,
    settings_hash,
)
from medhelm_core.metrics.store import metric_settings_frame

__all__ = [
    "BERTSCORE_INSTALL",
    "BUNDLED_MODEL",
    "BUNDLED_MODEL_LAYERS",
    "BertScoreSpec",
    "MetricResult",
    "MetricSpec",
    "MetricsReport",
    "Progress",
    "RougeScore",
    "RougeScorer",
    "RougeSpec",
    "bertscore_available",
    "bertscore_spec",
    "compute_metrics",
    "metric_scores_frame",
    "metric_settings_frame",
    "metric_specs",
    "rouge_l",
    "rouge_lsum",
    "settings_hash",
]
