"""Raters: each clinician's progress on a study; assign items and reassign them (researchers, admins)."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlmodel import Session

from medhelm_core.assignment import (
    assign_balanced,
    rater_progress,
    reassign,
    study_clinicians,
    unrated_assignments,
)
from medhelm_core.db import transaction
from medhelm_core.errors import MedhelmError
from medhelm_core.planning import items_needed
from medhelm_core.studies import get_study, list_studies, summarise_study
from pages.common import engine, require_role

who = require_role("researcher", "admin")
st.title("Raters")

with Session(engine()) as session:
    studies = [s.name for s in list_studies(session)]
    clinicians = [u.username for u in study_clinicians(session)]
if not studies:
    st.info("No studies yet.")
    st.stop()
name = st.selectbox("Study", studies)

with Session(engine()) as session:
    study = get_study(session, name)
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
        "Zou (2012)'s design, computed exactly: a one-way ICC of single ratings with the F-based 95% CI. "
        "MedHELM planned for an expected ICC of 0.75 with two raters and 80% assurance."
    )
    c1, c2, c3, c4 = st.columns(4)
    target = c1.number_input("Expected ICC", 0.05, 0.95, 0.75, 0.05)
    per_item = c2.number_input("Raters per item", 2, 10, max(study.overlap, 2))
    width = c3.number_input("CI width at most", 0.05, 0.9, 0.2, 0.05)
    sure = c4.number_input("Assurance", 0.5, 0.99, 0.8, 0.05)
    try:
        plan = items_needed(float(target), int(per_item), width=float(width), assurance=float(sure))
    except MedhelmError as exc:
        st.error(str(exc))
    else:
        with Session(engine()) as session:
            have = summarise_study(session, get_study(session, name)).items
        st.metric("Items needed", plan.items, delta=f"{have - plan.items:+d} vs the {have} in this study",
                  delta_color="normal" if have >= plan.items else "inverse")
        st.caption(plan.method)

st.subheader("Assign")
st.caption(
    "Each item goes to the chosen number of distinct clinicians; loads differ by at most one and pairs of "
    "clinicians share items as evenly as possible. Existing assignments are kept."
)
with st.form("assign"):
    overlap = st.number_input("Clinicians per item", min_value=1, max_value=max(len(clinicians), 1),
                              value=min(study.overlap, max(len(clinicians), 1)), key="overlap")
    chosen = st.multiselect("Clinicians (empty: all active clinicians)", clinicians)
    go = st.form_submit_button("Assign", type="primary")
if go:
    try:
        with transaction(engine()) as session:
            plan = assign_balanced(session, get_study(session, name), int(overlap), chosen or None, actor=who)
    except MedhelmError as exc:
        st.error(str(exc))
    else:
        st.success(f"{len(plan.new)} assignments added.")
        st.rerun()

st.subheader("Reassign an unrated item")
assigned_names = [r.username for r in rows]
if not assigned_names:
    st.caption("Assign items first.")
    st.stop()
source = st.selectbox("From", assigned_names)
with Session(engine()) as session:
    movable = unrated_assignments(session, get_study(session, name), source)
if not movable:
    st.caption(f"{source} has rated every item assigned to them; rated items stay with their rater.")
    st.stop()
labels = {f"{i.benchmark} / {i.instance_id} / {i.model}": i.id for i in movable}
with st.form("reassign"):
    picked = st.selectbox(f"Item ({len(movable)} unrated)", list(labels))
    target = st.selectbox("To", [c for c in clinicians if c != source])
    move = st.form_submit_button("Reassign")
if move:
    try:
        with transaction(engine()) as session:
            reassign(session, get_study(session, name), labels[picked], source, target, actor=who)
    except MedhelmError as exc:
        st.error(str(exc))
    else:
        st.success(f"{picked} moved from {source} to {target}.")
