"""Adjudicate: items on which clinicians disagree by at least the study's threshold, one at a time.

The adjudicator sees the item's texts (drawn with st.text: plain text, never markdown or HTML), every
clinician's scores and comments, and gives one score per disputed criterion. Adjudicated scores are stored
apart from the clinicians' ratings. Researchers and admins set the threshold here too.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlmodel import Session

from medhelm_core.db.engine import transaction
from medhelm_core.errors import MedhelmError
from medhelm_core.rating import adjudication as adj
from medhelm_core.rating.queue import study_rubric
from medhelm_core.studies import get_study, list_studies
from pages.common import engine, require_role, show_item_texts

who = require_role("adjudicator", "researcher", "admin")
st.title("Adjudicate")

with Session(engine()) as session:
    studies = [s.name for s in list_studies(session)]
if not studies:
    st.info("No studies yet.")
    st.stop()
name = st.selectbox("Study", studies)

with Session(engine()) as session:
    study = get_study(session, name)

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
                    adj.set_threshold(session, get_study(session, name), int(points) if enabled else None,
                                      actor=who)
            except MedhelmError as exc:
                st.error(str(exc))
            else:
                st.toast("Threshold saved")
                st.rerun()

if study.adjudication_threshold is None:
    st.info("Adjudication is off for this study." + ("" if who.sees_everything else
                                                       " A researcher can turn it on."))
    st.stop()

with Session(engine()) as session:
    cases = adj.adjudication_queue(session, who, study.id)
    rubric = study_rubric(session, study.id)
if not cases:
    st.success(f"No item has clinicians {study.adjudication_threshold} or more points apart on a criterion.")
    st.stop()

done = sum(c.adjudicated for c in cases)
st.progress(done / len(cases), text=f"{done} of {len(cases)} disputed items adjudicated")


def case_label(case: adj.QueueCase) -> str:
    spreads = ", ".join(f"{criterion} ±{spread}" for criterion, spread in case.spreads.items())
    return f"Item {case.item_id} · {case.benchmark} · {spreads}" + ("  ✓" if case.adjudicated else "")


by_label = {case_label(c): c for c in cases}
case = by_label[st.selectbox("Disputed item", list(by_label))]

with Session(engine()) as session:
    view = adj.load_case(session, who, study.id, case.item_id)

left, right = st.columns([3, 2], gap="large")
with left:
    show_item_texts(view.input_text, view.output_text, view.reference_text, height=240)

with right:
    st.markdown("**The clinicians' ratings**")
    table = pd.DataFrame(
        [{"clinician": r.label, **{c.label: r.scores.get(c.name) for c in rubric.criteria}, "flag": r.flag or ""}
         for r in view.ratings]
    )
    st.dataframe(table, hide_index=True, width="stretch")
    for rating in view.ratings:
        if rating.comment:
            st.caption(rating.label)
            st.text(rating.comment)

    tag = f"{view.item_id}_{'_'.join(f'{k}{v}' for k, v in sorted(view.adjudicated.items()))}"
    with st.form(f"adjudicate_{tag}", enter_to_submit=False, border=True):
        values: dict[str, int | None] = {}
        for criterion in rubric.criteria:
            if criterion.name not in view.spreads:
                continue
            levels = list(range(criterion.scale_min, criterion.scale_max + 1))
            current = view.adjudicated.get(criterion.name)
            values[criterion.name] = st.radio(
                f"{criterion.label} (clinicians {view.spreads[criterion.name]} points apart)",
                levels,
                index=levels.index(current) if current in levels else None,
                horizontal=True,
                key=f"adj_{tag}_{criterion.name}",
                help=criterion.description or None,
            )
            if criterion.anchors:
                st.caption("  \n".join(f"{lvl}: {text}" for lvl, text in sorted(criterion.anchors.items())))
        comment = st.text_area("Reason (optional)", value=view.comment, key=f"adj_comment_{tag}", height=80)
        submitted = st.form_submit_button("Save adjudication", type="primary", width="stretch")

    if submitted:
        chosen = {k: v for k, v in values.items() if v is not None}
        missing = [rubric.criterion(k).label for k, v in values.items() if v is None]
        if missing:
            st.error(f"Please score every disputed criterion: {', '.join(missing)} left empty")
        else:
            try:
                with transaction(engine()) as session:
                    adj.submit_adjudication(session, who, study.id, view.item_id, chosen, comment)
            except MedhelmError as exc:
                st.error(str(exc))
            else:
                st.toast("Adjudication saved")
                st.rerun()
