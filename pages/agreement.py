"""Agreement: the headline ICC table, its charts, a drill-down to any item, and the report (researchers, admins).

Everything is computed by medhelm_core.figures and kept, process-wide, with the study's data version (counters
bumped by every write of its ratings, verdicts, metric scores, items and settings, per benchmark). After a
change the page draws the figures it has at once, saying how old they are, while current ones are computed in
the background; it polls and reruns itself when they are ready. The report always uses current figures. Model
text is drawn with st.text and dataframes, never as markdown or HTML.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import streamlit as st
from sqlmodel import Session

from medhelm_core import figures
from medhelm_core.agreement import COMPOSITE, POOLED
from medhelm_core.db.engine import transaction
from medhelm_core.errors import MedhelmError
from medhelm_core.figures import displays
from medhelm_core.figures.choices import jury_run_choices, version_names
from medhelm_core.figures.report_archive import report_archive
from medhelm_core.studies import get_study_by_id, update_settings
from medhelm_core.text import markdown_literal
from pages.common import (
    chart,
    checked_download,
    engine,
    newest_pick,
    pick_study,
    require_page,
    rerun_when_done,
    session_checked,
    show_item_detail,
    stop_on,
)

if TYPE_CHECKING:
    import pandas as pd

#: poll(updating): rerun the page once ``updating()`` (a library function bound with partial) is False, checking every
#: second while the page shows older figures or waits for a table (pages.common.rerun_when_done)
poll = partial(rerun_when_done, page="agreement", every="1s")

who = require_page("agreement")
st.title("Agreement")
eng = engine()


#: a chart across the page at its own height plus room for its title and axis (Streamlit's theme squeezes a layered
#: chart with a nominal y axis to one row when left to size it)
WIDE = {"width": "stretch", "room": 110}


study = pick_study("No studies yet: import items on the Data page.", key="agreement_study")
# A study opens on the protocol and benchmarks it keeps (for MedHELM's validation study, the paper's choice).
if st.session_state.get("agreement_view_of") != study.id:
    st.session_state["agreement_view_of"] = study.id
    st.session_state["agreement_protocol"] = study.agreement_protocol
    st.session_state.pop("agreement_benchmarks_of", None)  # set below, once the study's benchmarks are known
with Session(eng) as session:
    runs = jury_run_choices(session, study)
    version = figures.data_version(session, study)

with st.sidebar:
    st.subheader("Filters")
    run_id = None
    if len(runs.labels) > 1:
        run_id = runs.labels[st.selectbox("Jury run", list(runs.labels), index=runs.default, key="agreement_run",
                                          help="Default: the newest run with verdicts.")]
    protocol = st.radio("Protocol", ["medhelm", "full"], horizontal=True, key="agreement_protocol",
                        help="medhelm: the paper's ICC(C,k) on z-scores with F intervals, and the clinicians' "
                             "agreement from every clinician. full: adds ICC(A,1) and ICC(A,k) on the raw scale "
                             "with generalized intervals, and alpha (slower).")
# None means the latest run: the figures are kept per choice, not per what it resolves to.
scores_key = figures.FigureKey.of(eng, study, run_id)
with st.spinner("Loading the study's scores..."):
    scores = figures.study_data(eng, scores_key, version)
if scores.figures is None:
    stop_on(scores.error)
data = scores.value
if st.session_state.get("agreement_benchmarks_of") != study.id:
    st.session_state["agreement_benchmarks_of"] = study.id
    st.session_state["agreement_benchmarks"] = [b for b in study.agreement_benchmarks
                                                if b in set(data.items["benchmark"])]


@session_checked("agreement")
def keep_view(protocol: str, benchmarks: tuple[str, ...]) -> None:
    with transaction(eng) as session:
        update_settings(session, get_study_by_id(session, study.id), agreement_protocol=protocol,
                        agreement_benchmarks=list(benchmarks), actor=who)
    st.toast("The study now opens this way")


with st.sidebar:
    benchmarks = tuple(st.multiselect("Benchmarks (pooled over the chosen)", sorted(data.items["benchmark"].unique()),
                                      placeholder="all benchmarks", key="agreement_benchmarks"))
    if (protocol, sorted(benchmarks)) != (study.agreement_protocol, sorted(study.agreement_benchmarks)):
        st.button("Open the study this way next time", key="agreement_keep_view", on_click=keep_view,
                  args=(protocol, benchmarks), help="Keep this protocol and these benchmarks as the study's view: "
                  "the page and the report open on them.")
    models = tuple(st.multiselect("Models", sorted(data.items["model"].unique()), placeholder="all models",
                                  key="agreement_models"))
    criterion_choice = st.selectbox("Criterion", ["all", COMPOSITE, *data.criteria], key="agreement_criterion",
                                    help="Rows of the table; the charts use the composite when 'all'.")
criterion = COMPOSITE if criterion_choice == "all" else criterion_choice

key = figures.FigureKey.of(eng, study, scores_key.jury_run, protocol, benchmarks, models)
with st.spinner("Computing agreement (kept until the ratings change)..."):
    lookup = figures.agreement_figures(eng, key, version)
if lookup.figures is None:
    stop_on(lookup.error)
computed = lookup.value
data = computed.data  # the scores these figures were computed from (older ones while an update runs)
jury_run = data.jury_run
note = figures.freshness_note(lookup)
if note and lookup.error is not None:
    st.error(markdown_literal(note))
    if st.button("Try again", key="agreement_retry"):
        figures.retry_figures(key)
        st.rerun()
elif note:
    st.warning(markdown_literal(note), icon="⏳")
if lookup.updating:
    poll(partial(figures.figures_updating, key))



def extra_table(name: str) -> pd.DataFrame | None:
    """An extra table (its bootstrap takes seconds, so it is kept current on its own), with a note when it is older
    than the figures above; None, with the reason shown, when it failed."""
    # The first visit draws the headline figures without waiting for the extra tables' bootstrap: they follow. Asked
    # at the version of the figures shown: while newer figures are computed, the tables' bootstrap waits for the
    # rerun that draws them rather than taking the CPU from it, and then follows with its own note.
    seen = figures.extra_figures(eng, key, lookup.figures.version, name, wait=False)
    if seen.figures is None and seen.error is None:
        st.caption("Computing this table in the background (its bootstrap takes seconds); it appears here by itself.")
        poll(partial(figures.extra_updating, key, name))
        return None
    if seen.figures is None:
        st.error(markdown_literal(figures.failure_reason(seen.error)))
        return None
    extra_note = figures.freshness_note(seen, "table")
    if extra_note and (seen.error is not None or not note):  # the note above already says the page is updating
        st.caption(markdown_literal(extra_note))
    if seen.updating:
        poll(partial(figures.extra_updating, key, name))
    return seen.value


if jury_run is not None and jury_run.recorded:
    st.warning(markdown_literal(displays.jury_run_note(jury_run)))
else:
    st.caption(markdown_literal(displays.jury_run_note(jury_run)))

headline = computed.headline
st.subheader("Headline agreement")
cards = displays.headline_cards(headline, criterion)
for column, card in zip(st.columns(max(1, len(cards))), cards, strict=False):
    with column:
        st.metric(card.comparison, card.value)
        st.caption(markdown_literal(card.caption))
st.dataframe(
    displays.headline_rows(headline, None if criterion_choice == "all" else criterion),
    hide_index=True,
    column_order=["comparison", "benchmark", "criterion", "short_form", "icc", "ci", "n_used", "pearson_r",
                  "spearman_rho", "kappa_qw", "reading", "note"],
    column_config={
        "short_form": st.column_config.TextColumn("form", help="The form of each figure; the line below says it "
                                                  "in words."),
        "icc": st.column_config.NumberColumn("estimate", format="%.3f"),
        "ci": st.column_config.TextColumn("95% CI", help="The ceiling's is its range over clinicians."),
        "n_used": st.column_config.TextColumn("n (of)", help="Items used, of those the figure could use."),
        "reading": st.column_config.TextColumn("reading", help="Koo & Li (2016), only for raw-scale forms."),
        "pearson_r": st.column_config.NumberColumn("r", format="%.3f"),
        "spearman_rho": st.column_config.NumberColumn("rho", format="%.3f"),
        "kappa_qw": st.column_config.NumberColumn("kappa", format="%.3f"),
    },
)
st.caption(markdown_literal(displays.headline_method(protocol, benchmarks)))
chart(computed, ("icc", criterion), lambda: figures.icc_chart(headline, criterion), **WIDE)

v = computed.views(criterion)
picked: dict[str, list[str]] = {}
if v.means["jury"].notna().any():
    st.subheader("Jury and clinicians per item")
    left, right = st.columns(2)
    with left:
        scatter = chart(computed, ("scatter", criterion), lambda: figures.scatter_chart(v.means, data.scale),
                        on_select="rerun", key="agreement_scatter")
    with right:
        ba = chart(computed, ("bland_altman", criterion), lambda: figures.bland_altman_chart(v.means, v.limits),
                   on_select="rerun", key="agreement_ba")
    st.caption(f"{displays.limits_caption(v.limits)} Click a point to open its item below.")
    for name, event in (("scatter", scatter), ("bland_altman", ba)):
        picked[name] = [str(p["item_id"]) for p in event.selection.get(figures.ITEM_SELECTION, []) if "item_id" in p]

st.subheader("Per-judge agreement")
if computed.judges["judge"].ne("jury (mean)").any():
    chart(computed, ("judges", criterion), lambda: figures.judge_chart(computed.judges, POOLED, criterion),
          **WIDE)
else:
    st.caption("Per-judge agreement needs a jury run with several judges; this one has one (or recorded means).")

subsets = extra_table("judge_subsets")
if subsets is not None and not subsets.empty:
    st.subheader("Which judges to trust")
    chart(subsets, "judge subsets", lambda: figures.judge_subset_chart(subsets), **WIDE)
    st.dataframe(displays.subsets_display(subsets), hide_index=True)
    st.caption("Each judge alone, all judges, and the jury without each judge (composite), against the clinicians' "
               "ceiling: each clinician against the mean of the others (median, with their range as a band).")

st.subheader("Skew-robust agreement")
robust = extra_table("robust")
if robust is not None:
    st.dataframe(displays.robust_display(displays.pooled_rows(robust, criterion)), hide_index=True)
st.caption("Scores crowd the top of the scale, where the ICC and kappa shrink although raters agree: Gwet's AC2 "
           "(quadratic weights) stays near the observed agreement. Both on scores rounded to the scale, with 95% "
           f"BCa bootstrap intervals over items; {criterion}, pooled.")

st.subheader("Jury versions")
with Session(eng) as session:
    names = version_names(session, study)  # oldest first
if not names:
    st.caption("No jury run with verdicts yet.")
else:
    baseline = st.selectbox("Baseline version", list(names), key="agreement_baseline", format_func=names.get,
                            help="Every other version's difference from this one gets a paired bootstrap interval.")
    version_key = figures.VersionKey.of(eng, study, benchmarks, baseline)
    # At the version of the figures shown: while newer ones are computed, the comparison waits for them rather than
    # taking the CPU from them, and then follows with its own note.
    compared = figures.version_figures(eng, version_key, lookup.figures.version, wait=False)
    if compared.figures is None and compared.error is None:
        st.caption("Comparing the jury versions in the background; the comparison appears here by itself.")
        poll(partial(figures.versions_updating, version_key))
    elif compared.figures is None:
        st.error(markdown_literal(figures.failure_reason(compared.error)))
    elif compared.stale:
        st.caption("These are the figures from before the latest changes; updated ones follow by themselves.")
        if figures.versions_updating(version_key) and not lookup.updating:
            poll(partial(figures.versions_updating, version_key))
    found = compared.value if compared.figures is not None else None
    if found is not None and not found.table.empty:
        chart(found, "versions", lambda: figures.version_chart(found.table, found.ceiling, found.ceiling_low,
                                                               found.ceiling_high), **WIDE)
        st.dataframe(displays.versions_display(found.table), hide_index=True)
        st.caption(f"On the {int(found.table['n_items'].iloc[0])} items every version scored; a change counts when "
                   "its paired bootstrap interval (the same resampled items for both versions) excludes 0. The band "
                   "is the clinicians' ceiling.")

st.subheader("Clinicians")
if v.leniency.empty:
    st.caption("No clinician ratings in this selection.")
else:
    chart(computed, ("leniency", criterion), lambda: figures.leniency_chart(v.leniency), width="content")
    st.dataframe(displays.leniency_display(v.leniency, data.speed), hide_index=True)
    st.caption("Fast first ratings: submitted faster than the study's speed threshold (a flag, not an exclusion); "
               "the Raters page has gold accuracy and test-retest.")

st.subheader("Distribution of scores")
chart(computed, ("distribution", criterion), lambda: figures.distribution_chart(v.distribution, data.criteria),
      width="content")

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
chosen = newest_pick(f"agreement_{study.id}", picked)  # per study: a pick is not looked for in the next study
if chosen:
    try:
        with Session(eng) as session:
            detail = figures.item_detail(session, study, int(chosen), jury_run.id if jury_run else None)
    except ValueError:
        st.error(markdown_literal(f"{chosen!r} is not an item id (a whole number)."))
    except MedhelmError as exc:
        st.error(markdown_literal(exc))
    else:
        show_item_detail(detail)

with st.expander("Every figure of the agreement engine"):
    st.dataframe(displays.agreement_display(computed.table), hide_index=True)

st.subheader("Calibration report")
st.caption("A zip with report.html (opens offline), report.pdf, manifest.json and the data bundle (CSV) that "
           "recomputes every figure, for the filters chosen here, from the study's data as it is when you click "
           "(never from older figures).")
# The zip is built at the click, in a thread of Streamlit's, outside this run: checked_download checks the
# session again then (an account disabled since the page was drawn gets nothing) and writes the export as them.
# The filters are bound now (functools.partial), not looked up at the click: a name reused further down the page
# (a loop variable `key` of the drill-down did) must not change which report is built.
st.download_button("Download the calibration report",
                   data=checked_download("agreement", partial(report_archive, eng, key)),
                   mime="application/zip", file_name=f"{study.name}-calibration-report.zip", on_click="ignore",
                   type="primary")
