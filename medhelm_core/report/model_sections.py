"""The report's sections on the models: clinician-anchored scores, rankings, win rates and the clinician
ratings still needed, from the same :class:`~medhelm_core.figures.model_figures.ModelFigures` as the Models
page. Their tables go into the data bundle as ``model_*.csv`` (``model_item_scores.csv`` and
``model_design.csv`` are the input: :func:`~medhelm_core.figures.model_figures.model_figures` on them gives
the others back).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlmodel import Session

from medhelm_core.agreement.contract import COMPOSITE
from medhelm_core.db.models import Study
from medhelm_core.errors import NotEnoughRatingsError
from medhelm_core.figures.model_figures import (
    ModelFigures,
    ModelOptions,
    anchored_display,
    needed_display,
    reading,
    study_model_figures,
    tau_display,
    win_rates_display,
)

if TYPE_CHECKING:
    from medhelm_core.report.alignment import Section
    from medhelm_core.report.content import ReportContent, ReportOptions

#: the models' charts in the report, by name (beside content.CHART_TITLES)
MODEL_CHART_TITLES = {"models": "Models: clinicians, jury and clinician-anchored",
                      "model_ranks": "Models: each source's ranking"}


def report_model_figures(session: Session, study: Study, options: ReportOptions) -> ModelFigures | None:
    """The model figures for the report's options (None when there is nothing to say about the models)."""
    try:
        return study_model_figures(session, study, ModelOptions(
            jury_run_id=options.jury_run_id, benchmarks=options.benchmarks, models=options.models,
            n_resamples=options.n_resamples, seed=options.seed))
    except NotEnoughRatingsError:
        return None


def model_charts(figures: ModelFigures | None) -> dict[str, Any]:
    """The models' charts that have something to draw."""
    from medhelm_core.figures import model_charts as charts

    if figures is None:
        return {}
    out = {}
    if not figures.anchored.empty and figures.anchored["clinician_mean"].notna().any():
        out["models"] = charts.model_score_chart(figures.anchored, scale=figures.scale)
    if len(figures.models) > 1 and not figures.rankings.ranks.empty:
        out["model_ranks"] = charts.rank_bump_chart(figures.rankings.ranks)
    return out


def model_manifest(figures: ModelFigures | None) -> dict[str, Any] | None:
    """How the bundle's model tables were computed (the manifest's ``models`` entry)."""
    if figures is None:
        return None
    o = figures.options
    return {
        "function": "medhelm_core.figures.model_figures.model_figures",
        "input": ["data/model_item_scores.csv", "data/model_design.csv"],
        "jury_run": o.jury_run_id, "benchmarks": list(o.benchmarks) or None, "models": list(o.models) or None,
        "n_resamples": o.n_resamples, "seed": o.seed, "confidence": o.confidence, "half_width": o.half_width,
        "resampling": "instances within benchmarks (models paired on shared instances)",
        "anchored": "PPI++ (ppi_py.ppi_mean_ci, lambda tuned), stratified by benchmark",
    }


def model_sections(content: ReportContent) -> list[Section]:
    """The report's sections on the models, in order; none when the study has no model figures."""
    from medhelm_core.report.alignment import Section

    figures: ModelFigures | None = getattr(content, "models", None)
    if figures is None:
        return []
    said = " ".join([*figures.messages, *reading(figures)])
    sections = []
    anchored = anchored_display(figures.anchored)
    if not anchored.empty:
        sections.append(Section(
            "Models: clinician-anchored scores",
            said + " Clinician-anchored: prediction-powered inference (PPI++, the ppi-python package) on the "
                   "clinicians' scale, valid however biased the jury is when the rated items are a random sample of "
                   "each model's items (composite, pooled over the benchmarks; the data bundle has each benchmark "
                   "and criterion).",
            anchored, "models" if "models" in content.charts else None))
    elif said:
        sections.append(Section("Models", said))
    tau = tau_display(figures.rankings.tau, COMPOSITE)
    if not tau.empty:
        sections.append(Section(
            "Models: rankings against the clinicians' order",
            "Kendall's tau-b between each source's order of the models (pooled means) and the clinicians', with a "
            "95% interval over resampled instances; an interval that holds 0 leaves the question open.",
            tau, "model_ranks" if "model_ranks" in content.charts else None))
        sections.append(Section(
            "Models: mean win rate",
            "HELM's mean win rate by the clinicians and by the jury: per benchmark, the share of the other models a "
            "model beats (a tie counts half), averaged over the benchmarks.",
            win_rates_display(figures.rankings.win_rates)))
    needed = needed_display(figures.needed)
    if not needed.empty:
        sections.append(Section(
            "Models: clinician ratings still needed",
            f"For a 95% interval of +/- {figures.options.half_width:g} on the clinicians' scale (composite, pooled): "
            "the ratings each model still needs, by clinicians alone and with the jury (ppi_py.ppi_mean_power).",
            needed))
    return sections
