"""Agreement: the headline ICC table, its charts, a drill-down to any item, and the report (researchers, admins).

Everything is computed by medhelm_core.figures and kept, process-wide, with the study's data version (counts
and latest times of its ratings, verdicts and metric scores). After a change the page draws the figures it
has at once, saying how old they are, while current ones are computed in the background; it polls and reruns
itself when they are ready. The report always uses current figures. Model text is drawn with st.text and
dataframes, never as markdown or HTML.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st
from sqlmodel import Session

from medhelm_core.agreement import COMPOSITE, POOLED
from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Study
from medhelm_core.errors import MedhelmError
from medhelm_core.figures import (
    ITEM_SELECTION,
    FigureKey,
    NotEnoughRatingsError,
    VersionKey,
    agreement_figures,
    bland_altman_chart,
    data_version,
    default_jury_run,
    distribution_chart,
    figures_updating,
    fresh_figures,
    freshness_note,
    icc_chart,
    item_detail,
    judge_chart,
    judge_subset_chart,
    jury_runs,
    leniency_chart,
    retry_figures,
    scatter_chart,
    study_data,
    version_chart,
    version_figures,
    versions_updating,
)
from medhelm_core.figures.jury_versions_data import comparable_runs
from medhelm_core.jury.run_versions import run_versions
from medhelm_core.report import ReportOptions, write_report, zip_folder
from medhelm_core.report.alignment import robust_display, subsets_display, versions_display
from medhelm_core.report.content import agreement_display, interval, leniency_display
from medhelm_core.studies import list_studies
from pages.common import engine, require_role

#: how often a page showing older figures checks whether the current ones are ready
REFRESH_EVERY = "1s"

who = require_role("admin", "researcher")
st.title("Agreement")
eng = engine()


def height_of(chart) -> int | str:  # noqa: ANN001 - an Altair chart
    """The chart's own height plus room for its title and axis: Streamlit's theme squeezes a layered chart with
    a nominal y axis to one row when left to size it ("content")."""
    height = getattr(chart, "height", None)
    return int(height) + 110 if isinstance(height, (int, float)) else "content"


def stop_on(error: BaseException) -> None:
    """Say why there are no figures, in one line, and stop; an error that is not ours is raised (a bug)."""
    if isinstance(error, NotEnoughRatingsError):
        st.info(str(error))
    elif isinstance(error, MedhelmError):
        st.error(str(error))
    else:
        raise error
    st.stop()


with Session(eng) as session:
    studies = {s.name: s for s in list_studies(session)}
if not studies:
    st.info("No studies yet: import items on the Data page.")
    st.stop()
study = studies[st.selectbox("Study", list(studies), key="agreement_study")]
with Session(eng) as session:
    runs = jury_runs(session, study)
    default_run = default_jury_run(session, runs)
    version = data_version(session, study)

with st.sidebar:
    st.subheader("Filters")
    run_id = None
    if len(runs) > 1:
        labels = {f"{r.id}: {r.name}" + (" (recorded)" if r.source == "recorded" else ""): r.id for r in runs}
        run_id = labels[st.selectbox("Jury run", list(labels), index=runs.index(default_run), key="agreement_run",
                                     help="Default: the newest run with verdicts.")]
    protocol = st.radio("Protocol", ["medhelm", "full"], horizontal=True, key="agreement_protocol",
                        help="medhelm: the paper's ICC(3,k) on z-scores with F intervals. full: every ICC form, "
                             "bootstrap intervals and all-clinician designs (slower).")
# None means the latest run: the figures are kept per choice, not per what it resolves to.
scores_key = FigureKey.of(eng, study.id, run_id)
with st.spinner("Loading the study's scores..."):
    scores = study_data(eng, scores_key, version)
if scores.figures is None:
    stop_on(scores.error)
data = scores.value
with st.sidebar:
    benchmarks = tuple(st.multiselect("Benchmarks (pooled over the chosen)", sorted(data.items["benchmark"].unique()),
                                      placeholder="all benchmarks", key="agreement_benchmarks"))
    models = tuple(st.multiselect("Models", sorted(data.items["model"].unique()), placeholder="all models",
                                  key="agreement_models"))
    criterion_choice = st.selectbox("Criterion", ["all", COMPOSITE, *data.criteria], key="agreement_criterion",
                                    help="Rows of the table; the charts use the composite when 'all'.")
criterion = COMPOSITE if criterion_choice == "all" else criterion_choice

key = FigureKey.of(eng, study.id, scores_key.jury_run, protocol, benchmarks, models)
with st.spinner("Computing agreement (kept until the ratings change)..."):
    lookup = agreement_figures(eng, key, version)
if lookup.figures is None:
    stop_on(lookup.error)
figures = lookup.value
data = figures.data  # the scores these figures were computed from (older ones while an update runs)
jury_run = data.jury_run
run_id = jury_run.id if jury_run else None
note = freshness_note(lookup)
if note and lookup.error is not None:
    st.error(note)
    if st.button("Try again", key="agreement_retry"):
        retry_figures(key)
        st.rerun()
elif note:
    st.warning(note, icon="⏳")
if lookup.updating:

    @st.fragment(run_every=REFRESH_EVERY)
    def rerun_when_current() -> None:
        """Rerun the page once the figures being computed are ready."""
        if not figures_updating(key):
            st.rerun()

    rerun_when_current()

if jury_run is None:
    st.caption("This study has no jury run yet.")
elif jury_run.recorded:
    st.warning(f"Recorded jury scores: {jury_run.name} was imported from elsewhere (such as MedHELM's "
               "published jury means); no judges were called by this app.")
else:
    st.caption(jury_run.label)

table = figures.table
headline = figures.headline
shown = headline if criterion_choice == "all" else headline[headline["criterion"] == criterion]
st.subheader("Headline agreement")
cards = headline[(headline["benchmark"] == POOLED) & (headline["criterion"] == criterion)]
for column, row in zip(st.columns(max(1, len(cards))), cards.itertuples(), strict=False):
    with column:
        st.metric(row.comparison, "n/a" if pd.isna(row.icc) else f"{row.icc:.3f}")
        st.caption(f"95% CI {interval(row.ci_low, row.ci_high)} · n = {row.n_items}" if row.n_items else row.note)
st.dataframe(
    shown.assign(ci=[interval(lo, hi) for lo, hi in zip(shown["ci_low"], shown["ci_high"], strict=True)]),
    hide_index=True,
    column_order=["comparison", "benchmark", "criterion", "icc", "ci", "n_items", "pearson_r", "spearman_rho",
                  "kappa_qw", "reading", "note"],
    column_config={
        "icc": st.column_config.NumberColumn("ICC(3,k)", format="%.3f"),
        "ci": st.column_config.TextColumn("95% CI"),
        "n_items": st.column_config.NumberColumn("n"),
        "pearson_r": st.column_config.NumberColumn("r", format="%.3f"),
        "spearman_rho": st.column_config.NumberColumn("rho", format="%.3f"),
        "kappa_qw": st.column_config.NumberColumn("kappa", format="%.3f"),
    },
)
interval_kind = "bootstrap (BCa, items resampled)" if protocol == "full" else "F-based"
st.caption(f"ICC(3,k) with the mean clinician, each side z-scored within itself (MedHELM's protocol), {interval_kind} "
           "95% CI; clinician-clinician uses the two clinicians sharing the most items. Pooled over "
           f"{', '.join(benchmarks) if benchmarks else 'all benchmarks'}. The exported report states the method in "
           "full.")
headline_chart = icc_chart(headline, criterion)
st.altair_chart(headline_chart, width="stretch", height=height_of(headline_chart))

def newest_pick(sources: dict[str, list[str]]) -> str:
    """The item asked for last: a click, a row or a typed id, whichever changed in this run (else the last one)."""
    # Kept per study, so an item picked in one study is not looked for in the next.
    seen = st.session_state.setdefault(f"agreement_seen_{study.id}", {})
    chosen = st.session_state.get(f"agreement_chosen_{study.id}", "")
    for name, picks in sources.items():
        if seen.get(name) != picks:
            seen[name] = picks
            chosen = picks[-1] if picks else chosen
    st.session_state[f"agreement_chosen_{study.id}"] = chosen
    return chosen


v = figures.views(criterion)
picked: dict[str, list[str]] = {}
if v.means["jury"].notna().any():
    st.subheader("Jury and clinicians per item")
    left, right = st.columns(2)
    with left:
        scatter = st.altair_chart(scatter_chart(v.means, data.scale), on_select="rerun", key="agreement_scatter")
    with right:
        ba = st.altair_chart(bland_altman_chart(v.means, v.limits), on_select="rerun", key="agreement_ba")
    lim = v.limits
    st.caption(f"Bias {lim['bias']:+.2f}, 95% limits of agreement {lim['loa_low']:+.2f} to {lim['loa_high']:+.2f} "
               f"(n = {lim['n_items']}). Click a point to open its item below.")
    for name, event in (("scatter", scatter), ("bland_altman", ba)):
        picked[name] = [str(p["item_id"]) for p in event.selection.get(ITEM_SELECTION, []) if "item_id" in p]

judges = figures.judges
st.subheader("Per-judge agreement")
if judges["judge"].ne("jury (mean)").any():
    per_judge = judge_chart(judges, POOLED, criterion)
    st.altair_chart(per_judge, width="stretch", height=height_of(per_judge))
else:
    st.caption("Per-judge agreement needs a jury run with several judges; this one has one (or recorded means).")

subsets = figures.judge_subsets()
if not subsets.empty:
    st.subheader("Which judges to trust")
    subset_chart = judge_subset_chart(subsets)
    st.altair_chart(subset_chart, width="stretch", height=height_of(subset_chart))
    st.dataframe(subsets_display(subsets), hide_index=True)
    st.caption("Each judge alone, all judges, and the jury without each judge (composite), against the clinicians' "
               "ceiling: each clinician against the mean of the others (median, with their range as a band).")

st.subheader("Skew-robust agreement")
robust = figures.robust()
st.dataframe(robust_display(robust[(robust["benchmark"] == POOLED) & (robust["criterion"] == criterion)]),
             hide_index=True)
st.caption("Scores crowd the top of the scale, where the ICC and kappa shrink although raters agree: Gwet's AC2 "
           "(quadratic weights) stays near the observed agreement. Both on scores rounded to the scale, with 95% "
           f"BCa bootstrap intervals over items; {criterion}, pooled.")

st.subheader("Jury versions")
with Session(eng) as session:
    names = {r.id: run_versions(r, session).short_label for r in comparable_runs(session, study)}  # oldest first
if not names:
    st.caption("No jury run with verdicts yet.")
else:
    baseline = st.selectbox("Baseline version", list(names), key="agreement_baseline", format_func=names.get,
                            help="Every other version's difference from this one gets a paired bootstrap interval.")
    version_key = VersionKey.of(eng, study.id, benchmarks, baseline)
    with st.spinner("Comparing the jury versions..."):
        compared = version_figures(eng, version_key, version)
    if compared.figures is None:
        stop_on(compared.error)
    if compared.stale:
        st.caption("These are the figures from before the latest changes; updated ones follow by themselves.")
        if versions_updating(version_key) and not lookup.updating:

            @st.fragment(run_every=REFRESH_EVERY)
            def rerun_when_versions_current() -> None:
                if not versions_updating(version_key):
                    st.rerun()

            rerun_when_versions_current()
    found = compared.value
    if not found.table.empty:
        chart = version_chart(found.table, found.ceiling, found.ceiling_low, found.ceiling_high)
        st.altair_chart(chart, width="stretch", height=height_of(chart))
        st.dataframe(versions_display(found.table), hide_index=True)
        st.caption(f"On the {int(found.table['n_items'].iloc[0])} items every version scored; a change counts when "
                   "its paired bootstrap interval (the same resampled items for both versions) excludes 0. The band "
                   "is the clinicians' ceiling.")

st.subheader("Clinicians")
if v.leniency.empty:
    st.caption("No clinician ratings in this selection.")
else:
    st.altair_chart(leniency_chart(v.leniency), width="content")
    st.dataframe(leniency_display(v.leniency, data.speed), hide_index=True)
    st.caption("Fast first ratings: submitted faster than the study's speed threshold (a flag, not an exclusion); "
               "the Raters page has gold accuracy and test-retest.")

st.subheader("Distribution of scores")
st.altair_chart(distribution_chart(v.distribution, data.criteria), width="content")

st.subheader("Items")
if not v.disagreements.empty:
    st.caption("Where the jury and the clinicians differ most; select a row to open the item.")
    rows = st.dataframe(v.disagreements, hide_index=True, on_select="rerun", selection_mode="single-row",
                        key="agreement_disagreements",
                        column_config={c: st.column_config.NumberColumn(format="%.2f")
                                       for c in ("clinician_mean", "jury", "difference")})
    picked["table"] = [str(v.disagreements.iloc[i]["item_id"]) for i in rows.selection.rows]
typed = st.text_input("Open an item by id", key="agreement_item_id", placeholder="item id, e.g. 42").strip()
picked["typed"] = [typed] if typed else []
chosen = newest_pick(picked)
if chosen:
    try:
        with Session(eng) as session:
            detail = item_detail(session, session.get(Study, study.id), int(chosen), run_id)
    except ValueError:
        st.error(f"{chosen!r} is not an item id (a whole number).")
    except MedhelmError as exc:
        st.error(str(exc))
    else:
        st.markdown(f"**Item {detail.item_id}**")
        st.text(f"benchmark: {detail.benchmark}   instance: {detail.instance_id}   model: {detail.model}")
        for label, text in (("Input", detail.input_text), ("Output", detail.output_text),
                            ("Reference", detail.reference_text)):
            if text:
                st.caption(label)
                st.text(text)
        st.caption("Clinicians (latest revision each)")
        if detail.clinicians.empty:
            st.text("No clinician has rated this item.")
        else:
            st.dataframe(detail.clinicians, hide_index=True)
        st.caption("Judges of the jury run")
        if detail.judges.empty:
            st.text("No verdicts for this item in this run.")
        else:
            scores = [c for c in detail.judges.columns if not c.startswith("explanation_")]
            st.dataframe(detail.judges[scores], hide_index=True)
            for record in detail.judges.to_dict("records"):
                for key, value in record.items():
                    if key.startswith("explanation_") and isinstance(value, str) and value:
                        st.text(f"{record['judge']} on {key.removeprefix('explanation_')}: {value}")

with st.expander("Every figure of the agreement engine"):
    st.dataframe(agreement_display(table), hide_index=True)

st.subheader("Calibration report")
st.caption("A zip with report.html (opens offline), report.pdf, manifest.json and the data bundle (CSV) that "
           "recomputes every figure, for the filters chosen here, from the study's data as it is when you click "
           "(never from older figures).")


def build_report() -> bytes:
    current = fresh_figures(eng, key)  # waits for the update in flight, if any
    options = ReportOptions(protocol=protocol, benchmarks=benchmarks, models=models,
                            jury_run_id=current.data.jury_run.id if current.data.jury_run else None)
    with tempfile.TemporaryDirectory() as tmp, transaction(eng) as session:
        write_report(session, session.get(Study, study.id), Path(tmp), options, data=current.data,
                     agreement=current.table, actor=who)
        return zip_folder(Path(tmp))


st.download_button("Download the calibration report", data=build_report, mime="application/zip",
                   file_name=f"{study.name}-calibration-report.zip", on_click="ignore", type="primary")
