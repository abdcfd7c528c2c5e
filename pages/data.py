"""Data: import model outputs into a study and browse its items (researchers and admins)."""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

import streamlit as st
from sqlmodel import Session

from medhelm_core.db.engine import transaction
from medhelm_core.errors import MedhelmError
from medhelm_core.importers import FORMATS, detect_format, import_paths
from medhelm_core.importers.tabular import (
    ITEM_COLUMNS,
    REQUIRED_ITEM_COLUMNS,
    column_map_for,
    file_columns,
    suggested_columns,
)
from medhelm_core.studies import get_or_create_study, list_studies, study_items
from medhelm_core.text import markdown_literal
from pages.common import engine, pick_study, require_page, show_text

who = require_page("data")
st.title("Data")
#: the formats whose columns can be matched to ours (a ratings CSV has columns of its own)
MAPPABLE = ("jsonl", "csv", "parquet")

with Session(engine()) as session:
    studies = {s.name: s for s in list_studies(session)}

st.subheader("Import")
st.caption(
    "JSONL, CSV or Parquet with columns benchmark, instance_id, model, input, output and optional reference (other "
    "names can be matched to these below); or MedHELM's ratings CSV. HELM run folders import with "
    "`medhelm import STUDY FOLDER`."
)
study_name = st.text_input("Study (created if new)", value=next(iter(studies), ""), key="data_study_name")
upload = st.file_uploader("File", type=["jsonl", "ndjson", "csv", "parquet"], key="data_upload")
fmt = st.selectbox("Format", ["detect", *[f for f in FORMATS if f != "helm"]], key="data_format")


def clean(message: object, folder: str) -> str:
    """An import error as the page says it: without the temporary folder, and pointing at the mapping here."""
    return markdown_literal(str(message).replace(folder + "/", "").replace(
        "(rename with --map THEIRS=OURS)", "(match the file's columns to ours under Columns)"))


def import_upload(upload) -> None:  # noqa: ANN001 - Streamlit's UploadedFile, or None
    """The uploaded file's columns matched to ours, and its import when asked (a problem ends this part only)."""
    if upload is None:
        st.caption("Choose a file to see its columns.")
        if st.button("Import", type="primary", key="data_import"):
            st.error("Choose a study name and a file.")
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(upload.name).name
        path.write_bytes(upload.getvalue())
        try:
            kind = detect_format(path) if fmt == "detect" else fmt
            columns = file_columns(path, kind) if kind in MAPPABLE else []
        except MedhelmError as exc:
            st.error(clean(exc, tmp))
            return
        mapping: dict[str, str] = {}
        if kind in MAPPABLE:
            st.markdown("**Columns**: which of the file's columns holds each of ours (guessed from their names; "
                        "check them)")
            none = "(none)"
            chosen = {}
            guesses = suggested_columns(columns)
            for cell, ours in zip(st.columns(len(ITEM_COLUMNS)), ITEM_COLUMNS, strict=True):
                options = [none, *columns]
                picked = cell.selectbox(ours + ("" if ours in REQUIRED_ITEM_COLUMNS else " (optional)"), options,
                                        index=options.index(guesses[ours] or none),
                                        key=f"data_map_{ours}_{upload.file_id}")
                chosen[ours] = None if picked == none else picked
            try:
                mapping = column_map_for(chosen, columns)
            except MedhelmError as exc:
                st.error(markdown_literal(exc))
                return
            if mapping:
                st.caption("The same from the command line:")
                st.code(f"medhelm import {shlex.quote(study_name.strip() or 'STUDY')} {shlex.quote(upload.name)} "
                        + " ".join(f"--map {shlex.quote(f'{k}={v}')}" for k, v in mapping.items()), language=None)
        else:
            st.caption(markdown_literal(f"Read as {kind}."))
        if not st.button("Import", type="primary", key="data_import"):
            return
        if not study_name.strip():
            st.error("Choose a study name.")
            return
        try:
            with transaction(engine()) as session:
                study, _ = get_or_create_study(session, study_name)
                report = import_paths(session, study, [path], None if fmt == "detect" else fmt, column_map=mapping,
                                      actor=who)
        except MedhelmError as exc:
            st.error(clean(exc, tmp))
            return
    st.success(f"{report.items_created} items created, {report.items_updated} updated, {report.items_unchanged} "
               f"unchanged; {report.ratings_written} ratings written.")
    # A new study is planned before rating starts: how many items its ICC interval needs.
    st.page_link("pages/raters.py", label="Next: plan the study's size, set its checks and assign clinicians on the "
                 "Raters page", icon=":material/group:")


import_upload(upload)

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
