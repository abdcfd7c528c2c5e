"""Metrics: compute ROUGE-L, ROUGE-Lsum and BERTScore for a study, then read the scores (researchers, admins).

Scores are stored batch by batch, so leaving the page mid-run keeps what was done and pressing the button
again continues. Only ids and scores are drawn here, never model text.
"""

from __future__ import annotations

import streamlit as st
from sqlmodel import Session

from medhelm_core.csv_safe import csv_text
from medhelm_core.errors import MedhelmError
from medhelm_core.metrics import (
    BERTSCORE_INSTALL,
    Progress,
    bertscore_available,
    compute_metrics,
    metric_scores_frame,
    metric_settings_frame,
    metric_specs,
)
from medhelm_core.metrics.store import reference_counts
from medhelm_core.metrics.tables import metric_summary, metric_table, settings_choices
from medhelm_core.text import markdown_literal
from pages.common import engine, pick_study, require_page

require_page("metrics")
st.title("Metrics")
st.caption(
    "ROUGE-L and ROUGE-Lsum (equal to Google's rouge-score) and BERTScore (the bert-score package, on a model "
    "installed on the server, without baseline rescaling) of each output against its reference. "
    "Nothing is downloaded."
)

study = pick_study("No studies yet: import items on the Data page.")
has_bertscore = bertscore_available()  # a lean install has no torch: ROUGE works, BERTScore says how to add it

with st.form("compute"):
    left, right = st.columns(2)
    with left:
        want_rouge = st.checkbox("ROUGE-L and ROUGE-Lsum", value=True)
        stemmer = st.checkbox("Porter stemmer (as HELM)", value=True)
    with right:
        want_bert = st.checkbox("BERTScore", value=has_bertscore, disabled=not has_bertscore)
        if not has_bertscore:
            st.info(markdown_literal(BERTSCORE_INSTALL))
        model = st.text_input("BERTScore model folder on the server", placeholder="bundled all-MiniLM-L6-v2")
        layer = st.number_input("Layer", min_value=0, max_value=200, value=None, step=1,
                                placeholder="6 for the bundled model; required for another model")
        idf = st.checkbox("idf weighting over the study's references")
    go = st.form_submit_button("Compute metrics", type="primary")

if go:
    bar = st.progress(0.0, text="Starting (loading BERTScore's model takes a few seconds)" if want_bert else "Starting")

    def show(progress: Progress) -> None:
        share = progress.done / progress.total if progress.total else 1.0
        bar.progress(share, text=f"{progress.family}: {progress.done} of {progress.total} items")

    try:
        specs = metric_specs(rouge_l=want_rouge, bertscore=want_bert, use_stemmer=stemmer,
                             model=model.strip() or None, layer=None if layer is None else int(layer), idf=idf)
        if not specs:
            raise MedhelmError("choose at least one metric")
        report = compute_metrics(engine(), study, specs, progress=show)
    except MedhelmError as exc:
        bar.empty()
        st.error(markdown_literal(exc))
    else:
        bar.progress(1.0, text="Done")
        done = "; ".join(f"{m.description}: {m.scored} scored, {m.already_done} already done" for m in report.metrics)
        st.success(markdown_literal(f"{done}. Items without a reference (skipped): {report.without_reference}."))

with Session(engine()) as session:
    n_items, no_reference = reference_counts(session, study)
    scores = metric_scores_frame(session, study)
st.caption(f"{n_items} items in the study, {no_reference} without a reference (they cannot be scored).")
if scores.empty:
    st.info("No metric scores for this study yet.")
    st.stop()

# Each metric may have been computed with several settings (stemmer off, another model); show one each.
shown: list[str] = []
for family, labels in settings_choices(metric_settings_frame(scores)).items():
    pick = st.selectbox(f"{family} settings", list(labels), key=f"settings_{family}") if len(labels) > 1 else None
    shown.append(labels[pick] if pick else next(iter(labels.values())))

table = metric_table(scores, shown)

st.subheader("Summary")
st.dataframe(metric_summary(table), hide_index=True)

st.subheader(f"Per item ({len(table)} scored)")
st.dataframe(table, hide_index=True)
st.download_button("Download CSV", csv_text(table), file_name=f"{study.name}-metrics.csv", mime="text/csv")
