"""Adjudicate: items on which clinicians disagree by at least the study's threshold, one at a time.

The adjudicator sees the item's texts (drawn with st.text: plain text, never markdown or HTML), every
clinician's scores and comments, and gives one score per disputed criterion. Adjudicated scores are stored
apart from the clinicians' ratings. Researchers and admins set the threshold here too.
"""

from __future__ import annotations

import streamlit as st
from sqlmodel import Session

from medhelm_core.db.engine import transaction
from medhelm_core.errors import MedhelmError
from medhelm_core.rating import adjudication as adj
from medhelm_core.rating.rater_item import study_rubric
from medhelm_core.studies import get_study_by_id, update_settings
from medhelm_core.text import markdown_literal
from pages.common import (
    criterion_inputs,
    engine,
    in_stored_order,
    pick_study,
    require_page,
    show_item_texts,
    show_text,
)

who = require_page("adjudicate")
st.title("Adjudicate")

study = pick_study()

if who.sees_everything:
    with st.expander("Threshold", expanded=study.adjudication_threshold is None):
        st.caption("An item goes to adjudication when two clinicians' scores on a criterion differ by at least "
                   "this many points.")
        with st.form(f"threshold_{study.id}", border=False):
            enabled = st.checkbox("Adjudicate this study", value=study.adjudication_threshold is not None)
            points = st.number_input("Points of disagreement", min_value=1, max_value=20, step=1,
                                     value=study.adjudication_threshold or 2)
            save = st.form_submit_button("Save threshold")
        if save:
            try:
                with transaction(engine()) as session:
                    update_settings(session, get_study_by_id(session, study.id),
                                    adjudication_threshold=int(points) if enabled else None, actor=who)
            except MedhelmError as exc:
                st.error(markdown_literal(exc))
            else:
                st.toast("Threshold saved")
                st.rerun()

if study.adjudication_threshold is None:
    st.info("Adjudication is off for this study." + ("" if who.sees_everything else
                                                       " A researcher can turn it on."))
    st.stop()

with Session(engine()) as session:
    cases = adj.adjudication_queue(session, who, study)
    rubric = study_rubric(session, study)
if not cases:
    st.success(f"No item has clinicians {study.adjudication_threshold} or more points apart on a criterion.")
    st.stop()

done = sum(c.adjudicated for c in cases)
st.progress(done / len(cases), text=f"{done} of {len(cases)} disputed items adjudicated")

by_label = {c.label: c for c in cases}
case = by_label[st.selectbox("Disputed item", list(by_label))]

with Session(engine()) as session:
    view = adj.load_case(session, who, study, case.item_id)

left, right = st.columns([3, 2], gap="large")
with left:
    show_item_texts(view.input_text, view.output_text, view.reference_text, height=240)

with right:
    st.markdown("**The clinicians' ratings**")
    st.dataframe(in_stored_order(view.ratings_table(rubric)), hide_index=True, width="stretch")
    for rating in view.ratings:
        if rating.comment:
            st.caption(markdown_literal(rating.label))
            show_text(rating.comment)

    tag = f"{view.item_id}_{'_'.join(f'{k}{v}' for k, v in sorted(view.adjudicated.items()))}"
    with st.form(f"adjudicate_{tag}", enter_to_submit=False, border=True):
        values = criterion_inputs(
            [c for c in rubric.criteria if c.name in view.spreads], view.adjudicated, f"adj_{tag}",
            label=lambda c: f"{c.label} (clinicians {view.spreads[c.name]} points apart)",
        )
        comment = st.text_area("Reason (optional)", value=view.comment, key=f"adj_comment_{tag}", height=80)
        submitted = st.form_submit_button("Save adjudication", type="primary", width="stretch")

    if submitted:
        chosen = {k: v for k, v in values.items() if v is not None}
        missing = [rubric.criterion(k).label for k, v in values.items() if v is None]
        if missing:
            st.error(markdown_literal(f"Please score every disputed criterion: {', '.join(missing)} left empty"))
        else:
            try:
                with transaction(engine()) as session:
                    adj.submit_adjudication(session, who, get_study_by_id(session, study.id), view.item_id, chosen,
                                           comment)
            except MedhelmError as exc:
                st.error(markdown_literal(exc))
            else:
                st.toast("Adjudication saved")
                st.rerun()
