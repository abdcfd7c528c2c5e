"""The Agreement dashboard's library side: load a study's scores, build its tables and Altair charts.

Pure functions (no Streamlit) shared by ``pages/agreement.py`` and the calibration report
(:mod:`medhelm_core.report`), so the page and the report show the same figures:

- :mod:`~medhelm_core.figures.data`: :func:`load_dashboard_data`, the study's scores as the dashboard's
  view model, read through :mod:`medhelm_core.frames` (which also gives :func:`data_version`, the cheap
  fingerprint that keys the page's cache, and the jury runs to choose from).
- :mod:`~medhelm_core.figures.tables`: :func:`compute_agreement` (the agreement engine, filtered by
  benchmark and model), :func:`headline_table` (the paper's four comparisons), :func:`judge_table`,
  :func:`item_means`, :func:`bland_altman`, :func:`clinician_leniency`, :func:`score_distribution`,
  :func:`largest_disagreements`.
- :mod:`~medhelm_core.figures.charts`: the Altair charts of those tables.
- :mod:`~medhelm_core.figures.drilldown`: one item with every clinician's and judge's word on it.
- :mod:`~medhelm_core.figures.jury_versions` and :mod:`~medhelm_core.figures.alignment_charts`: the
  judge-alignment loop: agreement per jury version against the clinicians' ceiling, and which judges to trust.
- :mod:`~medhelm_core.figures.model_figures` and :mod:`~medhelm_core.figures.model_charts`: the Models page's
  and the report's model figures (imported from there, not re-exported here).
- :mod:`~medhelm_core.figures.cache`: the page's figures kept current without making it wait:
  :func:`agreement_figures` (current figures, or older ones marked stale while a background thread
  computes the current ones), :func:`extra_figures` (the bootstrap tables, kept current on their own),
  :func:`fresh_figures` (for exports), :func:`freshness_note`, over the
  store of :mod:`~medhelm_core.figures.refresh`.
"""

from medhelm_core.errors import NotEnoughRatingsError
from medhelm_core.figures.alignment_charts import judge_subset_chart, version_chart
from medhelm_core.figures.cache import (
    AgreementFigures,
    CriterionViews,
    FigureKey,
    agreement_figures,
    compute_figures,
    criterion_views,
    extra_figures,
    extra_updating,
    failure_reason,
    figures_updating,
    fresh_figures,
    freshness_note,
    retry_figures,
    study_data,
    wait_for_updates,
)
from medhelm_core.figures.charts import (
    ITEM_SELECTION,
    MAX_POINTS,
    bland_altman_chart,
    distribution_chart,
    icc_chart,
    judge_chart,
    leniency_chart,
    scatter_chart,
)
from medhelm_core.figures.data import (
    HEADLINE_METRICS,
    METRIC_LABELS,
    DashboardData,
    JuryRunInfo,
    load_dashboard_data,
)
from medhelm_core.figures.drilldown import ItemDetail, item_detail
from medhelm_core.figures.jury_versions import (
    VersionFigures,
    VersionKey,
    compute_version_figures,
    version_figures,
    versions_updating,
)
from medhelm_core.figures.refresh import Lookup, RefreshStore, Snapshot
from medhelm_core.figures.tables import (
    HEADLINE_COLUMNS,
    HEADLINE_COMPARISONS,
    bland_altman,
    clinician_leniency,
    compute_agreement,
    display_comparison,
    filter_long,
    headline_table,
    item_means,
    judge_subset_table,
    judge_table,
    largest_disagreements,
    primary_rows,
    ratings_shortfall,
    robust_agreement,
    score_distribution,
)
from medhelm_core.frames import comparable_runs, data_version, default_jury_run, jury_runs

__all__ = [
    "judge_subset_table",
    "robust_agreement",
    "VersionFigures",
    "VersionKey",
    "compute_version_figures",
    "judge_subset_chart",
    "version_chart",
    "version_figures",
    "versions_updating",
    "HEADLINE_COLUMNS",
    "HEADLINE_COMPARISONS",
    "HEADLINE_METRICS",
    "ITEM_SELECTION",
    "MAX_POINTS",
    "METRIC_LABELS",
    "AgreementFigures",
    "CriterionViews",
    "DashboardData",
    "FigureKey",
    "ItemDetail",
    "JuryRunInfo",
    "Lookup",
    "NotEnoughRatingsError",
    "RefreshStore",
    "Snapshot",
    "agreement_figures",
    "bland_altman",
    "bland_altman_chart",
    "clinician_leniency",
    "compute_agreement",
    "compute_figures",
    "criterion_views",
    "comparable_runs",
    "data_version",
    "default_jury_run",
    "display_comparison",
    "distribution_chart",
    "failure_reason",
    "extra_figures",
    "extra_updating",
    "figures_updating",
    "filter_long",
    "fresh_figures",
    "freshness_note",
    "headline_table",
    "icc_chart",
    "item_detail",
    "item_means",
    "judge_chart",
    "judge_table",
    "jury_runs",
    "largest_disagreements",
    "leniency_chart",
    "load_dashboard_data",
    "primary_rows",
    "ratings_shortfall",
    "retry_figures",
    "scatter_chart",
    "score_distribution",
    "study_data",
    "wait_for_updates",
]
