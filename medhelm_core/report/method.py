"""The report's method section, in plain words, written from the options and data it describes.

A reader who never opened the app should be able to recompute every figure from the data bundle with any
statistics package: so it names the ICC form, the items used, the z-scoring, the intervals and the
bootstrap, and the exact call that recomputes the table.
"""

from __future__ import annotations

from medhelm_core.agreement.contract import MIN_ITEMS
from medhelm_core.figures import HEADLINE_METRICS
from medhelm_core.report.content import ReportContent


def _list(values: list[str]) -> str:
    if not values:
        return "none"
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def method_paragraphs(content: ReportContent) -> list[tuple[str, str]]:
    """(heading, paragraph) pairs describing how every figure of ``content`` was computed."""
    opts, data = content.options, content.data
    criteria = data.criteria
    low, high = data.scale
    benchmarks = content.benchmarks
    run = data.jury_run
    out: list[tuple[str, str]] = []
    out.append(
        (
            "Data",
            f"Study {content.study['name']!r}: {content.study['n_items']} items (one model output for one benchmark "
            f"instance each), of which {content.study['n_items_rated']} were rated by "
            f"{content.study['n_clinicians']} clinicians. Each rater scores every output on {_list(criteria)}, "
            f"integers from {low} to {high}. A revised rating counts with its latest revision only. "
            f"The figures use the {content.long['item_id'].nunique()} items of {_list(benchmarks)} "
            f"that hold a score, from {_list(list(opts.models)) if opts.models else 'all models'}.",
        )
    )
    if run is None:
        jury = "The study has no jury run, so no jury figures are reported."
    else:
        jury = (
            f"Jury: {run.label}. An item's jury score on a criterion is the unweighted mean over the judges whose "
            f"verdict parsed (status ok); {run.n_failed} failed verdicts are counted but never scored, and an item "
            "with no surviving judge has no jury score (it is left out, never given a default)."
        )
        if run.recorded:
            jury += (
                " These are recorded scores imported from elsewhere (such as MedHELM's published jury "
                "means): no judge was called by this app."
            )
        if run.prompt_hash:
            jury += f" Prompt template SHA-256: {run.prompt_hash}."
    out.append(("Jury", jury))
    metrics = [
        f"{label} ({name}, settings {data.metric_settings[name]['settings_hash'][:12]})"
        for name, label in HEADLINE_METRICS.items()
        if name in data.metric_settings
    ]
    out.append(
        (
            "Composite and metrics",
            "The composite is the mean of the criteria per rater and item, kept only where the rater scored all of "
            "them. "
            + (
                f"Metrics: {_list(metrics)}, each computed between the output and its reference; a metric's single "
                "score per item stands for every criterion and for the composite."
                if metrics
                else "No ROUGE-L or BERTScore scores were computed for this study."
            ),
        )
    )
    protocol = (
        "Agreement with clinicians (the MedHELM paper's protocol): per item, the clinicians' scores are averaged "
        "into one mean clinician. The mean clinician and the other rater (the jury, a single judge, ROUGE-L or "
        "BERTScore) are each z-scored over all of their own items in the scope (subtract the mean, divide by "
        "the sample standard deviation), so scales of 1-5 and 0-1 can be compared. The intraclass correlation "
        "is ICC(3,k): two-way mixed effects, consistency, the average of k = 2 raters (Shrout and Fleiss "
        "1979; pingouin's ICC3k), over the items both sides scored; items lacking either side are left out. "
        "In words: ICC(C,k), the consistency of the mean of the two sides. Its 95% interval is the exact "
        "F-based one. Pearson's r and Spearman's rho are computed on the same z-scores and printed beside it, "
        "since with two z-scored raters ICC(3,k) = 2r / (1 + r) (0.474 is r = 0.31); the quadratic-weighted "
        "kappa is computed on the criterion scores as they are (integers) and on means rounded to the nearest "
        "level, halves away from zero (4.5 to 5, 3.5 to 4), and only when both sides are on the rating scale. "
        "The clinician-clinician baseline is ICC(3,k) of the single pair of clinicians who share the most "
        "items (ties go to the first pair in sorted order), each z-scored over all of their own ratings. "
        "Beside that one pair, the clinicians' agreement from every clinician: ICC(1), the one-way absolute "
        "agreement of one clinician over every item two or more clinicians rated, on the raw scale (unbalanced "
        "one-way ANOVA with the adjusted group size k0; F interval), and the clinician ceiling, each clinician "
        "against the mean of the others on the items they share (z-scored ICC(3,k)), given as the median over "
        "clinicians with their range (a range, not a confidence interval). Every figure states n as the items "
        "used of the items it could have used, so a listwise deletion shows. "
        f"A figure needs at least {MIN_ITEMS} shared items; a rater who gives every item the same score has no "
        "z-scores, and a figure that is undefined (no variance, a zero denominator, a bound outside the ICC's "
        "range) is reported as n/a with a note, never as a number."
    )
    if opts.protocol == "medhelm":
        protocol += (" No bootstrap is used in this protocol; the 'full' protocol adds absolute agreement on the "
                     "raw scale.")
    out.append(("Agreement", protocol))
    scope = (
        "Every figure is computed for each benchmark alone and for the benchmarks pooled ('pooled'); the "
        "z-scoring is done within each scope, so pooled figures are not averages of the per-benchmark ones. "
        f"Pooled here means {_list(benchmarks)}."
    )
    out.append(("Benchmarks", scope))
    if opts.protocol == "full":
        out.append(
            (
                "Full protocol",
                "Besides ICC(C,k), each pair is given ICC(C,1) (consistency of one rater, z-scored, F interval) and "
                "absolute agreement on the raw scale, where z-scoring would remove the leniency it is meant to "
                "see: ICC(A,1) and ICC(A,k) (two-way, absolute agreement; McGraw and Wong 1996), the jury as one "
                "more rater beside the mean clinician, only when both sides are on the rating scale (not for "
                "metrics). Their intervals were chosen by a coverage study (docs/benchmarks.md): McGraw and "
                "Wong's F interval covers 76-92% once raters differ and are drawn at random, and 100% (needlessly "
                "wide) for fixed raters, so the interval is the generalized confidence interval (Weerahandi 1993; "
                "Ionan et al. 2014; 5,000 draws, fixed seed), with fixed rater effects for the jury and a judge "
                "beside the mean clinician and random rater effects for the two clinicians of the pair. With two "
                "clinicians drawn at random the spread between raters rests on one degree of freedom, so that "
                "interval stays wide however many items are rated; the note says so. Bootstrap intervals over "
                "items are not used: they cover 89-94% at 30 items. The one-way ICC(1) is given only over every "
                "clinician (raters that differ by item), with Krippendorff's alpha (interval and ordinal).",
            )
        )
    out += _alignment_paragraphs(content)
    out.append(
        (
            "Readings and charts",
            "Readings follow Koo and Li (2016, J Chiropr Med 15:155-163): poor below 0.5, moderate 0.5 to 0.75, "
            "good 0.75 to 0.9, excellent above 0.9. They are given only for the reliability forms on the raw "
            "scale they were written for (ICC(A,1), ICC(A,k), ICC(1)), not for ICC(C,k) of two z-scored sides, "
            "which is a function of a correlation. The per-item charts use the raw composite: the Bland-Altman bias "
            "is the mean of jury "
            "minus mean clinician and its limits of agreement are the bias plus or minus 1.96 standard "
            "deviations of that difference. A clinician's leniency (mean z) is the mean, over items shared with "
            "other clinicians, of their composite minus the others' mean on that item, divided by the standard "
            "deviation of all clinicians' composites; their spread is the standard deviation of their own "
            "composites over that same pooled standard deviation; their agreement with the others is ICC(3,k) "
            "of their composite against the mean of the other clinicians on the items they share.",
        )
    )
    out.append(
        (
            "Recompute",
            "The data bundle holds scores_long.csv, the exact input of the agreement table (one row per item, "
            "rater and criterion; read the ids as text), and agreement.csv, its output. The call below, with this "
            "package, gives agreement.csv back. With pingouin alone: per scope, z-score each side as above and "
            "call pingouin.intraclass_corr on the two columns; its ICC3k row is the figure.",
        )
    )
    return out


def _alignment_paragraphs(content: ReportContent) -> list[tuple[str, str]]:
    """How the figures on trusting the jury were computed: gold items, AC2 and kappa, judges, versions, raters."""
    opts, data = content.options, content.data
    out: list[tuple[str, str]] = []
    if data.gold_items:
        out.append(("Gold items", f"{data.gold_items} gold items (items with an expected score range, rated by every "
                    "clinician to measure their accuracy) are left out of every agreement figure: every clinician "
                    "shares them, which would make them decide the clinician pair, and they are chosen for being "
                    "clear-cut."))
    out.append((
        "Skew-robust agreement",
        "Beside each ICC, Gwet's AC2 with quadratic weights (Gwet 2008 and 2014: chance agreement from how the "
        "ratings spread over the categories of the whole scale) and Cohen's quadratic-weighted kappa, for the "
        "clinician pair and for the mean clinician against the jury and each judge. Both sides are rounded to the "
        "nearest level of the scale first (halves away from zero: 4.5 to 5, 3.5 to 4), since means and composites "
        "fall between levels; criterion scores of single clinicians are integers and are used as they are. "
        f"Their 95% intervals are BCa bootstrap intervals over items ({opts.n_resamples} resamples, seed "
        f"{opts.seed}); with two raters per item both coefficients depend on the items only through the table of "
        "score pairs, so an item resample is drawn as a multinomial sample of that table's cells, with the exact "
        "leave-one-item-out jackknife for the acceleration.",
    ))
    if content.subsets is not None and not content.subsets.empty:
        out.append((
            "Which judges to trust",
            "Each judge alone, all judges together, and the jury without each judge are compared with the "
            "clinicians as the jury is (mean over the subset's judges per item, composite, each side z-scored, "
            "ICC(3,k) with its F interval). The clinicians' ceiling is each clinician against the mean of the "
            "other clinicians on the items they share (ICC(3,k), z-scored), summarised by its median and range "
            "over clinicians: a reference for what a judge could reach, not a bound.",
        ))
    versions = content.version_figures
    if versions is not None and not versions.table.empty:
        out.append((
            "Jury versions",
            "Every jury run with verdicts is a version, labelled with its judges, the rubric version the judges saw "
            "and the prompt template version. Each is compared with the mean clinician as in the headline "
            "(ICC(3,k) of z-scored composites, F interval), all on the items that the clinicians and every version "
            "scored, so the figures are comparable. The difference of each version's ICC from the baseline's "
            f"(the first run) has a paired percentile bootstrap interval ({opts.n_resamples} resamples of the "
            f"common items, seed {opts.seed}, the same resamples for every version); a change is called higher "
            "or lower only when that interval excludes 0.",
        ))
    out.append((
        "Rater quality",
        (f"A first rating submitted faster than the study's threshold ({content.quality.threshold_seconds:g} s) "
         "is flagged, not excluded. " if content.quality else "")
        + "Gold accuracy is the share of a clinician's current scores on gold items that fall within the expected "
        "range. Test-retest shows a share of each clinician's rated items to them again later, unannounced; the "
        "repeat is stored apart and never counts as a second rater, and each clinician's agreement with "
        "themselves is ICC(A,1) (two-way, absolute agreement, single rating; Koo and Li 2016) of their first "
        "and repeated scores.",
    ))
    return out


def recompute_snippet(content: ReportContent) -> str:
    """Python that recomputes ``agreement.csv`` from the bundle's ``scores_long.csv``."""
    opts = content.options
    benches = ", ".join(repr(b) for b in content.benchmarks)
    return (
        "import pandas as pd\n"
        "from medhelm_core.agreement import agreement_table\n"
        "from medhelm_core.report import read_scores_long\n\n"
        "long = read_scores_long('data/scores_long.csv')  # ids read as text\n"
        f"table = agreement_table(long, protocol={opts.protocol!r}, benchmarks=[{benches}],\n"
        f"                        n_resamples={opts.n_resamples}, seed={opts.seed})"
    )
