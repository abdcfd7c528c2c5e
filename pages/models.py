"""Models: which model is better by the clinicians' standard, does the jury rank the models as the clinicians do,
and how many more clinician ratings would settle it (researchers, admins).

Everything is computed by medhelm_core.figures.model_figures (pure statistics in medhelm_core.model_scores) and
kept per study, jury run and data version; this page reads, calls and draws.
"""

from __future__ import annotations

import streamlit as st
from sqlmodel import Session

from medhelm_core.agreement import COMPOSITE, POOLED
from medhelm_core.errors import MedhelmError
from medhelm_core.figures import model_charts
from medhelm_core.figures.choices import jury_run_choices
from medhelm_core.figures.model_figures import (
    ModelFigures,
    ModelOptions,
    anchored_differences_display,
    anchored_display,
    differences_display,
    means_display,
    needed_display,
    reading,
    source_label,
    status_display,
    study_model_figures,
    tau_display,
    win_rates_display,
)
from medhelm_core.frames import data_version
from medhelm_core.model_scores import CLINICIANS, JURY
from medhelm_core.studies import get_study_by_id
from medhelm_core.text import markdown_literal
from pages.common import chart, engine, pick_study, require_page, stop_on

who = require_page("models")
st.title("Models")
eng = engine()


@st.cache_data(show_spinner=False, max_entries=16)
def figures_for(study_id: int, run_id: int | None, version: tuple, half_width: float) -> ModelFigures:
    """The study's model figures, kept until its data change (``version``) or the options do."""
    with Session(engine()) as session:
        return study_model_figures(session, get_study_by_id(session, study_id),
                                   ModelOptions(jury_run_id=run_id, half_width=half_width))


study = pick_study("No studies yet: import items on the Data page.", key="models_study")
with Session(eng) as session:
    runs = jury_run_choices(session, study)
    version = data_version(session, study)

with st.sidebar:
    st.subheader("Options")
    run_id = None
    if len(runs.labels) > 1:
        run_id = runs.labels[st.selectbox("Jury run", list(runs.labels), index=runs.default, key="models_run",
                                          help="Default: the newest run with verdicts.")]
    half_width = st.number_input("Interval half-width wanted", min_value=0.01, max_value=2.0, value=0.1, step=0.05,
                                 key="models_half_width",
                                 help="For 'How many more clinician ratings': the 95% interval's half-width on the "
                                      "clinicians' scale (0.1 on a 1-5 scale is +/- 0.1 point).")

try:
    with st.spinner("Computing the model scores (2,000 resamples of instances; kept until the data change)..."):
        figs = figures_for(study.id, run_id, version, float(half_width))
except MedhelmError as error:
    stop_on(error)
    raise  # unreachable: stop_on stops the page

with st.sidebar:
    criterion = st.selectbox("Criterion", [COMPOSITE, *figs.criteria], key="models_criterion")
    scope = st.selectbox("Benchmark", [POOLED, *figs.benchmarks], key="models_benchmark",
                         help="pooled: each model's items over every benchmark, each weighted by its share.")

if figs.recorded_jury:
    st.warning(markdown_literal(figs.jury_note))
else:
    st.caption(markdown_literal(figs.jury_note))
for message in figs.messages:
    st.info(markdown_literal(message))

st.subheader("What these data can tell")
for sentence in reading(figs, criterion):
    st.markdown(markdown_literal(sentence))

st.subheader("Each model")
anchored = anchored_display(figs.anchored, criterion, scope)
if anchored.empty:
    st.caption("The clinician-anchored scores need clinician ratings and the jury's scores; the means of every source "
               "are under 'Every source's mean' below.")
else:
    chart(figs, ("scores", criterion, scope), lambda: model_charts.model_score_chart(figs.anchored, criterion, scope,
                                                                                   figs.scale),
          width="stretch", room=120)
    st.dataframe(anchored, hide_index=True)
    st.caption("Clinicians: the mean of the rated items. Jury: the mean of every item (narrow, and possibly biased). "
               "Clinician-anchored (prediction-powered inference, PPI++): the jury's scores corrected by the "
               "clinicians' ratings; its interval is valid however biased the jury is, provided the rated items are "
               "a random sample of the model's items. Effective ratings: how many clinician ratings alone would "
               "give the same interval.")

st.subheader("Rankings")
tau = tau_display(figs.rankings.tau, criterion)
if tau.empty:
    st.caption("Rankings need at least two models scored by the clinicians and by another source.")
else:
    st.dataframe(tau, hide_index=True)
    st.caption("Kendall's tau-b between each source's order of the models and the clinicians' (pooled means), with "
               "a 95% interval over resampled instances: an interval that holds 0 means the data cannot say whether "
               "that source orders the models as the clinicians do.")
if len(figs.models) > 1 and not figs.rankings.ranks.empty:
    chart(figs, ("ranks", criterion), lambda: model_charts.rank_bump_chart(figs.rankings.ranks, criterion),
          width="stretch", room=120)
    sources = [s for s in (CLINICIANS, JURY) if (figs.rankings.swaps["source"] == s).any()]
    if sources:
        shown = st.radio("Swap matrix of", sources, format_func=source_label, horizontal=True, key="models_swaps")
        chart(figs, ("swaps", shown, criterion),
              lambda: model_charts.swap_matrix_chart(figs.rankings.swaps, shown, criterion),
              width="stretch", room=260)  # slanted names
        st.caption("How often resampled instances reverse a pair's order: near 0 the order is settled, near 0.5 it "
                   "is a coin toss.")
    st.markdown("**Mean win rate** (HELM's: per benchmark, the share of other models a model beats; averaged over "
                "benchmarks)")
    st.dataframe(win_rates_display(figs.rankings.win_rates, criterion), hide_index=True)

if len(figs.models) > 1:
    st.subheader("Differences between models")
    anchored_diffs = anchored_differences_display(figs.anchored_differences, criterion, scope)
    if not anchored_diffs.empty:
        st.dataframe(anchored_diffs, hide_index=True)
        st.caption("Clinician-anchored difference (A minus B) with a 95% interval that adds the two models' "
                   "variances (it errs wide when both models answered the same instances).")
    with st.expander("Paired differences by clinicians and by the jury (resampling instances)"):
        st.dataframe(differences_display(figs.differences, criterion, scope), hide_index=True)
        st.caption("Both means of a pair come from the same resampled instances, so what an instance does to both "
                   "models cancels out.")

st.subheader("How many more clinician ratings")
needed = needed_display(figs.needed, criterion)
if needed.empty:
    st.caption("Planning needs clinician ratings and the jury's scores of the same items.")
else:
    st.dataframe(needed, hide_index=True)
    st.caption(f"For a 95% interval of +/- {half_width:g} on the clinicians' scale ({criterion}, pooled): the "
               "clinician ratings each model still needs, alone and with the jury (PPI's power analysis, "
               "ppi_py.ppi_mean_power). To send the next ratings where the intervals are widest, use 'Rate these "
               "next' on the Raters page or `medhelm assign STUDY --where-uncertain N`.")

with st.expander("Every source's mean (clinicians, jury, each judge, ROUGE-L, BERTScore)"):
    st.dataframe(means_display(figs.means, criterion, scope), hide_index=True)
with st.expander("Are the rated items a random sample?"):
    st.dataframe(status_display(figs.status), hide_index=True)
    st.caption("The clinician-anchored scores assume that each model's rated items on each benchmark are a random "
               "sample of its items there: true of ratings made through this app's assignments (random order, or "
               "drawn at random by 'Rate these next'), not known for imported ratings.")
