"""The figures as strings: the tables and one-line read-outs that the Agreement page and the report both print.

Each table of :mod:`medhelm_core.figures` is turned into text here, with :mod:`medhelm_core.format`'s one way of
printing a number and an interval, so that the page, the HTML and the PDF cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from medhelm_core.agreement import CLINICIAN_CEILING, COMPOSITE, POOLED
from medhelm_core.agreement.interpret import KOO_LI_REFERENCE
from medhelm_core.agreement.protocol import RANGE
from medhelm_core.format import interval, intervals, number

if TYPE_CHECKING:
    from medhelm_core.figures.data import JuryRunInfo

__all__ = [
    "HeadlineCard",
    "agreement_display",
    "headline_cards",
    "headline_strings",
    "short_form",
    "headline_method",
    "headline_rows",
    "jury_run_note",
    "leniency_display",
    "limits_caption",
    "pooled_rows",
    "robust_display",
    "subsets_display",
    "versions_display",
]


@dataclass(frozen=True)
class HeadlineCard:
    """One comparison's headline figure: its name, the ICC as printed, and the line under it."""

    comparison: str
    value: str
    caption: str


_SHORT_FORMS = {
    "ICC3k": "ICC(C,k)",
    "ICC3": "ICC(C,1)",
    "ICC2": "ICC(A,1)",
    "ICC2k": "ICC(A,k)",
    "ICC1_unbalanced": "ICC(1)",
    "ICC1k_unbalanced": "ICC(1,k0)",
    "alpha_interval": "alpha",
    "alpha_ordinal": "alpha (ordinal)",
}


def short_form(method: str, comparison: str = "") -> str:
    """A table's short name of an engine method: ``ICC(C,k)``, ``ICC(A,1)``, ``ICC(1)``, the ceiling's median.

    Examples
    --------
    >>> short_form("ICC3k"), short_form("ICC1_unbalanced"), short_form("ICC3k", "clinician ceiling")
    ('ICC(C,k)', 'ICC(1)', 'ICC(C,k), median')
    """
    name = _SHORT_FORMS.get(str(method), str(method))
    return f"{name}, median" if comparison == CLINICIAN_CEILING else name


def shown_interval(ci_method: object, low: object, high: object) -> str:
    """The interval column of a row: the 95% CI, or for the clinician ceiling its range (never read as a CI).

    Examples
    --------
    >>> shown_interval("F", 0.1012, 0.6893), shown_interval("range over clinicians", 0.24, 0.64)
    ('0.10 to 0.69', 'range 0.24 to 0.64')
    """
    text = interval(low, high)
    return f"range {text}" if ci_method == RANGE and text != "n/a" else text


def used_of_available(used: object, available: object) -> str:
    """``56 of 56``: the items a figure used, of those it could have used.

    Examples
    --------
    >>> used_of_available(10, 50), used_of_available(3, 0)
    ('10 of 50', '3')
    """
    return f"{int(used)} of {int(available)}" if available and not pd.isna(available) else str(int(used))


def headline_cards(headline: pd.DataFrame, criterion: str = COMPOSITE) -> list[HeadlineCard]:
    """A card per comparison of the :func:`~medhelm_core.figures.headline_table`, pooled over the benchmarks, for
    ``criterion``: ``0.474`` over ``ICC(C,k) · 95% CI 0.10 to 0.69 · n = 56 of 56 · r 0.311, rho 0.106`` (the
    note when there is no figure)."""
    cards = headline[(headline["benchmark"] == POOLED) & (headline["criterion"] == criterion)]
    out = []
    for row in cards.itertuples():
        if not row.n_items:
            out.append(HeadlineCard(row.comparison, number(row.icc), row.note))
            continue
        parts = [short_form(row.method, row.comparison), shown_interval(row.ci_method, row.ci_low, row.ci_high),
                 f"n = {used_of_available(row.n_items, row.n_available)}"]
        if not pd.isna(row.pearson_r):
            parts.append(f"r {number(row.pearson_r)}, rho {number(row.spearman_rho)}")
        if not shown_interval(row.ci_method, row.ci_low, row.ci_high).startswith("range"):
            parts[1] = f"95% CI {parts[1]}"
        out.append(HeadlineCard(row.comparison, number(row.icc), " · ".join(parts)))
    return out


def headline_rows(headline: pd.DataFrame, criterion: str | None = None) -> pd.DataFrame:
    """The headline table's rows for ``criterion`` (every criterion when None), with the interval printed in a
    ``ci`` column, the short form and n used of n available beside the numbers (which stay numbers, so the
    table sorts)."""
    shown = headline if criterion is None else headline[headline["criterion"] == criterion]
    return shown.assign(
        ci=[shown_interval(m, lo, hi) for m, lo, hi in zip(shown["ci_method"], shown["ci_low"], shown["ci_high"],
                                                            strict=True)],
        short_form=[short_form(m, c) for m, c in zip(shown["method"], shown["comparison"], strict=True)],
        n_used=[used_of_available(u, a) for u, a in zip(shown["n_items"], shown["n_available"], strict=True)],
    )


def headline_strings(headline: pd.DataFrame) -> pd.DataFrame:
    """The headline table as strings, the way the report prints it (the same columns as the page's table)."""
    rows = headline_rows(headline)
    return pd.DataFrame(
        {
            "comparison": rows["comparison"],
            "benchmark": rows["benchmark"],
            "criterion": rows["criterion"],
            "form": rows["short_form"],
            "estimate": rows["icc"].map(number),
            "95% CI": rows["ci"],
            "n (of)": rows["n_used"],
            "r": rows["pearson_r"].map(number),
            "rho": rows["spearman_rho"].map(number),
            "kappa": rows["kappa_qw"].map(number),
            "reading": rows["reading"],
            "note": rows["note"],
        }
    )


def headline_method(protocol: str, benchmarks: Sequence[str] = ()) -> str:
    """The line under the headline table: how each figure and its interval were computed, and what is pooled."""
    full = (" The full protocol adds absolute agreement on the raw scale, ICC(A,1) and ICC(A,k), with generalized "
            "intervals (raters fixed for the jury, drawn at random for two clinicians), in 'Every figure'."
            if protocol == "full" else "")
    return ("ICC(C,k): consistency of the mean clinician with each rater, each side z-scored within itself (MedHELM's "
            "protocol; with two z-scored sides it is 2r / (1 + r), so r and rho stand beside it), exact F 95% CI. "
            "clinician-clinician is the one pair sharing the most items, as MedHELM; beside it, ICC(1) is the one-way "
            "absolute agreement of one clinician over every clinician who shares items (F 95% CI), and the ceiling "
            "is each clinician against the mean of the others (median, with the range over clinicians). n is the "
            "items used of those the figure could use; None marks a figure that does not apply to its row (r and "
            "rho beside ICC(1); kappa for a metric or the ceiling, which are not on the rating scale) or is undefined "
            "there (its note says why). Pooled over "
            f"{', '.join(benchmarks) if benchmarks else 'all benchmarks'}. {KOO_LI_REFERENCE[0].upper()}"
            f"{KOO_LI_REFERENCE[1:]}.{full} The exported report states the method in full.")


def jury_run_note(jury_run: JuryRunInfo | None) -> str:
    """Which jury run the figures use, in a line: its label, a warning that a recorded run called no judges, or
    that there is no run yet."""
    if jury_run is None:
        return "This study has no jury run yet."
    if jury_run.recorded:
        return (f"Recorded jury scores: {jury_run.name} was imported from elsewhere (such as MedHELM's published jury "
                "means); no judges were called by this app.")
    return jury_run.label


def pooled_rows(table: pd.DataFrame, criterion: str = COMPOSITE) -> pd.DataFrame:
    """The rows of ``table`` pooled over the benchmarks, for ``criterion``."""
    return table[(table["benchmark"] == POOLED) & (table["criterion"] == criterion)]


def limits_caption(limits: dict[str, float]) -> str:
    """The Bland-Altman read-out under the charts: ``Bias +0.12, 95% limits of agreement -0.50 to +0.74 (n = 40).``

    Examples
    --------
    >>> limits_caption({"bias": 0.12, "loa_low": -0.5, "loa_high": 0.744, "n_items": 40})
    'Bias +0.12, 95% limits of agreement -0.50 to +0.74 (n = 40).'
    """
    return (f"Bias {limits['bias']:+.2f}, 95% limits of agreement {limits['loa_low']:+.2f} to "
            f"{limits['loa_high']:+.2f} (n = {limits['n_items']}).")


def robust_display(robust: pd.DataFrame) -> pd.DataFrame:
    """AC2 and weighted kappa beside each other, one row per comparison, benchmark and criterion."""
    if robust.empty:
        return pd.DataFrame()
    rows = []
    for (comparison, bench, crit), part in robust.groupby(["comparison", "benchmark", "criterion"], sort=False):
        by = part.set_index("method")
        ac, kappa = by.loc["AC2"], by.loc["kappa_qw"]
        rows.append({
            "comparison": comparison, "benchmark": bench, "criterion": crit,
            "AC2": number(ac["estimate"]), "AC2 95% CI": interval(ac["ci_low"], ac["ci_high"]),
            "observed": number(ac["observed_agreement"], 2), "chance": number(ac["chance_agreement"], 2),
            "kappa": number(kappa["estimate"]), "kappa 95% CI": interval(kappa["ci_low"], kappa["ci_high"]),
            "n": str(int(ac["n_items"])),
            "note": "; ".join(dict.fromkeys(str(n) for n in (ac["note"], kappa["note"]) if n)),
        })
    return pd.DataFrame(rows)


def subsets_display(subsets: pd.DataFrame, benchmark: str = POOLED) -> pd.DataFrame:
    """Each judge subset and the clinicians' ceiling, as strings."""
    part = subsets[subsets["benchmark"] == benchmark]
    return pd.DataFrame({
        "subset": part["subset"],
        "ICC(3,k)": part["estimate"].map(number),
        "95% CI": [interval(lo, hi) if s != CLINICIAN_CEILING else f"range {interval(rl, rh)}"
                   for s, lo, hi, rl, rh in zip(part["subset"], part["ci_low"], part["ci_high"], part["range_low"],
                                                part["range_high"], strict=True)],
        "r": part["pearson_r"].map(number),
        "n": part["n_items"].astype(str),
        "note": part["note"],
    })


def versions_display(table: pd.DataFrame) -> pd.DataFrame:
    """Per jury version: its ICC, interval, difference from the baseline with its paired interval."""
    rows = table[table["criterion"] == COMPOSITE]
    return pd.DataFrame({
        "version": rows["short_label"] if "short_label" in rows else rows["label"],
        "ICC(3,k)": rows["estimate"].map(number),
        "95% CI": intervals(rows["ci_low"], rows["ci_high"]),
        "vs baseline": ["baseline" if b else number(d) for b, d in zip(rows["baseline"], rows["diff"], strict=True)],
        "difference 95% CI": ["" if b else interval(lo, hi)
                              for b, lo, hi in zip(rows["baseline"], rows["diff_ci_low"], rows["diff_ci_high"],
                                                   strict=True)],
        "change": rows["change"],
        "n": rows["n_items"].astype(str),
    })


def agreement_display(agreement: pd.DataFrame) -> pd.DataFrame:
    """Every row of the engine's table as strings (the report's "every figure" appendix)."""
    return pd.DataFrame(
        {
            "comparison": agreement["comparison"],
            "benchmark": agreement["benchmark"],
            "criterion": agreement["criterion"],
            "method": agreement["method"],
            "form": agreement["form"] if "form" in agreement else agreement["method"],
            "estimate": agreement["estimate"].map(number),
            "95% CI": [shown_interval(m, lo, hi) for m, lo, hi in zip(agreement["ci_method"], agreement["ci_low"],
                                                                      agreement["ci_high"], strict=True)],
            "CI by": agreement["ci_method"].fillna(""),
            "n (of)": [used_of_available(u, a) for u, a in zip(agreement["n_items"],
                                                                agreement.get("n_available", agreement["n_items"]),
                                                                strict=True)],
            "reading": agreement["reading"] if "reading" in agreement else "",
            "note": agreement["note"],
        }
    )


def leniency_display(le: pd.DataFrame, speed: pd.DataFrame | None = None) -> pd.DataFrame:
    """Clinician leniency and agreement with the others as strings; with ``speed``
    (:func:`~medhelm_core.rating.quality_flags.speed_summary`), each clinician's fast first ratings too."""
    out = pd.DataFrame(
        {
            "clinician": le["clinician"],
            "items": le["n_items"],
            "shared": le["n_shared"],
            "mean score": le["mean_score"].map(lambda v: number(v, 2)),
            "mean z": le["mean_z"].map(lambda v: number(v, 2)),
            "spread": le["spread"].map(lambda v: number(v, 2)),
            "ICC(3,k) with others": le["icc3k"].map(number),
            "95% CI": intervals(le["ci_low"], le["ci_high"]),
            "note": le["note"],
        }
    )
    if speed is not None and not speed.empty:
        fast = speed.set_index("rater_id")
        flags = {r: f"{int(row.n_fast)} of {int(row.n_timed)}" for r, row in fast.iterrows()}
        out.insert(6, "fast first ratings", le["clinician"].map(flags).fillna("n/a"))
    return out
