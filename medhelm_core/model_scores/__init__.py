"""Model scores anchored on clinicians: pure statistics over frames (no database, no Streamlit).

What a calibrated jury is for: comparing models. For each model (the item's model), per benchmark and
criterion and pooled:

- :func:`item_scores` and :func:`resample_means`: one score per item and source (clinicians, the jury, each
  judge, ROUGE-L, BERTScore), and every model's mean on the data and on 2,000 resamples of instances, all
  at once; :func:`model_means` reads the means and their 95% intervals off it, :func:`model_differences` the
  paired differences between models.
- :func:`model_rankings`: each source's order of the models, Kendall's tau-b against the clinicians' order
  (``scipy.stats.kendalltau``; :func:`kendall_tau_b` for the resamples), the chance that a pair swaps places,
  and HELM's mean win rate (:func:`win_rates`).
- :func:`sampling_status`, :func:`clinician_anchored` and :func:`anchored_differences`: prediction-powered
  inference (PPI++, the ``ppi-python`` package) on the clinicians' scale, refused where the rated items are
  not a random sample; :func:`ratings_needed`: how many more clinician ratings for an interval wanted.
- :func:`allocate_ratings`: which models and benchmarks the next clinician ratings should go to.
"""

from medhelm_core.model_scores.anchored import (
    anchored_differences,
    clinician_anchored,
    ratings_needed,
    sampling_status,
)
from medhelm_core.model_scores.next_ratings import allocate_ratings
from medhelm_core.model_scores.rankings import Rankings, kendall_tau_b, model_rankings, win_rates
from medhelm_core.model_scores.scores import (
    CLINICIANS,
    JURY,
    SCORE_METRICS,
    Resampled,
    item_scores,
    model_differences,
    model_means,
    resample_means,
)

__all__ = [
    "CLINICIANS",
    "JURY",
    "SCORE_METRICS",
    "Rankings",
    "Resampled",
    "allocate_ratings",
    "anchored_differences",
    "clinician_anchored",
    "item_scores",
    "kendall_tau_b",
    "model_differences",
    "model_means",
    "model_rankings",
    "ratings_needed",
    "resample_means",
    "sampling_status",
    "win_rates",
]
