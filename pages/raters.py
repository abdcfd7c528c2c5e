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
from medhelm_core.studies import get_study, list_studies
from pages.common import engine, require_role

require_role("researcher", "admin")
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

st.subheader("Assign")
st.caption(
    "Each item goes to the chosen number of distinct clinicians; loads differ by at most one and pairs of "
    "clinicians share items as evenly as possible. Existing assignments are kept."
)
with st.form("assign"):
    overlap = st.number_input("Clinicians per item", min_value=1, max_value=max(len(clinicians), 1),
                              value=min(study.overlap, max(len(clinicians), 1)))
    chosen = st.multiselect("Clinicians (empty: all active clinicians)", clinicians)
    go = st.form_submit_button("Assign", type="primary")
if go:
    try:
        with transaction(engine()) as session:
            plan = assign_balanced(session, get_study(session, name), int(overlap), chosen or None)
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
            reassign(session, get_study(session, name), labels[picked], source, target)
    except MedhelmError as exc:
        st.error(str(exc))
    else:
        st.success(f"{picked} moved from {source} to {target}.")
