"""Verdict: may this jury stand in for a clinician? Fix the acceptance protocol, then read PASS / FAIL / NOT
ENOUGH DATA per benchmark and pooled, and the judge bias panel (researchers, admins).

Results are computed only after the researcher asks for them, and that first viewing is recorded, so a
protocol fixed later is flagged. Only ids, scores and figures are drawn here, never model text.
"""

from __future__ import annotations

import streamlit as st
from sqlmodel import Session

from medhelm_core.agreement.verdict import TESTS
from medhelm_core.db.engine import transaction
from medhelm_core.errors import MedhelmError
from medhelm_core.figures.verdict_tables import bias_display, calibration_display, verdict_display
from medhelm_core.studies import get_study_by_id
from medhelm_core.text import markdown_literal
from medhelm_core.verdict import fix_protocol, study_protocol, study_verdict
from pages.common import engine, pick_study, require_page

who = require_page("verdict")
st.title("Verdict")
st.caption(
    "Can the jury stand in for a clinician? The Alternative Annotator Test (Calderon, Reichart and Dror, ACL 2025) "
    "and an equivalence test, under a protocol fixed before the results are seen; then where the jury goes wrong."
)

study = pick_study("No studies yet: import items on the Data page.")
eng = engine()
protocol = study_protocol(study)

st.subheader("Acceptance protocol")
if study.verdict_protocol is None:
    st.info("No protocol fixed yet: fix it before looking at the results (the default is shown).")
else:
    st.caption(markdown_literal(f"Fixed {study.verdict_protocol_fixed_at:%Y-%m-%d %H:%M} UTC."))
with st.form("protocol"):
    tests = st.multiselect("Tests", list(TESTS), default=list(protocol.tests))
    left, middle, right = st.columns(3)
    epsilon = left.number_input("epsilon (Alt-Test margin; 0.2 for experts)", 0.0, 0.99, protocol.epsilon, 0.05)
    delta = middle.number_input("delta (equivalence margin, score points)", 0.01, 4.0, protocol.delta, 0.05)
    alpha = right.number_input("alpha", 0.001, 0.49, protocol.alpha, 0.01)
    min_items = left.number_input("Minimum items", 2, 100000, protocol.min_items)
    min_clinicians = middle.number_input("Minimum clinicians", 2, 1000, protocol.min_clinicians)
    min_shared = right.number_input("Minimum shared items per clinician", 2, 100000, protocol.min_shared_items)
    if study.verdict_viewed_at is not None:
        st.warning("The results have been viewed: a change now is recorded as made after viewing.")
    fix = st.form_submit_button("Fix the protocol")
if fix:
    try:
        with transaction(eng) as session:
            fix_protocol(session, get_study_by_id(session, study.id),
                         {"tests": tests, "epsilon": epsilon, "delta": delta, "alpha": alpha, "min_items": min_items,
                          "min_clinicians": min_clinicians, "min_shared_items": min_shared}, actor=who)
    except MedhelmError as exc:
        st.error(markdown_literal(exc))
    else:
        st.rerun()

st.subheader("Verdict")
if study.verdict_viewed_at is None and not st.button("Show the verdict (records that the results were viewed)",
                                                     type="primary"):
    st.stop()
with transaction(eng) as session:
    result = study_verdict(session, get_study_by_id(session, study.id), actor=who)
for flag in result.flags:
    st.warning(markdown_literal(flag))
pooled = [s for s in result.sentences if s.startswith("pooled,")]
for sentence in pooled or result.sentences:
    st.markdown("- " + markdown_literal(sentence))
if pooled and len(pooled) < len(result.sentences):
    with st.expander("Per benchmark"):
        for sentence in result.sentences:
            if not sentence.startswith("pooled,"):
                st.markdown("- " + markdown_literal(sentence))
if not result.table.empty:
    st.dataframe(verdict_display(result.table), hide_index=True)
st.markdown("**What this design can decide**")
for sentence in result.design:
    st.markdown("- " + markdown_literal(sentence))

st.subheader("Judge bias panel")
for sentence in result.bias_words:
    st.markdown("- " + markdown_literal(sentence))
if not result.bias.empty:
    st.dataframe(bias_display(result.bias), hide_index=True)
if not result.scale.empty:
    st.caption("Use of the scale: share of scores at each level (means rounded, halves away from zero).")
    st.dataframe(result.scale, hide_index=True)
if result.calibration is not None:
    fit = result.calibration_fit or {}
    st.caption(markdown_literal(
        f"Calibration map (isotonic, 95% bootstrap band over items): cross-validated error "
        f"{fit.get('cv_rmse', float('nan')):.2f} points against {fit.get('raw_rmse', float('nan')):.2f} for the "
        f"jury score as it is, over {fit.get('n', 0)} items."))
    st.dataframe(calibration_display(result.calibration), hide_index=True)

with Session(eng) as session:  # the study row as it is now, for the audit note at the foot
    now = get_study_by_id(session, study.id)
st.caption(markdown_literal(
    f"Results first viewed {now.verdict_viewed_at:%Y-%m-%d %H:%M} UTC; every protocol change is in the audit trail."
    if now.verdict_viewed_at else ""))
