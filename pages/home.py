"""Studies: for researchers, every study with its counts; for clinicians, their own progress."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlmodel import Session

from medhelm_core.rating.progress import progress
from medhelm_core.studies import list_studies, summarise_study
from medhelm_core.text import markdown_literal
from pages.common import engine, require_page

who = require_page("home")
st.title("Studies")

with Session(engine()) as session:
    if who.sees_everything:
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
        mine = progress(session, who)
        if not mine:
            st.info("No items are assigned to you yet. A researcher will assign items to your account.")
        for p in mine:
            st.subheader(markdown_literal(p.title or p.name))
            st.progress(p.done / p.assigned if p.assigned else 0.0, text=f"{p.done} of {p.assigned} done")
        if mine:
            st.page_link("pages/rate.py", label="Continue rating", icon=":material/rate_review:")
