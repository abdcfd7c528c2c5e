"""THE loader: a study's contents as tidy pandas frames, read from the database in one place.

Every frame that the agreement engine, the dashboard, the comparison of jury versions, the jury's results,
the exports and the report read is built here; elsewhere code only writes, or looks up single rows.

- :mod:`~medhelm_core.frames.rows`: the long table's columns (:data:`LONG_COLUMNS`), Core selects read
  column by column, JSON columns decoded at once, gold items left out.
- :mod:`~medhelm_core.frames.items`: items in full (exports) or by identity only (figures).
- :mod:`~medhelm_core.frames.clinicians`: current clinician scores, every submission, first submissions
  (speed flags), one item's clinicians.
- :mod:`~medhelm_core.frames.runs`: a study's jury runs, the default one, one asked for, those to compare.
- :mod:`~medhelm_core.frames.jury`: each verdict flattened to one row per criterion, the one jury mean per
  item and criterion (over surviving judges, with ``n_judges``), the judges as raters, per-item jury scores.
- :mod:`~medhelm_core.frames.metrics`: every metric score, and the metrics as raters with one settings
  variant each (the one rule: the most recently computed).
- :mod:`~medhelm_core.frames.long`: all of them in the long table the agreement engine reads.
- :mod:`~medhelm_core.frames.model_scores`: what the model figures read: items, every score on them and the
  rating design (which items were rated, and how they were chosen).
- :mod:`~medhelm_core.frames.review`: the clinicians' flags, skips and comments, for the review list.
- :mod:`~medhelm_core.frames.fingerprint`: :func:`data_version`, the cheap fingerprint pages cache under.
- :mod:`~medhelm_core.frames.verdict`: what the verdict and the judge bias panel read (clinicians, the jury
  and each judge; output lengths).

The long score table has one row per (item, rater, criterion) with columns ``item_id``, ``rater_id``,
``rater_kind`` (clinician, jury, judge, metric), ``criterion``, ``score``, ``benchmark`` and ``model``.
"""

from medhelm_core.frames.clinicians import (
    clinician_ratings_frame,
    first_submissions_frame,
    item_clinicians_frame,
    rating_history_frame,
)
from medhelm_core.frames.fingerprint import data_version
from medhelm_core.frames.items import ITEM_COLUMNS, item_identity_frame, items_frame
from medhelm_core.frames.jury import (
    VERDICT_COLUMNS,
    item_jury_scores,
    item_verdicts_frame,
    judge_scores_frame,
    jury_long,
    jury_long_frame,
    jury_means,
    surviving,
    verdicts_frame,
)
from medhelm_core.frames.long import scores_long_frame
from medhelm_core.frames.metrics import (
    AGREEMENT_METRICS,
    metric_raters,
    metric_scores_frame,
    metrics_long_frame,
    newest_variants,
)
from medhelm_core.frames.model_scores import (
    MODEL_METRICS,
    model_items_frame,
    model_scores_long,
    rating_design_frame,
)
from medhelm_core.frames.review import REVIEW_KINDS, filter_review, review_frame
from medhelm_core.frames.rows import LONG_COLUMNS, select_frame, without_items
from medhelm_core.frames.runs import comparable_runs, default_jury_run, jury_runs, study_jury_run, usable_run_ids
from medhelm_core.frames.verdict import output_lengths, verdict_long_frame

__all__ = [
    "AGREEMENT_METRICS",
    "ITEM_COLUMNS",
    "LONG_COLUMNS",
    "MODEL_METRICS",
    "REVIEW_KINDS",
    "VERDICT_COLUMNS",
    "clinician_ratings_frame",
    "comparable_runs",
    "data_version",
    "filter_review",
    "first_submissions_frame",
    "default_jury_run",
    "item_clinicians_frame",
    "item_identity_frame",
    "item_jury_scores",
    "item_verdicts_frame",
    "items_frame",
    "judge_scores_frame",
    "jury_long",
    "jury_long_frame",
    "jury_means",
    "jury_runs",
    "metric_raters",
    "metric_scores_frame",
    "metrics_long_frame",
    "model_items_frame",
    "model_scores_long",
    "newest_variants",
    "output_lengths",
    "rating_design_frame",
    "rating_history_frame",
    "review_frame",
    "usable_run_ids",
    "scores_long_frame",
    "select_frame",
    "study_jury_run",
    "surviving",
    "verdict_long_frame",
    "verdicts_frame",
    "without_items",
]
