"""Data: import model outputs into a study and browse its items (researchers and admins)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st
from sqlmodel import Session

from medhelm_core.db.engine import transaction
from medhelm_core.errors import MedhelmError
from medhelm_core.importers import FORMATS, import_paths
from medhelm_core.studies import get_or_create_study, list_studies, study_items
from medhelm_core.text import markdown_literal
from pages.common import engine, pick_study, require_page, show_text

who = require_page("data")
st.title("Data")

with Session(engine()) as session:
    studies = {s.name: s for s in list_studies(session)}

st.subheader("Import")
st.caption(
    "JSONL, CSV or Parquet with columns benchmark, instance_id, model, input, output and optional reference; "
    "or MedHELM's ratings CSV. HELM run folders import with `medhelm import STUDY FOLDER`."
)
with st.form("import"):
    study_name = st.text_input("Study (created if new)", value=next(iter(studies), ""))
    upload = st.file_uploader("File", type=["jsonl", "ndjson", "csv", "parquet"])
    fmt = st.selectbox("Format", ["detect", *[f for f in FORMATS if f != "helm"]])
    go = st.form_submit_button("Import", type="primary")
if go:
    if upload is None or not study_name.strip():
        st.error("Choose a study name and a file.")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / Path(upload.name).name
            path.write_bytes(upload.getvalue())
            try:
                with transaction(engine()) as session:
                    study, _ = get_or_create_study(session, study_name)
                    report = import_paths(session, study, [path], None if fmt == "detect" else fmt, actor=who)
            except MedhelmError as exc:
                st.error(markdown_literal(str(exc).replace(str(Path(tmp)) + "/", "")))
            else:
                st.success(
                    f"{report.items_created} items created, {report.items_updated} updated, "
                    f"{report.items_unchanged} unchanged; {report.ratings_written} ratings written."
                )
                # A new study is planned before rating starts: how many items its ICC interval needs.
                st.page_link("pages/raters.py", label="Next: plan the study's size, set its checks and assign "
                             "clinicians on the Raters page", icon=":material/group:")

st.subheader("Browse items")
study = pick_study()
with Session(engine()) as session:
    items = study_items(session, study)
if not items:
    st.info("This study has no items yet.")
    st.stop()
labels = {f"{i.benchmark} / {i.instance_id} / {i.model}": i for i in items}
item = labels[st.selectbox(f"Item ({len(items)} in the study)", list(labels))]
# Model text is shown as plain text (no markdown, no HTML) in its stored order, so nothing in it can render or run.
if not item.meta.get("text_available", True):
    st.caption("The source file held no texts for this item (ids and ratings only).")
st.markdown("**Request**")
show_text(item.input_text)
st.markdown("**Output**")
show_text(item.output_text)
if item.reference_text is not None:
    st.markdown("**Reference**")
    show_text(item.reference_text)
