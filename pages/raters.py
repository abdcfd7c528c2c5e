"""Raters: each clinician's progress and quality on a study; plan its size, set its checks, assign items.

Rater quality (fast submissions, gold accuracy, test-retest) is for researchers and admins only; nothing on
this page reaches a clinician.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st
from sqlmodel import Session

from medhelm_core.agreement.planning import plan_for_form
from medhelm_core.db.engine import transaction
from medhelm_core.errors import MedhelmError
from medhelm_core.rating import gold
from medhelm_core.rating.assignment import (
    assign_in_steps,
    rater_progress,
    reassign,
    study_clinicians,
    unrated_assignments,
)
from medhelm_core.rating.quality import study_rater_quality
from medhelm_core.rating.where_uncertain import assign_where_uncertain
from medhelm_core.studies import MAX_RETEST_SHARE, get_study_by_id, plan_progress, update_settings
from medhelm_core.text import markdown_literal
from pages.common import engine, pick_study, require_page

who = require_page("raters")
st.title("Raters")
FLASH = "raters_flash"  # a message that must outlive the rerun that follows a change (st.success would not)

study = pick_study()
name = study.name

with Session(engine()) as session:
    clinicians = [u.username for u in study_clinicians(session)]
    rows = rater_progress(session, study)
if rows:
    table = pd.DataFrame([r.__dict__ for r in rows])
    table["progress"] = table["done"] / table["assigned"].where(table["assigned"] > 0)
    st.dataframe(
        table, hide_index=True, width="stretch",
        column_config={"progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0)},
    )
else:
    st.info("Nobody is assigned to this study yet.")

with st.expander("Study size: how many items for the confidence interval you want", expanded=not rows):
    st.caption(
        "Zou (2012)'s design, computed exactly from the F distribution, for the figure you will report. "
        "MedHELM planned a one-way ICC(1) of single ratings for an expected 0.75 with two raters and 80% assurance."
    )
    saved = study.plan or {}
    forms = {"headline": "the headline: ICC(C,k), the jury beside the mean clinician",
             "icc1": "MedHELM's plan: one-way ICC(1) of one rating, every clinician"}
    form = st.radio("Plan for", list(forms), format_func=forms.get, horizontal=True, key="plan_form",
                    index=1 if saved.get("design") == "one-way" else 0)
    c1, c2, c3, c4 = st.columns(4)
    target = c1.number_input(f"Expected {'ICC(C,k)' if form == 'headline' else 'ICC(1)'}", 0.05, 0.95,
                             float(saved.get("target_icc", 0.75)), 0.05)
    per_item = c2.number_input("Clinicians per item", 2, 10,
                               int(saved.get("clinicians") or saved.get("raters", max(study.overlap, 2))))
    width = c3.number_input("CI width at most", 0.05, 0.9, float(saved.get("width") or 0.2), 0.05)
    sure = c4.number_input("Assurance", 0.5, 0.99, float(saved.get("assurance") or 0.8), 0.05)
    try:
        plan = plan_for_form(form, float(target), int(per_item), width=float(width), assurance=float(sure))
    except MedhelmError as exc:
        st.error(markdown_literal(exc))
    else:
        with Session(engine()) as session:
            progress = plan_progress(session, get_study_by_id(session, study.id), int(per_item))
        have = progress.items_in_study
        left, right = st.columns(2)
        left.metric("Items needed", plan.items, delta=f"{have - plan.items:+d} vs the {have} in this study",
                    delta_color="normal")  # short of the plan shows red
        right.metric(f"Rated by {int(per_item)}+ clinicians", progress.complete_items,
                     delta=f"{progress.complete_items - plan.items:+d} vs the plan",
                     delta_color="normal" if progress.complete_items >= plan.items else "off")
        st.caption(plan.method + ". Gold items are not counted: they stay out of the agreement figures.")
        if st.button("Keep as this study's plan", key="save_plan",
                     disabled=saved.get("items") == plan.items and saved.get("raters") == plan.raters
                     and saved.get("design", "one-way") == plan.design):
            with transaction(engine()) as session:
                update_settings(session, get_study_by_id(session, study.id), plan=plan, actor=who)
            st.rerun()

with st.expander("Checks: speed threshold and test-retest", expanded=False):
    with st.form("checks", border=False):
        c1, c2, c3 = st.columns(3)
        threshold = c1.number_input("Flag first ratings faster than (s)", 1.0, 3600.0,
                                    float(study.speed_threshold_seconds), 5.0, key="speed_threshold")
        share = c2.number_input("Repeat this share of rated items", 0.0, MAX_RETEST_SHARE,
                                float(study.retest_share), 0.05, key="retest_share",
                                help="Shown again to the same clinician later in their queue, unannounced; the "
                                     "repeat is kept apart and measures their agreement with themselves.")
        gap = c3.number_input("After at least this many other items", 1, 500, int(study.retest_gap), key="retest_gap")
        keep = st.form_submit_button("Save checks")
    if keep:
        try:
            with transaction(engine()) as session:
                update_settings(session, get_study_by_id(session, study.id), speed_threshold_seconds=float(threshold),
                                retest_share=float(share), retest_gap=int(gap), actor=who)
        except MedhelmError as exc:
            st.error(markdown_literal(exc))
        else:
            st.toast("Checks saved")
            st.rerun()

with st.expander("Instructions for clinicians", expanded=False):
    st.caption("What clinicians read under Instructions on the Rate page, above the rubric and its anchors "
               "(markdown: lists and bold; nothing loads or links). Empty: the study's description is shown.")
    saved_text = st.session_state.pop(f"{FLASH}_instructions", None)
    if saved_text:
        st.success(saved_text)
    with st.form("instructions", border=False):
        text = st.text_area("Instructions", value=study.instructions, height=160, key="study_instructions",
                            label_visibility="collapsed")
        keep_text = st.form_submit_button("Save instructions")
    if keep_text:
        try:
            with transaction(engine()) as session:
                update_settings(session, get_study_by_id(session, study.id), instructions=text, actor=who)
        except MedhelmError as exc:
            st.error(markdown_literal(exc))
        else:
            st.session_state[f"{FLASH}_instructions"] = "Instructions saved: clinicians see them on the Rate page."
            st.rerun()

st.subheader("Rater quality")
with Session(engine()) as session:
    quality = study_rater_quality(session, get_study_by_id(session, study.id))
TWO_DECIMALS = st.column_config.NumberColumn(format="%.2f")
st.markdown(f"**Speed**: first submissions under {quality.threshold_seconds:g} s are flagged (a flag to look at, "
            "not an exclusion; revisions are left out, they are legitimately quick).")
if quality.speed.empty:
    st.caption("No ratings yet.")
else:
    st.dataframe(quality.speed.drop(columns=["threshold_seconds"]), hide_index=True, column_config={
        "rater_id": "clinician", "n": "first ratings", "n_timed": "timed", "n_fast": "fast",
        "share_fast": st.column_config.ProgressColumn("share fast", min_value=0.0, max_value=1.0, format="percent"),
        "median_seconds": st.column_config.NumberColumn("median s", format="%.1f"),
    })
st.markdown(f"**Gold accuracy**: the share of scores on the {quality.n_gold_items} gold items within the expected "
            "range; mean miss is how many points outside it, on average.")
if quality.n_gold_items and not quality.gold.empty:
    overall = quality.gold[quality.gold["criterion"] == "all criteria"].drop(columns=["criterion"])
    st.dataframe(overall, hide_index=True, column_config={
        "rater_id": "clinician", "n_items": "gold items", "n_scores": "scores", "n_within": "within range",
        "accuracy": TWO_DECIMALS, "mean_miss": st.column_config.NumberColumn("mean miss (points)", format="%.2f"),
    })
else:
    st.caption("No gold items rated yet." if quality.n_gold_items else "No gold items: import their ranges below.")
st.markdown("**Test-retest**: each clinician against their own earlier rating of a repeated item (composite; "
            "ICC(A,1), absolute agreement, with its 95% interval).")
if quality.n_retest_pairs:
    composite = quality.retest[quality.retest["criterion"] == "composite"].drop(columns=["criterion", "kappa_qw"])
    labels = {"exact": "same score", "within_one": "within 1 point", "mean_abs_diff": "mean difference",
              "icc_a1": "ICC(A,1)", "ci_low": "95% CI low", "ci_high": "95% CI high"}
    st.dataframe(composite, hide_index=True, column_config={
        "n_pairs": "repeats", **{c: st.column_config.NumberColumn(label, format="%.2f") for c, label in labels.items()},
    })
elif study.retest_share:
    st.caption("Test-retest is on; repeats come back as clinicians work through their queues.")
else:
    st.caption("Test-retest is off: turn it on under Checks.")

with st.expander(f"Gold items ({quality.n_gold_items})", expanded=False):
    st.caption("A CSV, JSONL or Parquet file with the item (item_id, or benchmark, instance_id and model), the "
               "criterion, and low and high (or score); note is optional. Gold items go to every clinician at the "
               "next Assign, are never marked as gold to them, and stay out of the agreement figures.")
    with st.form("gold", border=False):
        upload = st.file_uploader("Gold file", type=["csv", "jsonl", "ndjson", "parquet"], key="gold_file")
        send = st.form_submit_button("Import gold ranges")
    if send and upload is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / Path(upload.name).name
            path.write_bytes(upload.getvalue())
            try:
                with transaction(engine()) as session:
                    report = gold.import_gold(session, get_study_by_id(session, study.id), path, actor=who)
            except MedhelmError as exc:
                st.error(markdown_literal(str(exc).replace(str(Path(tmp)) + "/", "")))
            else:
                st.success(f"{report.created} gold ranges added, {report.updated} changed, {report.unchanged} "
                           f"unchanged; {report.gold_items} gold items. Press Assign to give them to everyone.")
    if quality.n_gold_items:
        with Session(engine()) as session:
            st.dataframe(gold.gold_ranges_frame(session, get_study_by_id(session, study.id)), hide_index=True)

st.subheader("Assign")
flash = st.session_state.pop(FLASH, None)
if flash:
    st.success(markdown_literal(flash))
st.caption(
    "Each item goes to the chosen number of distinct clinicians; loads differ by at most one and pairs of "
    "clinicians share items as evenly as possible. Existing assignments are kept."
)
with st.form("assign"):
    overlap = st.number_input("Clinicians per item", min_value=1, max_value=max(len(clinicians), 1),
                              value=min(study.overlap, max(len(clinicians), 1)), key="overlap")
    chosen = st.multiselect("Clinicians (empty: all of them)", clinicians)
    go = st.form_submit_button("Assign", type="primary")
if go:
    try:
        # in steps: the clinicians rating meanwhile wait for one step at most, never for the whole assignment
        plan = assign_in_steps(engine(), study.id, int(overlap), chosen or None, actor=who)
    except MedhelmError as exc:
        st.error(markdown_literal(exc))
    else:
        people = len({user for _, user in plan.new})
        st.session_state[FLASH] = (
            f"{len(plan.new)} assignments added for {people} clinician{'s' if people != 1 else ''}; each item now "
            f"goes to {int(overlap)} clinician{'s' if int(overlap) != 1 else ''}." if plan.new
            else "Nothing to add: every item already goes to enough clinicians.")
        st.rerun()

DRAWN = "raters_drawn"  # the "rate these next" result, shown after the rerun that follows it
with st.expander("Rate these next: where the models' scores are least certain", expanded=DRAWN in st.session_state):
    drawn_message = st.session_state.pop(DRAWN, None)
    if drawn_message:
        st.success(markdown_literal(drawn_message))
    st.caption("Sends the next ratings to the models and benchmarks whose clinician-anchored intervals (Models page) "
               "are widest. Items are drawn at random within each, with their drawing probability recorded so the "
               "estimates stay valid, and come first in a clinician's queue (one who already has the item, else the "
               "least loaded).")
    with st.form("where_uncertain", border=False):
        n_next = st.number_input("Ratings to send", min_value=1, max_value=10_000, value=10, key="where_uncertain_n")
        send = st.form_submit_button("Rate these next")
    if send:
        try:
            with transaction(engine()) as session:
                drawn = assign_where_uncertain(session, get_study_by_id(session, study.id), int(n_next), actor=who)
        except MedhelmError as exc:
            st.error(markdown_literal(exc))
        else:
            st.session_state[DRAWN] = drawn.summary()
            st.rerun()

st.subheader("Reassign an unrated item")
assigned_names = [r.username for r in rows]
if not assigned_names:
    st.caption("Assign items first.")
    st.stop()
source = st.selectbox("From", assigned_names)
with Session(engine()) as session:
    movable = unrated_assignments(session, get_study_by_id(session, study.id), source)
if not movable:
    st.caption(markdown_literal(f"{source} has rated every item assigned to them; rated items stay with their rater."))
    st.stop()
labels = {f"{i.benchmark} / {i.instance_id} / {i.model}": i.id for i in movable}
with st.form("reassign"):
    picked = st.selectbox(f"Item ({len(movable)} unrated)", list(labels))
    target = st.selectbox("To", [c for c in clinicians if c != source])
    move = st.form_submit_button("Reassign")
if move:
    try:
        with transaction(engine()) as session:
            reassign(session, get_study_by_id(session, study.id), labels[picked], source, target, actor=who)
    except MedhelmError as exc:
        st.error(markdown_literal(exc))
    else:
        st.session_state[FLASH] = f"{picked} moved from {source} to {target}."
        st.rerun()
