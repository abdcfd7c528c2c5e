"""Rate: a clinician works through their queue, one item per screen, for hours at a time.

At 1280x800 the item and the rubric fit one screen: the request and the response scroll in boxes of their own
on the left, the rubric's form stays beside them on the right. Keys do what clicks do (1-5, Enter, J/K; see
:mod:`pages.components.rate_keys`). A new item starts at the top. An item can be skipped with a reason (not a
rating); the study's instructions and the rubric's anchors are one click away; an empty queue says so.

The model's output is drawn as safe markdown by default (:func:`~medhelm_core.text.safe_markdown`: its lists
and bold stay, nothing loads, links or runs), or as plain text with one toggle. Every submission is written in
one transaction with a request id, so a double click or a rerun never writes twice; a refused submission keeps
what was filled in (the form's widgets keep their values).
"""

from __future__ import annotations

import math
import time
import uuid

import streamlit as st
from sqlmodel import Session

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import RatingFlag, SkipReason
from medhelm_core.errors import DatabaseError, MedhelmError
from medhelm_core.rating import progress as rp
from medhelm_core.rating import queue as rq
from medhelm_core.rating import rater_actions as ra
from medhelm_core.rating import rater_item as ri
from medhelm_core.rubric import CriterionSpec
from medhelm_core.studies import get_study_by_id
from medhelm_core.text import DIRECTION_NOTE, has_direction_controls, markdown_literal, safe_markdown
from pages.common import engine, require_page, session_checked, show_text
from pages.components.rate_keys import KEYS, NEXT, PREVIOUS, SUBMIT, form_key, rating_keys

FLAGS = {"": "No flag", **{f.value: f.value.replace("_", " ").capitalize() for f in RatingFlag}}
#: the height of the two text boxes together (px): what leaves the rubric and the buttons on a 800 px screen
TEXT_BOXES = 536
#: the page is laid out to fit one screen: less empty space above it than Streamlit's default. While a run draws
#: the next item (another study, after a submission, Next), Streamlit keeps the old form on screen, marked stale,
#: for up to a second under load: it takes no clicks, which would be lost with it.
STYLE = """<style>
.block-container, [data-testid="stMainBlockContainer"] {padding: 2.4rem 1.5rem 1rem;}
[class*="st-key-score_"] {width: 100% !important;}
[class*="st-key-rate_form_"] [data-testid="stRadio"] {padding: 0.1rem 0.5rem 0; border-radius: 0.5rem;
  border-left: 3px solid transparent; width: 100%;}
[class*="st-key-rate_form_"] [data-testid="stRadio"]:focus-within {background: rgba(255, 75, 75, 0.07);
  border-left-color: rgb(255, 75, 75);}
[class*="st-key-rate_form_"] [data-testid="stCaptionContainer"] p {font-size: 0.78rem; line-height: 1.3;}
[class*="st-key-rate_form_"] [data-testid="stCaptionContainer"] {margin-top: -0.9rem; padding-left: 0.7rem;}
[class*="st-key-rate_text_"] p, [class*="st-key-rate_text_"] li {font-size: 0.95rem;}
[class*="st-key-rate_form_"] [data-stale="true"] {pointer-events: none;}
</style>"""

who = require_page("rate")
st.html(STYLE)

# One session for the page's reads (a round trip to open one counts at 100,000 items): the progress over the
# clinician's studies, then, in the study chosen, only what the page shows: the place in the queue and its item
# (never the whole queue); the place resumes at the first open item on a first visit or when the queue got shorter.
with Session(engine()) as session:
    studies = rp.progress(session, who)
    if not studies:
        st.title("Rate")
        st.info("No items are assigned to you yet. A researcher will assign items to your account.")
        st.stop()
    # The choice is kept by study id (the selectbox below reads it from its key).
    by_id = {p.study_id: p for p in studies}
    if st.session_state.get("rate_study") not in by_id:
        st.session_state["rate_study"] = next((p.study_id for p in studies if p.handled < p.assigned),
                                              studies[0].study_id)
    study_id = st.session_state["rate_study"]
    chosen = by_id[study_id]
    pos_key = f"position_{study_id}"
    revising_key = f"revising_{study_id}"
    study = get_study_by_id(session, study_id)
    view = rq.rate_view(session, who, study, st.session_state.get(pos_key),
                        revising=bool(st.session_state.get(revising_key)), counts=chosen)
    rubrics = st.session_state.setdefault("rate_rubrics", {})  # a stored rubric is immutable: read it once
    if study.rubric_id not in rubrics:
        rubrics[study.rubric_id] = ri.study_rubric(session, study)
    rubric = rubrics[study.rubric_id]
    instructions = study.instructions or study.description
st.session_state[pos_key] = view.index

# The labels never change while rating (no counts in them): a label that changed on every submit sent the
# selectbox back to its first study.
titles = {p.study_id: p.title or p.name for p in studies}
if len(set(titles.values())) < len(titles):
    titles = {p.study_id: f"{p.title or p.name} ({p.name})" for p in studies}
head_study, head_progress, head_help = st.columns([5, 4, 2], vertical_alignment="center")
if len(studies) > 1:
    head_study.selectbox("Study", list(by_id), format_func=titles.get, key="rate_study", label_visibility="collapsed")
else:
    head_study.markdown(f"**{markdown_literal(titles[study_id])}**")
skipped_note = f" · {chosen.skipped} skipped" if chosen.skipped else ""
head_progress.progress(chosen.handled / chosen.assigned if chosen.assigned else 0.0,
                       text=f"{chosen.done} of {chosen.assigned} done{skipped_note}")


def show_instructions() -> None:
    """The study's instructions, the rubric with every anchor, and the keys."""
    if instructions:
        st.markdown(safe_markdown(instructions))
    st.markdown(f"**Rubric: {markdown_literal(rubric.title or rubric.name)}**")
    for criterion in rubric.criteria:
        st.markdown(f"**{markdown_literal(criterion.label)}**: {markdown_literal(criterion.description)}")
        anchors = sorted(criterion.anchors.items())
        if anchors:
            st.markdown("\n".join(f"- {level}: {markdown_literal(text)}" for level, text in anchors))
    st.markdown("**Keys**")
    st.markdown("\n".join(f"- {markdown_literal(key)}: {markdown_literal(action)}" for key, action in KEYS))


with head_help.popover("Instructions", icon=":material/menu_book:", width="stretch"):
    show_instructions()

if not view.all_done:
    st.session_state.pop(revising_key, None)  # new work came in: back to the open items
elif not st.session_state.get(revising_key):
    st.success(f"**All done.** You have rated {chosen.done} of the {chosen.assigned} items assigned to you in this "
               f"study{f' and skipped {chosen.skipped}' if chosen.skipped else ''}. Thank you!")
    waiting = [p for p in studies if p.handled < p.assigned]

    @session_checked("rate")
    def switch_to(other_id: int) -> None:
        st.session_state["rate_study"] = other_id  # in a callback: the selectbox is not drawn yet

    for other in waiting:
        st.button(markdown_literal(f"Go on with {titles[other.study_id]}: {other.assigned - other.handled} items left"),
                  key=f"rate_go_{other.study_id}", type="primary", on_click=switch_to, args=(other.study_id,))
    if not waiting:
        st.caption("Nothing else is waiting for you. A researcher may assign more items later.")
    if st.button("Look over or revise my ratings", key="rate_revise"):
        st.session_state[revising_key] = True
        st.session_state[pos_key] = 0
        st.rerun()
    st.stop()


@session_checked("rate")  # a callback runs before the page script, so before its require_page
def go(step: int) -> None:
    st.session_state[pos_key] = min(max(st.session_state[pos_key] + step, 0), view.length - 1)


index, entry, item = view.index, view.entry, view.item  # a repeat (test-retest) looks like any other item
if entry is None or item is None:  # the queue emptied under this run (its items moved to someone else)
    st.info("No items are assigned to you in this study any more.")
    st.stop()

# Widget keys reach the browser (as CSS classes), so the repeat's slot is an opaque token, not a marker.
slot = st.session_state.setdefault(f"slot_{item.item_id}_{entry.retest}", uuid.uuid4().hex[:12])
shown_key = f"shown_{slot}"
st.session_state.setdefault(shown_key, time.monotonic())


def box_height(text: str, chars_per_line: int = 68, line_px: int = 24) -> int:
    """Roughly how tall ``text`` draws in the left column, in pixels."""
    lines = sum(max(1, math.ceil(len(line) / chars_per_line)) for line in (text or "").splitlines() or [""])
    return lines * line_px + 34


def draw_text(text: str, plain: bool) -> None:
    """Model text as safe markdown, or as plain text in the order stored."""
    if plain:
        show_text(text)
        return
    st.markdown(safe_markdown(text))
    if has_direction_controls(text):
        st.caption(DIRECTION_NOTE)


left, right = st.columns([11, 9], gap="medium")
with left:
    nav_prev, nav_label, nav_next, nav_skip = st.columns([3, 4, 3, 3], vertical_alignment="center")
    nav_prev.button("← Previous", key=PREVIOUS, on_click=go, args=(-1,), disabled=index == 0, width="stretch",
                    help="K")
    nav_next.button("Next →", key=NEXT, on_click=go, args=(1,), disabled=index >= view.length - 1, width="stretch",
                    help="J")
    state = "rated, you can revise it" if entry.rated else "skipped" if entry.skipped else ""
    nav_label.markdown(f"Item **{index + 1}** of {view.length}" + (f"  \n:gray[{state}]" if state else ""))
    if not item.text_available:
        st.caption("The texts of this item were not imported (ids and scores only).")
    budget = TEXT_BOXES - (52 if item.reference_text is not None else 0)
    request_height = min(max(box_height(item.input_text), 72), 190)
    label_col, plain_col = st.columns([5, 2], vertical_alignment="bottom")
    label_col.caption("Request")
    plain = plain_col.toggle("Plain text", key="rate_plain_text")
    with st.container(height=request_height, border=True, key=f"rate_text_request_{slot}"):
        draw_text(item.input_text, plain)
    st.caption("Response to rate")
    with st.container(height=max(budget - request_height, 240), border=True, key=f"rate_text_response_{slot}"):
        draw_text(item.output_text, plain)
    if item.reference_text is not None:
        with st.expander("Reference answer", expanded=False):
            draw_text(item.reference_text, plain)


def criterion_input(criterion: CriterionSpec, current: int | None, key: str) -> int | None:
    """One horizontal radio over the criterion's scale with its anchors underneath (its description on hover)."""
    levels = list(range(criterion.scale_min, criterion.scale_max + 1))
    chosen = st.radio(markdown_literal(criterion.label), levels, horizontal=True, key=key,
                      index=levels.index(current) if current in levels else None,
                      help=markdown_literal(criterion.description) if criterion.description else None)
    anchors = sorted(criterion.anchors.items())
    if anchors:
        st.caption("  \n".join(f"**{level}** {markdown_literal(text)}" for level, text in anchors))
    return chosen


with right:
    revision_tag = f"{slot}_{item.revision}"
    if item.skip_reason:
        st.info(markdown_literal(f"You skipped this item: {ra.SKIP_REASONS.get(item.skip_reason, item.skip_reason)}"
                                 + (f" ({item.skip_note})" if item.skip_note else "")
                                 + ". Rate it to replace the skip."))
    with st.container(key=form_key(slot)):
        with st.form(f"rating_{revision_tag}", clear_on_submit=False, enter_to_submit=False, border=True):
            values = {c.name: criterion_input(c, item.scores.get(c.name), f"score_{revision_tag}_{c.name}")
                      for c in rubric.criteria}
            note_col, flag_col = st.columns([3, 2])
            comment = note_col.text_input("Comment (optional)", value=item.comment, key=f"comment_{revision_tag}",
                                          max_chars=5000)
            flag = flag_col.selectbox("Flag", list(FLAGS), format_func=FLAGS.get,
                                      index=list(FLAGS).index(item.flag or ""), key=f"flag_{revision_tag}")
            submitted = st.form_submit_button("Submit rating" if not entry.rated else "Save revision", type="primary",
                                              width="stretch", key=SUBMIT, help="Enter")
        st.caption("Keys: **1–5** score the highlighted criterion · **Enter** submits · **J**/**K** next/previous")

    if not entry.rated:
        with nav_skip.popover("Skip…", width="stretch", help="Skip this item with a reason (not a rating)"):
            with st.form(f"skip_{revision_tag}", border=False):
                reason = st.selectbox("Why do you skip it?", list(ra.SKIP_REASONS), format_func=ra.SKIP_REASONS.get,
                                      index=list(ra.SKIP_REASONS).index(item.skip_reason) if item.skip_reason else None,
                                      placeholder="Choose a reason", key=f"skip_reason_{revision_tag}")
                skip_note = st.text_input("Note (needed for Other)", value=item.skip_note, max_chars=ra.MAX_SKIP_NOTE,
                                          key=f"skip_note_{revision_tag}")
                skip = st.form_submit_button("Skip, not rated", key="rate_skip")
            st.caption("A skipped item is not a rating. Researchers see the reason; you can still rate it later.")
    else:
        skip = False


def move_on() -> None:
    """After a submission or a skip: the next open item (or the all-done state), at the top of the page."""
    st.session_state.pop(shown_key, None)
    with Session(engine()) as session:
        st.session_state[pos_key] = rq.next_open_index(session, who, study, index)
    st.rerun()


if submitted:
    request_key = f"request_{revision_tag}"
    request_id = st.session_state.setdefault(request_key, uuid.uuid4().hex)
    try:
        with transaction(engine()) as session:
            ra.submit(
                session, who, get_study_by_id(session, study_id), item.item_id,
                {k: v for k, v in values.items() if v is not None},
                comment=comment, flag=flag or None, request_id=request_id,
                elapsed_seconds=time.monotonic() - st.session_state[shown_key], retest=entry.retest,
            )
    except DatabaseError:
        # The request id is kept: if the write reached the database before the connection failed, the
        # resubmission is recognised and saved once, not twice.
        with right:
            st.error("Could not save your rating: the database did not respond. Your answers are still in the "
                     "form; please press the button again to resubmit (it will not be saved twice).")
    except MedhelmError as exc:
        st.session_state.pop(request_key, None)
        with right:
            st.error(markdown_literal(exc))
    else:
        st.toast("Rating saved")
        move_on()

if skip:
    if reason is None:
        with right:
            st.error("Choose why you skip this item.")
    else:
        try:
            with transaction(engine()) as session:
                ra.skip(session, who, get_study_by_id(session, study_id), item.item_id, reason, skip_note,
                        retest=entry.retest)
        except DatabaseError:
            with right:
                st.error("Could not save the skip: the database did not respond. Please try again.")
        except MedhelmError as exc:
            with right:
                st.error(markdown_literal(exc))
        else:
            st.toast(f"Skipped: {ra.SKIP_REASONS[SkipReason(reason)]}")
            move_on()

# Last, once a submission or a skip is handled: a run that moves on reruns before this, so the keys' script hears
# of the next item, or of this one again when it was refused, never of the form on its way out.
rating_keys(slot, len(rubric.criteria))
