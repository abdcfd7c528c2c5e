"""Review: what clinicians said about items besides their scores (researchers, admins): every "unsafe" flag first,
then the other flags, the skips with their reasons and the comments, filterable, each opening its item.

Comments and notes are the clinicians' free text: drawn in a dataframe (plain text, in stored order), never as
markdown or HTML.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlmodel import Session

from medhelm_core.errors import MedhelmError
from medhelm_core.frames import default_jury_run
from medhelm_core.frames.review import REVIEW_KINDS, filter_review, review_frame
from medhelm_core.rating.rater_actions import SKIP_REASONS
from medhelm_core.studies import get_study_by_id
from medhelm_core.text import markdown_literal
from pages.common import engine, in_stored_order, pick_study, require_page, session_checked, show_item_detail

KIND_LABELS = {"unsafe": "Unsafe", "unreadable": "Unreadable", "cannot_judge": "Cannot judge", "skip": "Skipped",
               "comment": "Comment"}

who = require_page("review")
st.title("Review")
st.caption("Flags, skips and comments from the clinicians: unsafe flags first, then the other flags, skips and "
           "comments, newest first within each. Select a row to read the item.")

study = pick_study("No studies yet.", key="review_study")
with Session(engine()) as session:
    frame = review_frame(session, get_study_by_id(session, study.id))
if frame.empty:
    st.info("Nothing to review yet: no clinician has flagged, skipped or commented on an item of this study.")
    st.stop()

counts = frame["kind"].value_counts()
cards = st.columns(len(REVIEW_KINDS))
for card, kind in zip(cards, REVIEW_KINDS, strict=True):
    card.metric(KIND_LABELS[kind], int(counts.get(kind, 0)))

kinds_col, bench_col, who_col, text_col = st.columns([3, 2, 2, 2])
kinds = kinds_col.multiselect("Show", list(REVIEW_KINDS), format_func=KIND_LABELS.get, placeholder="everything",
                              key=f"review_kinds_{study.id}")
benchmarks = bench_col.multiselect("Benchmarks", sorted(frame["benchmark"].unique()), placeholder="all",
                                   key=f"review_benchmarks_{study.id}")
clinicians = who_col.multiselect("Clinicians", sorted(frame["clinician"].unique()), placeholder="all",
                                 key=f"review_clinicians_{study.id}")
text = text_col.text_input("Comment contains", key=f"review_text_{study.id}", placeholder="e.g. dose")
shown = filter_review(frame, kinds=kinds, benchmarks=benchmarks, clinicians=clinicians, text=text)
shown = shown.reset_index(drop=True)
st.caption(f"{len(shown)} of {len(frame)} rows.")
if shown.empty:
    st.stop()

def what(row) -> str:  # noqa: ANN001 - a row of the review frame
    """The row's kind as a researcher reads it; a skip with its reason."""
    label = KIND_LABELS.get(row.kind, row.kind)
    if row.kind == "skip" and row.reason:
        return f"{label}: {SKIP_REASONS.get(row.reason, row.reason).lower()}"
    return label


criteria = [c for c in shown.columns if c.startswith("score_")]
table = in_stored_order(shown.assign(
    kind=[what(row) for row in shown.itertuples()],
    at=shown["at"].dt.strftime("%Y-%m-%d %H:%M"),
    # one short column: "2 / 3 / 4" in the rubric's order, blank where a criterion was left out
    scores=shown[criteria].apply(lambda r: "" if r.isna().all() else " / ".join(
        "" if pd.isna(v) else f"{v:g}" for v in r), axis=1) if criteria else "",
)).drop(columns=["flag", "reason", *criteria])
unsafe = shown["kind"].eq("unsafe").to_numpy()
styled = table.style.apply(lambda row: ["background-color: rgba(255, 75, 75, 0.12)" if unsafe[row.name] else ""
                                        for _ in row], axis=1)
rows = st.dataframe(
    styled, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row", key=f"review_{study.id}",
    column_order=["kind", "item_id", "clinician", "comment", "scores", "benchmark", "at", "repeat"],
    column_config={
        "kind": st.column_config.TextColumn("what", width="medium"),
        "item_id": st.column_config.NumberColumn("item", format="%d", width="small"),
        "clinician": st.column_config.TextColumn("clinician", width="small"),
        "comment": st.column_config.TextColumn("comment or note", width=330),
        "scores": st.column_config.TextColumn(
            "scores", width=80, help=" / ".join(c.removeprefix("score_") for c in criteria) or None),
        "at": "when (UTC)",
        "repeat": st.column_config.CheckboxColumn("repeat", help="A test-retest repeat of the item", width="small"),
    },
)
if not rows.selection.rows:
    st.stop()

item_id = int(shown.iloc[rows.selection.rows[0]]["item_id"])


@session_checked("review")
def open_in_agreement() -> None:
    # The Agreement page picks its study and its drill-down item from these keys when it opens.
    st.session_state["agreement_study"] = study.name
    st.session_state["agreement_item_id"] = str(item_id)


if st.button("Open it on the Agreement page", icon=":material/insights:", on_click=open_in_agreement,
             help="The drill-down there shows the same item beside the agreement figures."):
    st.switch_page("pages/agreement.py")


def drill_down() -> None:
    """The item with every clinician's and judge's word on it, as on the Agreement page."""
    from medhelm_core.figures.drilldown import item_detail  # loads the figures (altair ...) only when asked

    with Session(engine()) as session:
        chosen = get_study_by_id(session, study.id)
        run = default_jury_run(session, chosen, or_newest=True)
        try:
            detail = item_detail(session, chosen, item_id, run.id if run else None)
        except MedhelmError as exc:  # the item was deleted meanwhile
            st.error(markdown_literal(exc))
            return
    show_item_detail(detail)


drill_down()
