"""Read items from HELM run folders (``benchmark_output/runs/<suite>/<run>/``).

A run folder holds ``scenario_state.json`` (the adapter spec and one request state per instance and
trial) and ``run_spec.json`` (whose ``name``, such as ``aci_bench:model=openai_gpt-4o``, gives the
benchmark). One item is made per request state of an evaluation split (valid or test), trial 0, with no
perturbation: the instance input, the model's first completion, the reference tagged ``correct`` (else the
first reference), and the model from the adapter spec (else the request).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from medhelm_core.errors import InputFileError
from medhelm_core.importers.records import ImportReport, ItemRecord

EVAL_SPLITS = {"test", "valid", "validation", "eval"}


def is_run_folder(path: Path) -> bool:
    """True for a folder that holds a ``scenario_state.json``."""
    return path.is_dir() and (path / "scenario_state.json").is_file()


def run_folders(path: Path) -> list[Path]:
    """The run folders at ``path``: itself if it is one, else its sub-folders that are (a suite)."""
    if is_run_folder(path):
        return [path]
    if path.is_dir():
        runs = sorted(p for p in path.iterdir() if is_run_folder(p))
        if runs:
            return runs
        raise InputFileError(path, "not a HELM run or suite folder (no scenario_state.json in it or below it)")
    raise InputFileError(path, "no such folder")


def _load_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc.strerror}") from None
    if not raw.strip():
        raise InputFileError(path, "the file is empty")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputFileError(path, "not UTF-8 text", line=line) from None
    except json.JSONDecodeError as exc:
        raise InputFileError(path, f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno) from None


def benchmark_from_run_name(name: str) -> str:
    """``aci_bench:model=openai_gpt-4o,subset=x`` -> ``aci_bench``."""
    return name.split(":", 1)[0].strip()


def _choose_reference(references: list[dict[str, Any]]) -> str | None:
    for ref in references:
        if "correct" in (ref.get("tags") or []):
            return (ref.get("output") or {}).get("text")
    if references:
        return (references[0].get("output") or {}).get("text")
    return None


def run_records(run: Path, report: ImportReport) -> list[ItemRecord]:
    """Items of one HELM run folder."""
    state_path = run / "scenario_state.json"
    state = _load_json(state_path)
    if not isinstance(state, dict) or not isinstance(state.get("request_states"), list):
        raise InputFileError(state_path, "no 'request_states' list", field="request_states")
    spec_path = run / "run_spec.json"
    run_spec = _load_json(spec_path) if spec_path.is_file() else {}
    benchmark = benchmark_from_run_name(str(run_spec.get("name") or run.name))
    adapter = state.get("adapter_spec") or run_spec.get("adapter_spec") or {}
    source = str(state_path)
    records: list[ItemRecord] = []
    for index, rs in enumerate(state["request_states"]):
        where = f"request_states[{index}]"
        if not isinstance(rs, dict) or not isinstance(rs.get("instance"), dict):
            raise InputFileError(source, "request state without an instance", field=where)
        instance = rs["instance"]
        if instance.get("split") not in EVAL_SPLITS:
            report.skip("not an evaluation split")
            continue
        if rs.get("train_trial_index", 0) != 0:
            report.skip("trial other than the first")
            continue
        if instance.get("perturbation"):
            report.skip("perturbed instance")
            continue
        completions = ((rs.get("result") or {}).get("completions")) or []
        if not completions or not isinstance(completions[0], dict) or "text" not in completions[0]:
            report.skip("no completion")
            continue
        instance_id = instance.get("id")
        if not instance_id:
            raise InputFileError(source, "instance without an id", field=f"{where}.instance.id")
        input_text = (instance.get("input") or {}).get("text")
        if not isinstance(input_text, str):
            raise InputFileError(source, "instance input has no text", field=f"{where}.instance.input.text")
        model = adapter.get("model") or (rs.get("request") or {}).get("model")
        if not model:
            raise InputFileError(source, "no model in the adapter spec or the request", field=f"{where}.request.model")
        records.append(
            ItemRecord(
                benchmark=benchmark,
                instance_id=str(instance_id),
                model=str(model),
                input_text=input_text,
                output_text=str(completions[0]["text"]),
                reference_text=_choose_reference(instance.get("references") or []),
                meta={
                    "source": "helm",
                    "run": run.name,
                    "suite": run.parent.name,
                    "split": instance.get("split"),
                    "model_deployment": adapter.get("model_deployment"),
                },
                source=source,
                line=None,
            )
        )
    return records


def helm_records(path: Path, report: ImportReport) -> list[ItemRecord]:
    """Items of a run folder or of every run in a suite folder."""
    records: list[ItemRecord] = []
    for run in run_folders(path):
        records.extend(run_records(run, report))
    if not records:
        raise InputFileError(path, "no evaluation request states with a completion were found")
    return records
