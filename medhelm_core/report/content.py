"""What a calibration report says, assembled once and rendered three ways (HTML, PDF, data bundle).

:func:`report_content` computes every table and chart from a :class:`~medhelm_core.figures.DashboardData`
(or takes the agreement table the page already has), so the HTML, the PDF and the CSV files cannot
disagree with each other or with the Agreement page.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

import altair as alt
import pandas as pd
from sqlmodel import Session, col, select

from medhelm_core.agreement import COMPOSITE, POOLED
from medhelm_core.agreement.protocol import PROTOCOLS
from medhelm_core.db.migrate import current_revision
from medhelm_core.db.models import Item, Study
from medhelm_core.errors import MedhelmError, ValidationError
from medhelm_core.figures import (
    DashboardData,
    VersionFigures,
    bland_altman,
    bland_altman_chart,
    clinician_leniency,
    compute_agreement,
    compute_version_figures,
    distribution_chart,
    filter_long,
    headline_table,
    icc_chart,
    item_means,
    judge_chart,
    judge_subset_chart,
    judge_subset_table,
    judge_table,
    largest_disagreements,
    leniency_chart,
    robust_agreement,
    scatter_chart,
    score_distribution,
    version_chart,
)
from medhelm_core.figures.displays import headline_strings
from medhelm_core.figures.model_figures import ModelFigures
from medhelm_core.format import number
from medhelm_core.rating.quality import RaterQuality, study_rater_quality
from medhelm_core.report.model_sections import MODEL_CHART_TITLES, model_charts, report_model_figures
from medhelm_core.verdict import StudyVerdict, study_verdict

#: distributions whose versions decide the figures (or how they are drawn); listed in the manifest
PACKAGES = (
    "medhelm-calibrate",
    "pandas",
    "numpy",
    "scipy",
    "pingouin",
    "krippendorff",
    "altair",
    "vl-convert-python",
    "fpdf2",
    "sqlalchemy",
    "sqlmodel",
    "ppi-python",
)
EXCERPT_CHARS = 240
CHART_TITLES = {
    "icc": "Headline: ICC per comparison",
    "scatter": "Jury and clinicians per item",
    "bland_altman": "Bland-Altman: jury minus clinicians",
    "judges": "Per-judge agreement with clinicians",
    "clinicians": "Clinicians: leniency and agreement with each other",
    "distribution": "Distribution of scores",
    "judge_subsets": "Which judges to trust",
    "versions": "Jury versions: agreement with clinicians",
    **MODEL_CHART_TITLES,
}


@dataclass(frozen=True)
class ReportOptions:
    """What the report covers and how it is computed: enough to recompute it from its data bundle."""

    protocol: str = "medhelm"
    benchmarks: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    jury_run_id: int | None = None
    n_resamples: int = 2000
    seed: int = 0
    #: put an excerpt of each output in the "largest disagreements" table (leave out to share no item text)
    item_texts: bool = True

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValidationError(f"protocol {self.protocol!r} unknown; use one of {', '.join(PROTOCOLS)}")
        if self.n_resamples < 1:
            raise ValidationError(f"the bootstrap needs at least 1 resample, got {self.n_resamples}")
        object.__setattr__(self, "benchmarks", tuple(self.benchmarks))
        object.__setattr__(self, "models", tuple(self.models))


@dataclass
class ReportContent:
    """Every table, chart and fact of a report."""

    options: ReportOptions
    data: DashboardData
    study: dict[str, Any]
    generated_at: str
    schema_revision: str | None
    versions: dict[str, str]
    long: pd.DataFrame
    agreement: pd.DataFrame
    headline: pd.DataFrame
    judges: pd.DataFrame
    means: pd.DataFrame
    limits: dict[str, float]
    leniency: pd.DataFrame
    distribution: pd.DataFrame
    disagreements: pd.DataFrame
    charts: dict[str, alt.TopLevelMixin] = field(default_factory=dict)
    #: AC2 and weighted kappa beside the ICC (agreement.robust.robust_table)
    robust: pd.DataFrame | None = None
    #: each judge alone and every jury without one judge, with the clinicians' ceiling
    subsets: pd.DataFrame | None = None
    #: jury-clinician agreement per jury version (run), on the items all scored
    version_figures: VersionFigures | None = None
    #: speed flags, gold accuracy and test-retest of the clinicians
    quality: RaterQuality | None = None
    #: the models: clinician-anchored scores, rankings, win rates (medhelm_core.figures.model_figures)
    models: ModelFigures | None = None
    #: the pre-registered verdict and the judge bias panel (medhelm_core.verdict), opening the report
    verdict: StudyVerdict | None = None

    @property
    def verdict_lines(self) -> list[tuple[str, list[str]]]:
        """The verdict and the bias panel in plain words, as (heading, sentences), for the top of the report."""
        v = self.verdict
        if v is None:
            return []
        protocol = v.protocol.describe()
        fixed = f"fixed {v.protocol_fixed_at:%Y-%m-%d %H:%M} UTC" if v.protocol_fixed_at else "not fixed (default)"
        return [("Verdict: can the jury stand in for a clinician?", [*v.flags, f"Protocol ({fixed}): {protocol}.",
                                                                      *v.sentences, *v.design]),
                ("Judge bias panel", v.bias_words)]

    @property
    def benchmarks(self) -> list[str]:
        """The benchmarks the report covers (each shown alone and pooled), in the agreement table's order, so that
        passing them back to the engine gives its rows in the same order."""
        return list(dict.fromkeys(b for b in self.agreement["benchmark"] if b != POOLED))

    @property
    def jury_label(self) -> str:
        """Which jury run, and whether it is recorded."""
        return self.data.jury_run.label if self.data.jury_run else "no jury run"

    @property
    def nothing_to_show(self) -> bool:
        """True when every agreement figure of the headline is n/a (too few shared items, raters who gave every item
        the same score ...): the report then says so instead of drawing empty charts."""
        return not self.headline["icc"].notna().any()


#: what a report says at its top when every agreement figure is n/a
NOTHING_TO_SHOW = ("Nothing to show yet: every agreement figure of this selection is n/a. The notes in the tables "
                   "say why (for example too few items shared by two raters, or a rater who gave every item the same "
                   "score); the data bundle holds the scores as they are.")


def package_versions() -> dict[str, str]:
    """Python's and each listed distribution's version ("not installed" where missing)."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _study_facts(session: Session, study: Study, data: DashboardData) -> dict[str, Any]:
    clin = data.long[data.long["rater_kind"] == "clinician"]
    return {
        "id": study.id,
        "name": study.name,
        "title": study.title,
        "description": study.description,
        "created_at": study.created_at.isoformat(),
        "overlap": study.overlap,
        "show_reference": study.show_reference,
        "n_items": len(data.items),
        "n_clinicians": int(clin["rater_id"].nunique()),
        "n_clinician_scores": len(clin),
        "n_items_rated": int(clin["item_id"].nunique()),
    }


def _excerpts(session: Session, item_ids: Sequence[str]) -> dict[str, str]:
    if not item_ids:
        return {}
    rows = session.exec(select(Item.id, Item.output_text).where(col(Item.id).in_([int(i) for i in item_ids]))).all()
    out = {}
    for item_id, text in rows:
        flat = " ".join((text or "").split())
        out[str(item_id)] = flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"
    return out


def report_content(
    session: Session,
    study: Study,
    data: DashboardData,
    options: ReportOptions,
    agreement: pd.DataFrame | None = None,
) -> ReportContent:
    """Compute a report's tables and charts; pass ``agreement`` to reuse a table computed with the same options.

    Raises :class:`~medhelm_core.figures.NotEnoughRatingsError` when there is nothing to report yet.
    """
    if agreement is None:
        agreement = compute_agreement(
            data.long,
            options.protocol,
            options.benchmarks or None,
            options.models or None,
            n_resamples=options.n_resamples,
            seed=options.seed,
        )
    long = filter_long(data.long, options.benchmarks, options.models)
    headline = headline_table(agreement, options.protocol)
    judges = judge_table(agreement, options.protocol)
    means = item_means(long, COMPOSITE, data.criteria)
    limits = bland_altman(means)
    leniency = clinician_leniency(long, COMPOSITE, data.criteria)
    distribution = score_distribution(long, data.criteria)
    disagreements = largest_disagreements(means, data.items, 10)
    if options.item_texts:
        texts = _excerpts(session, disagreements["item_id"].tolist())
        disagreements["output_excerpt"] = disagreements["item_id"].map(texts).fillna("")
    robust = robust_agreement(data, options.benchmarks, options.models, n_resamples=options.n_resamples,
                              seed=options.seed)
    subsets = judge_subset_table(long)
    versions = compute_version_figures(session, study, options.benchmarks, n_resamples=options.n_resamples)
    models = report_model_figures(session, study, options)
    try:  # a report shows the verdict but does not count as its first viewing (the page and the CLI do)
        verdict = study_verdict(session, study, options.jury_run_id, record_view=False,
                                benchmarks=options.benchmarks)
    except MedhelmError:
        verdict = None
    charts: dict[str, alt.TopLevelMixin] = {"icc": icc_chart(headline)}
    if means["jury"].notna().any():
        charts["scatter"] = scatter_chart(means, data.scale)
        charts["bland_altman"] = bland_altman_chart(means, limits)
    if judges["judge"].ne("jury (mean)").any():
        charts["judges"] = judge_chart(judges)
    if not leniency.empty:
        charts["clinicians"] = leniency_chart(leniency)
    if not distribution.empty:
        charts["distribution"] = distribution_chart(distribution, data.criteria)
    if not subsets.empty:
        charts["judge_subsets"] = judge_subset_chart(subsets)
    if not versions.table.empty:
        charts["versions"] = version_chart(versions.table, versions.ceiling, versions.ceiling_low,
                                           versions.ceiling_high)
    charts.update(model_charts(models))
    return ReportContent(
        options=options,
        data=data,
        study=_study_facts(session, study, data),
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        schema_revision=current_revision(session.get_bind()),
        versions=package_versions(),
        long=long,
        agreement=agreement,
        headline=headline,
        judges=judges,
        means=means,
        limits=limits,
        leniency=leniency,
        distribution=distribution,
        disagreements=disagreements,
        charts=charts,
        robust=robust,
        subsets=subsets,
        version_figures=versions,
        quality=study_rater_quality(session, study),
        models=models,
        verdict=verdict,
    )


def headline_display(headline: pd.DataFrame) -> pd.DataFrame:
    """The headline table as strings, as the report prints it (:func:`~.displays.headline_strings`)."""
    return headline_strings(headline)


def disagreements_display(d: pd.DataFrame) -> pd.DataFrame:
    """The largest disagreements as strings (an output excerpt too, when the report includes texts)."""
    shown = pd.DataFrame(
        {
            "item": d["item_id"],
            "benchmark": d["benchmark"],
            "instance": d["instance_id"],
            "model": d["model"],
            "clinician mean": d["clinician_mean"].map(lambda v: number(v, 2)),
            "clinicians": d["n_clinicians"],
            "jury": d["jury"].map(lambda v: number(v, 2)),
            "difference": d["difference"].map(lambda v: number(v, 2)),
        }
    )
    if "output_excerpt" in d:
        shown["output (excerpt)"] = d["output_excerpt"]
    return shown
