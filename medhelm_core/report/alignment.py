"""The report's sections on trusting the jury: skew-robust agreement, which judges to trust, jury versions and
rater quality, as plain (heading, text, table, chart) sections that the HTML and the PDF both render.

Each table is turned into strings here once, so the two renderings cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from medhelm_core.agreement import COMPOSITE, POOLED
from medhelm_core.figures.displays import robust_display, subsets_display, versions_display
from medhelm_core.format import interval, intervals, number
from medhelm_core.report.content import ReportContent


@dataclass(frozen=True)
class Section:
    """One section of the report: a heading, a paragraph, optionally a chart (by name) and a table of strings."""

    heading: str
    text: str
    table: pd.DataFrame | None = None
    chart: str | None = None


def quality_displays(content: ReportContent) -> list[tuple[str, pd.DataFrame]]:
    """The rater-quality tables that hold rows: speed, gold accuracy, test-retest."""
    quality = content.quality
    if quality is None:
        return []
    out = []
    if not quality.speed.empty:
        speed = quality.speed
        out.append(("Speed", pd.DataFrame({
            "clinician": speed["rater_id"], "first ratings": speed["n"].astype(str),
            "fast": speed["n_fast"].astype(str), "share fast": speed["share_fast"].map(lambda v: number(v, 2)),
            "median seconds": speed["median_seconds"].map(lambda v: number(v, 1)),
        })))
    gold = quality.gold[quality.gold["criterion"] == "all criteria"] if not quality.gold.empty else quality.gold
    if not gold.empty:
        out.append(("Gold accuracy", pd.DataFrame({
            "clinician": gold["rater_id"], "gold items": gold["n_items"].astype(str),
            "scores": gold["n_scores"].astype(str), "within range": gold["n_within"].astype(str),
            "accuracy": gold["accuracy"].map(lambda v: number(v, 2)),
            "mean miss": gold["mean_miss"].map(lambda v: number(v, 2)),
        })))
    retest = quality.retest[quality.retest["criterion"] == COMPOSITE] if not quality.retest.empty else quality.retest
    if not retest.empty:
        out.append(("Test-retest", pd.DataFrame({
            "clinician": retest["clinician"], "repeats": retest["n_pairs"].astype(str),
            "same score": retest["exact"].map(lambda v: number(v, 2)),
            "within 1": retest["within_one"].map(lambda v: number(v, 2)),
            "ICC(A,1)": retest["icc_a1"].map(number),
            "95% CI": intervals(retest["ci_low"], retest["ci_high"]),
        })))
    return out


def alignment_sections(content: ReportContent) -> list[Section]:
    """The sections to render after the per-judge one, in order; those without data are left out."""
    sections: list[Section] = []
    if content.robust is not None and not content.robust.empty:
        pooled = content.robust[content.robust["benchmark"] == POOLED]
        sections.append(Section(
            "Skew-robust agreement",
            "Clinicians' scores pile up near the top of the scale, where the ICC and kappa shrink although raters "
            "agree. Gwet's AC2 (quadratic weights) and the quadratic-weighted kappa, with 95% BCa bootstrap "
            "intervals over items, on scores rounded to the scale (pooled; the data bundle has every benchmark).",
            robust_display(pooled),
        ))
    if content.subsets is not None and not content.subsets.empty:
        sections.append(Section(
            "Which judges to trust",
            "Agreement with the clinicians (composite, ICC(3,k), z-scored as in the headline) of each judge alone, "
            "of all judges, and of the jury without each judge, against the clinicians' ceiling: the median of "
            "each clinician against the mean of the others, with their range.",
            subsets_display(content.subsets), "judge_subsets",
        ))
    versions = content.version_figures
    if versions is not None and not versions.table.empty:
        ceiling = (f" The clinicians' ceiling is {number(versions.ceiling)} (range "
                   f"{interval(versions.ceiling_low, versions.ceiling_high)}, {versions.ceiling_clinicians} "
                   "clinicians)." if pd.notna(versions.ceiling) else "")
        sections.append(Section(
            "Jury versions",
            "Each jury run is a version (its judges, rubric wording and prompt template). All are compared on the "
            "items every version scored; a difference from the baseline counts as a change only when its paired "
            "bootstrap interval (the same resampled items for both runs) excludes 0." + ceiling,
            versions_display(versions.table), "versions",
        ))
    from medhelm_core.report.model_sections import model_sections  # it builds on Section

    sections += model_sections(content)
    for heading, table in quality_displays(content):
        sections.append(Section(f"Rater quality: {heading.lower()}", "", table))
    return sections
