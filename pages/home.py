"""Studies: for researchers, every study with its counts; for clinicians, their own progress."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlalchemy import func
from sqlmodel import Session, select

from medhelm_core.models import Assignment, Rating, Study
from medhelm_core.studies import list_studies, summarise_study
from pages.common import engine, require_role

who = require_role("admin", "researcher", "clinician", "adjudicator")
st.title("Studies")

with Session(engine()) as session:
    if who.role in ("admin", "researcher"):
        summaries = [summarise_study(session, s) for s in list_studies(session)]
        if not summaries:
            st.info("No studies yet. Import model outputs on the Data page or with `medhelm import`.")
        else:
            st.dataframe(
                pd.DataFrame([s.__dict__ for s in summaries]).rename(columns=lambda c: c.replace("_", " ")),
                hide_index=True,
                width="stretch",
            )
    else:
        assigned = session.exec(
            select(Study.title, func.count(Assignment.id), Study.id)
            .join(Assignment, Assignment.study_id == Study.id)
            .where(Assignment.user_id == who.user_id)
            .group_by(Study.id, Study.title)
        ).all()
        if not assigned:
            st.info("No items are assigned to you yet. A researcher will assign items to your account.")
        for title, total, study_id in assigned:
            done = session.exec(
                select(func.count(func.distinct(Rating.item_id)))
                .join(Assignment, (Assignment.item_id == Rating.item_id) & (Assignment.user_id == Rating.rater_id))
                .where(Rating.rater_id == who.user_id, Assignment.study_id == study_id)
            ).one()
            st.subheader(title)
            st.progress(done / total if total else 0.0, text=f"{done} of {total} done")
