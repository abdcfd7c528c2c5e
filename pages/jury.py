"""Jury: choose the prompt and rubric versions, configure judge models, see the estimate, run, stop and
resume, and read the verdicts.

Starting a run queues it as a job (medhelm_core.jobs): a worker (the app's own on SQLite, `medhelm worker`
processes on PostgreSQL) writes each verdict to the database; this page only reads the run's row and its job, so
it stays responsive, a browser reload shows the same progress, and the run outlives this web process. Keys come
from the workers' environment (on SQLite the app's: its environment or Streamlit secrets, whose root-level
entries become environment variables); none is stored.
"""

from __future__ import annotations

import streamlit as st
from sqlmodel import Session

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import VerdictStatus
from medhelm_core.errors import MedhelmError
from medhelm_core.frames import usable_run_ids
from medhelm_core.jobs import enqueue_jury_run, run_job_note, stop_jury_run
from medhelm_core.jury.batch_store import open_batches
from medhelm_core.jury.config import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_TOKENS,
    MAX_SAMPLES,
    JuryConfig,
    judges_from_text,
    samples_warning,
)
from medhelm_core.jury.overview import criterion_note, run_choices, run_progress, runs_table
from medhelm_core.jury.results import criterion_means, item_jury_scores, verdict_scores_frame
from medhelm_core.jury.run_versions import preview_items, preview_prompt, stored_config
from medhelm_core.jury.runner import estimate_run
from medhelm_core.jury.templates import list_template_versions, save_template_version, template_names
from medhelm_core.rubric import compatible_rubric_versions, rubric_spec
from medhelm_core.text import markdown_literal
from pages.common import engine, pick_study, require_page, session_checked, show_text

who = require_page("jury")
st.title("Jury")
try:
    st.secrets.load_if_toml_exists()  # exports root-level secrets (OPENAI_API_KEY ...) to the environment
except Exception:  # noqa: BLE001 - a malformed secrets file must not break the page; keys then come from env
    pass

eng = engine()
study = pick_study("No studies yet. Import model outputs on the Data page first.")
with Session(eng) as session:
    rubric = rubric_spec(session, study.rubric_id)


st.subheader("Prompt and rubric")
st.caption(f"The judges get one version of a prompt template and one version of the study's rubric, and every run "
           f"records which. Clinicians always rate on the study's rubric ({markdown_literal(rubric.name)} "
           f"v{rubric.version}).")
saved_message = st.session_state.pop("jury_prompt_saved", None)
if saved_message:
    st.success(markdown_literal(saved_message))
with transaction(eng) as session:  # stores the bundled template as medhelm v1 on first use
    names = template_names(session)
prompt_name = st.selectbox("Prompt template", names) if len(names) > 1 else names[0]
with Session(eng) as session:
    prompt_versions = list_template_versions(session, prompt_name)[::-1]  # newest first: the default
    rubric_versions = compatible_rubric_versions(session, study)[::-1]
    item_choices = dict(preview_items(session, study))
cols = st.columns(2)
version_labels = [f"v{v.version}: {v.note or 'no note'} ({v.created_by})" for v in prompt_versions]
prompt = prompt_versions[version_labels.index(cols[0].selectbox(f"Version of {markdown_literal(prompt_name)}",
                                                                version_labels))]
rubric_labels = [f"{r.name} v{r.version}" + (" (the study's)" if r.version == rubric.version else "")
                 for r in rubric_versions]
judge_rubric = rubric_versions[rubric_labels.index(cols[1].selectbox(
    "Rubric version the judges see", rubric_labels, index=[r.version for r in rubric_versions].index(rubric.version),
    help="Other versions word the criteria differently, with the same criteria and scales "
         "(medhelm jury rubric add)."))]
with st.expander(f"Template text of {markdown_literal(prompt.label)}"):
    st.code(prompt.text, language=None, wrap_lines=True)
edited = st.text_area("Edit the template", value=prompt.text, height=300, key=f"jury_prompt_edit_{prompt.label}",
                      help="$response_block, $criteria and $output_format are required; other placeholders: "
                           "$task, $criteria_names, $request_block, $reference_block, $response_tag.")
note = st.text_input("Note for the new version", key="jury_prompt_note", placeholder="what changed and why")
if st.button("Save as new version", disabled=edited == prompt.text):
    try:
        with transaction(eng) as session:
            version, created = save_template_version(session, prompt_name, edited, note=note, actor=who)
    except MedhelmError as exc:
        st.error(markdown_literal(exc))
    else:
        st.session_state["jury_prompt_saved"] = (f"Saved {version.label}." if created
                                                 else f"Unchanged: {version.label} already has this text.")
        st.rerun()
if edited != prompt.text:
    st.caption(f"Runs use the saved {markdown_literal(prompt.label)} until the edits are saved as a new version.")
if item_choices:
    preview_item = st.selectbox("Preview the prompt for item", list(item_choices), format_func=item_choices.get)
    try:
        with Session(eng) as session:
            rendered = preview_prompt(session, study, preview_item, edited, judge_rubric)
    except MedhelmError as exc:
        st.error(markdown_literal(exc))
    else:
        st.caption(markdown_literal(f"What each judge gets for this item with {judge_rubric.name} "
                                    f"v{judge_rubric.version} and "
                                    + ("the edits above (not saved)" if edited != prompt.text else prompt.label))
                   + ":")
        # It holds the model's output: drawn as text, never markdown; wrapped and scrolling, as the judge reads it.
        st.code(rendered.text, language=None, wrap_lines=True, height=420)

st.subheader("New run")
st.caption("One judge per line, as a litellm model name, optionally with its API base: "
           "`openai/gpt-4o-2024-05-13` or `openai/llama-3.3-70b @ http://127.0.0.1:8000/v1`.")
judge_text = st.text_area("Judges", key="jury_judges", placeholder="openai/gpt-4o-2024-05-13")
cols = st.columns(4)
temperature = cols[0].number_input("Temperature", 0.0, 2.0, 0.0, 0.1)
concurrency = int(cols[1].number_input("Concurrency per judge", 1, 256, DEFAULT_CONCURRENCY))
max_tokens = int(cols[2].number_input("Max output tokens", 16, 32768, DEFAULT_MAX_TOKENS))
timeout = float(cols[3].number_input("Timeout per call (s)", 1.0, 3600.0, 120.0))
samples = int(st.number_input("Samples per item", 1, MAX_SAMPLES, 1, help="Times each judge is asked about each "
                              "item (each sample stored and cached apart); 2 or more measure the judges' "
                              "self-consistency on the Verdict page. Use a temperature above 0."))
key_env = st.text_input("Key variable (optional)", help="Name of the environment variable or root-level secret "
                        "holding the key; by default the provider's (OPENAI_API_KEY, ANTHROPIC_API_KEY ...). A judge "
                        "with its own API base (a local server) needs none.")
batch_mode = st.toggle("Batch API", key="jury_batch", help="Send the calls through the provider's batch API "
                       "(OpenAI, Azure OpenAI, OpenAI-compatible servers that serve /v1/batches): about half the "
                       "price, results within 24 hours. Stopping leaves the batches at the provider; Resume collects "
                       "them.")
config: JuryConfig | None = None
if judge_text.strip():
    try:
        judges = judges_from_text(judge_text, temperature=temperature, concurrency=concurrency,
                                  max_tokens=max_tokens, timeout=timeout, api_key_env=key_env.strip() or None)
        config = JuryConfig(judges=judges, rubric=judge_rubric, samples=samples).with_template(prompt)
        estimate = estimate_run(eng, study, config, batch=batch_mode)
    except MedhelmError as exc:
        st.error(markdown_literal(exc))
        config = None
    else:
        if samples_warning(config):
            st.warning(markdown_literal(samples_warning(config)))
        st.info(markdown_literal(estimate.describe()))
        if st.button("Start the jury", type="primary", disabled=estimate.calls + estimate.reused == 0):
            try:
                st.session_state["jury_run"] = enqueue_jury_run(eng, study, config, batch=batch_mode, actor=who)[1]
            except MedhelmError as exc:
                st.error(markdown_literal(exc))
            else:
                st.rerun()

with Session(eng) as session:
    runs = runs_table(session, study)
    usable = usable_run_ids(session, study)
if runs.empty:
    st.info("This study has no jury runs yet.")
    st.stop()

st.subheader("Runs")
# Runs that failed or stopped before any verdict survived are hidden unless asked for (the one just started stays).
failed_runs = runs[~runs["run"].isin(usable) & (runs["run"] != st.session_state.get("jury_run"))]
if not failed_runs.empty and not st.toggle(f"Show failed runs ({len(failed_runs)})", key="jury_show_failed",
                                           help="Runs with no surviving verdict: failed, or stopped before any."):
    runs = runs[~runs["run"].isin(failed_runs["run"])]
if runs.empty:
    st.info("Every run of this study failed: turn on the switch above to see them and their errors.")
    st.stop()
st.dataframe(runs, hide_index=True, width="stretch")
labels = run_choices(runs)
default = next((i for i, rid in enumerate(labels.values()) if rid == st.session_state.get("jury_run")), 0)
run_id = labels[st.selectbox("Run", list(labels), index=default)]
with Session(eng) as session:
    # Watched while the stored status says a worker has the run, even when its heartbeat is late and it reads
    # "interrupted": under load a live worker can be silent for seconds, then finish (the page used to stop watching
    # at the first "interrupted" and stayed there while the CLI said "finished").
    note = run_job_note(session, run_id)
    watching = run_progress(session, run_id).may_change or (note is not None and note.live)


# The buttons below live in a fragment, whose re-runs skip the page's require_page: session_checked checks the
# session again at every re-run, so a disabled account's Resume calls no judge.
@st.fragment(run_every=1.0 if watching else None)
@session_checked("jury")
def progress() -> None:
    with Session(eng) as session:
        shown = run_progress(session, run_id)
        job = run_job_note(session, run_id)
    current, status, state, planned = shown.run, shown.status, shown.state, shown.planned
    queued = job is not None and job.live
    if shown.recorded:
        st.warning("Recorded jury scores: imported from elsewhere (such as MedHELM's published jury means), "
                   "not judges called by this app.")
        return
    done = min(current.calls_done, planned)
    st.progress(done / planned if planned else 0.0, text=f"{status}: {current.calls_done} of {planned} verdicts")
    c = st.columns(4)
    c[0].metric("Verdicts", current.calls_done)
    c[1].metric("Failed", current.calls_failed)
    c[2].metric("Tokens", f"{current.prompt_tokens + current.completion_tokens:,}")
    c[3].metric("Cost", f"${current.cost_usd:.4f}")
    if queued:
        st.caption(markdown_literal(job.text))
    if state.get("unpriced"):
        st.caption(markdown_literal(f"No price known for {', '.join(state['unpriced'])}: counted as $0."))
    error = state.get("error") or (job.error if job is not None else None)
    if error:
        st.error("The run stopped with an error:")
        show_text(error)  # it may quote a server's answer: drawn as text
    if shown.active or queued:
        if st.button("Stop", key="stop_run", disabled=status == "stopping"):
            stop_jury_run(eng, run_id)
            st.rerun()
    elif watching and not shown.may_change:
        st.rerun()  # it just ended: redraw the whole page with its results
    else:
        if shown.silent_seconds is not None:
            st.caption(f"No heartbeat from the run's worker for {shown.silent_seconds:.0f} s: it is busy, or it "
                       "stopped without saying so (a crash, a closed terminal). This page keeps watching; resuming "
                       "takes the run over.")
        resume = current.calls_done < planned and st.button(
            "Resume", key="resume_run", help="Carry on where it stopped; nothing done is asked again.")
        retry = current.calls_failed > 0 and st.button(
            "Ask again where a verdict failed", key="retry_failed",
            help="Calls the judges again for the failed verdicts only; the old answers are replaced.")
        if resume or retry:
            try:
                with Session(eng) as session:
                    stored = stored_config(session, study, current)
                    # calls waiting in provider batches are collected in batch mode, never asked again live
                    in_batches = bool(open_batches(session, run_id))
                st.session_state["jury_run"] = enqueue_jury_run(eng, study, stored, retry_failed=bool(retry),
                                                                batch=batch_mode or in_batches, actor=who)[1]
            except MedhelmError as exc:
                st.error(markdown_literal(exc))
            else:
                st.rerun()


progress()

st.subheader("Results")
with Session(eng) as session:
    items = item_jury_scores(session, run_id)
    means = criterion_means(session, run_id)
    verdicts = verdict_scores_frame(session, run_id)
judged = items["jury_score"].notna().sum()
st.caption(f"{judged} of {len(items)} items have a jury score (the mean over surviving judges and criteria); "
           f"{int(items['n_failed'].sum())} failed verdicts are kept and never counted.")
st.dataframe(items, hide_index=True, width="stretch")
if verdicts.empty:
    st.stop()
choices = {f"{r.benchmark} / {r.instance_id} / {r.model}": r.item_id for r in items.itertuples()}
item_id = choices[st.selectbox("Item", list(choices))]
mine = verdicts[verdicts["item_id"] == item_id]
for criterion in rubric.criterion_names:
    label = markdown_literal(rubric.criterion(criterion).label)
    st.markdown(f"**{label}**: {criterion_note(means, item_id, criterion)}")
    for verdict in mine[mine["criterion"] == criterion].itertuples():
        # Judges' text is drawn with st.text: nothing in it can render as markdown or HTML.
        show_text(f"{verdict.judge}: {verdict.score:g}. {verdict.explanation}")
failed = mine[mine["status"] != VerdictStatus.ok]
if not failed.empty:
    st.markdown(f"**Failed verdicts** ({len(failed)}, not counted)")
    for verdict in failed.itertuples():
        show_text(f"{verdict.judge}: {verdict.error}")
        st.code(verdict.raw_response or "(no answer)", language=None)
