"""Rate: a clinician works through their queue, one item at a time.

Model text is drawn with st.text (plain text, never markdown or HTML). Every submission is written in one
transaction with a request id, so a double click or a rerun never writes twice; a refused submission keeps
what was filled in (the form's widgets keep their values).
"""

from __future__ import annotations

import time
import uuid

import streamlit as st
from sqlmodel import Session

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import RatingFlag
from medhelm_core.errors import DatabaseError, MedhelmError
from medhelm_core.rating import queue as rq
from medhelm_core.studies import get_study_by_id
from medhelm_core.text import markdown_literal
from pages.common import criterion_inputs, engine, require_page, session_checked, show_item_texts

FLAGS = {"": "No flag", **{f.value: f.value.replace("_", " ").capitalize() for f in RatingFlag}}

who = require_page("rate")
st.title("Rate")

with Session(engine()) as session:
    studies = rq.progress(session, who)
if not studies:
    st.info("No items are assigned to you yet. A researcher will assign items to your account.")
    st.stop()

by_label = {f"{p.title or p.name}  ({p.done} of {p.assigned} done)": p for p in studies}
chosen = by_label[
    st.selectbox("Study", list(by_label), label_visibility="collapsed" if len(studies) == 1 else "visible")
]
st.progress(chosen.done / chosen.assigned if chosen.assigned else 0.0, text=f"{chosen.done} of {chosen.assigned} done")

with Session(engine()) as session:
    study = get_study_by_id(session, chosen.study_id)
    entries = rq.queue(session, who, study)
    rubric = rq.study_rubric(session, study)

pos_key = f"position_{chosen.study_id}"
if pos_key not in st.session_state or st.session_state[pos_key] >= len(entries):
    st.session_state[pos_key] = rq.first_open(entries)  # resume where they left off


@session_checked("rate")  # a callback runs before the page script, so before its require_page
def go(step: int) -> None:
    st.session_state[pos_key] = min(max(st.session_state[pos_key] + step, 0), len(entries) - 1)


nav_prev, nav_label, nav_next = st.columns([1, 4, 1])
nav_prev.button("← Previous", on_click=go, args=(-1,), disabled=st.session_state[pos_key] == 0, width="stretch")
nav_next.button("Next →", on_click=go, args=(1,), disabled=st.session_state[pos_key] >= len(entries) - 1,
                width="stretch")
index = st.session_state[pos_key]
entry = entries[index]
nav_label.markdown(f"Item **{index + 1}** of {len(entries)}" + ("  ·  rated, you can revise it" if entry.rated else ""))

with Session(engine()) as session:
    # A repeat (test-retest) looks like any other item; only its widget keys and its storage differ.
    item = rq.load_item(session, who, study, entry.item_id, retest=entry.retest)

# Widget keys reach the browser (as CSS classes), so the repeat's slot is an opaque token, not a marker.
slot = st.session_state.setdefault(f"slot_{item.item_id}_{entry.retest}", uuid.uuid4().hex[:12])
shown_key = f"shown_{slot}"
st.session_state.setdefault(shown_key, time.monotonic())

left, right = st.columns([3, 2], gap="large")
with left:
    if not item.text_available:
        st.caption("The texts of this item were not imported (ids and scores only).")
    show_item_texts(item.input_text, item.output_text, item.reference_text, output_label="Response to rate")

with right:
    revision_tag = f"{slot}_{item.revision}"
    with st.form(f"rating_{revision_tag}", clear_on_submit=False, enter_to_submit=False, border=True):
        values = criterion_inputs(rubric.criteria, item.scores, f"score_{revision_tag}")
        comment = st.text_area("Comment (optional)", value=item.comment, key=f"comment_{revision_tag}", height=80)
        flag = st.selectbox("Flag", list(FLAGS), format_func=FLAGS.get, index=list(FLAGS).index(item.flag or ""),
                            key=f"flag_{revision_tag}")
        submitted = st.form_submit_button("Submit rating" if not entry.rated else "Save revision", type="primary",
                                          width="stretch")

    if submitted:
        request_key = f"request_{revision_tag}"
        request_id = st.session_state.setdefault(request_key, uuid.uuid4().hex)
        try:
            with transaction(engine()) as session:
                rq.submit(
                    session, who, get_study_by_id(session, chosen.study_id), item.item_id,
                    {k: v for k, v in values.items() if v is not None},
                    comment=comment, flag=flag or None, request_id=request_id,
                    elapsed_seconds=time.monotonic() - st.session_state[shown_key], retest=entry.retest,
                )
        except DatabaseError:
            # The request id is kept: if the write reached the database before the connection failed, the
            # resubmission is recognised and saved once, not twice.
            st.error("Could not save your rating: the database did not respond. Your answers are still in the "
                     "form; please press the button again to resubmit (it will not be saved twice).")
        except MedhelmError as exc:
            st.session_state.pop(request_key, None)
            st.error(markdown_literal(exc))
        else:
            st.session_state.pop(shown_key, None)
            with Session(engine()) as session:
                fresh = rq.queue(session, who, study)
            st.session_state[pos_key] = rq.next_open(fresh, index)
            st.toast("Rating saved")
            st.rerun()
