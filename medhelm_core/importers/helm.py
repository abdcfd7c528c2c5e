"""Read HELM run folders (``benchmark_output/runs/<suite>/<run>/``): items, and what HELM said of them.

A run folder holds ``scenario_state.json`` (the adapter spec and one request state per instance and
trial) and ``run_spec.json`` (whose ``name``, such as ``aci_bench:model=openai_gpt-4o``, gives the
benchmark). One item is made per request state of an evaluation split (valid or test), trial 0, with no
perturbation: the instance input, the model's first completion, the reference tagged ``correct`` (else the
first reference), and the model from the adapter spec (else the request).

When MedHELM's jury scored the run, each request state also carries ``annotations.<benchmark>``: the judge
prompt and one verdict per judge (:mod:`~medhelm_core.importers.helm_jury`); ``per_instance_stats.json``
holds HELM's own metrics per instance (:mod:`~medhelm_core.importers.helm_metrics`). Both are read here
with the items, checked before anything is written, and stored beside them as recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medhelm_core.errors import InputFileError
from medhelm_core.importers.helm_jury import ItemJury, annotator_models, read_item_jury
from medhelm_core.importers.helm_metrics import InstanceStats, read_instance_stats
from medhelm_core.importers.limits import ReadBudget
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


@dataclass
class HelmRun:
    """One run folder as read: its items, the jury's verdicts on them and HELM's per-instance metrics."""

    folder: Path
    #: the suite folder the run sits in (``benchmark_output/runs/<suite>``): a recorded jury run per suite
    suite: str
    records: list[ItemRecord] = field(default_factory=list)
    #: one per item whose request state carries a jury block, in the order of the items
    juries: list[ItemJury] = field(default_factory=list)
    #: HELM's metric values per instance id, and the settings they were computed with (None: no stats file)
    stats: InstanceStats | None = None
    #: judge key -> model name, as the run spec's annotator specs name them (newer HELM versions do)
    judge_models: dict[str, str] = field(default_factory=dict)
    #: the annotator classes of the run spec, recorded with the jury run
    annotators: list[str] = field(default_factory=list)


def _load_json(path: Path, budget: ReadBudget) -> Any:
    budget.expect_file(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc.strerror}") from None
    budget.take_bytes(path, len(raw))
    if not raw.strip():
        raise InputFileError(path, "the file is empty")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputFileError(path, "not UTF-8 text", line=line) from None
    except json.JSONDecodeError as exc:
        raise InputFileError(path, f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno) from None
    except RecursionError:
        raise InputFileError(path, "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # an integer of thousands of digits
        raise InputFileError(path, f"invalid JSON: {exc}") from None


def _object(value: Any, source: str, field: str) -> dict[str, Any]:
    """``value`` as a JSON object; absent (null) is empty, any other type is refused naming ``field``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputFileError(source, f"expected an object, found {_kind(value)}", field=field)
    return value


def _list(value: Any, source: str, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputFileError(source, f"expected a list, found {_kind(value)}", field=field)
    return value


def _text(value: Any, source: str, field: str) -> str:
    if not isinstance(value, str):
        raise InputFileError(source, f"expected text, found {_kind(value)}", field=field)
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(value), "a number"
    )


def benchmark_from_run_name(name: str) -> str:
    """``aci_bench:model=openai_gpt-4o,subset=x`` -> ``aci_bench``."""
    return name.split(":", 1)[0].strip()


def _choose_reference(references: list[Any], source: str, where: str) -> str | None:
    chosen: Any = None
    for index, ref in enumerate(references):
        ref = _object(ref, source, f"{where}.instance.references[{index}]")
        tags = _list(ref.get("tags"), source, f"{where}.instance.references[{index}].tags")
        if "correct" in tags or (index == 0 and chosen is None):
            chosen = (index, ref)
            if "correct" in tags:
                break
    if chosen is None:
        return None
    index, ref = chosen
    text = _object(ref.get("output"), source, f"{where}.instance.references[{index}].output").get("text")
    return None if text is None else _text(text, source, f"{where}.instance.references[{index}].output.text")


def read_run(run: Path, report: ImportReport, budget: ReadBudget | None = None) -> HelmRun:
    """Items of one HELM run folder, with the jury's verdicts and HELM's metrics where the folder has them."""
    budget = budget or ReadBudget()
    state_path = run / "scenario_state.json"
    state = _load_json(state_path, budget)
    if not isinstance(state, dict) or not isinstance(state.get("request_states"), list):
        raise InputFileError(state_path, "no 'request_states' list", field="request_states")
    spec_path = run / "run_spec.json"
    run_spec = _object(_load_json(spec_path, budget) if spec_path.is_file() else {}, str(spec_path), "(the file)")
    name = run_spec.get("name") or run.name
    benchmark = benchmark_from_run_name(_text(name, str(spec_path), "name"))
    source = str(state_path)
    adapter = _object(state.get("adapter_spec"), source, "adapter_spec") or _object(
        run_spec.get("adapter_spec"), str(spec_path), "adapter_spec"
    )
    models, annotators = annotator_models(run_spec, str(spec_path))
    out = HelmRun(folder=run, suite=run.parent.name, judge_models=models, annotators=annotators)
    records = out.records
    for index, rs in enumerate(state["request_states"]):
        where = f"request_states[{index}]"
        if not isinstance(rs, dict) or not isinstance(rs.get("instance"), dict):
            raise InputFileError(source, "request state without an instance", field=where)
        instance = rs["instance"]
        split = instance.get("split")
        if not isinstance(split, str) or split not in EVAL_SPLITS:
            report.skip("not an evaluation split")
            continue
        if rs.get("train_trial_index", 0) != 0:
            report.skip("trial other than the first")
            continue
        if instance.get("perturbation"):
            report.skip("perturbed instance")
            continue
        result = _object(rs.get("result"), source, f"{where}.result")
        completions = _list(result.get("completions"), source, f"{where}.result.completions")
        if not completions or not isinstance(completions[0], dict) or "text" not in completions[0]:
            report.skip("no completion")
            continue
        output = _text(completions[0]["text"], source, f"{where}.result.completions[0].text")
        instance_id = instance.get("id")
        if instance_id is None or instance_id == "":
            raise InputFileError(source, "instance without an id", field=f"{where}.instance.id")
        if isinstance(instance_id, bool) or not isinstance(instance_id, (str, int)):
            raise InputFileError(source, f"an id must be text or a whole number, found {_kind(instance_id)}",
                                 field=f"{where}.instance.id")
        input_text = _object(instance.get("input"), source, f"{where}.instance.input").get("text")
        if not isinstance(input_text, str):
            raise InputFileError(source, "instance input has no text", field=f"{where}.instance.input.text")
        request = _object(rs.get("request"), source, f"{where}.request")
        model = adapter.get("model") or request.get("model")
        if not model:
            raise InputFileError(source, "no model in the adapter spec or the request", field=f"{where}.request.model")
        model = _text(model, source, "adapter_spec.model" if adapter.get("model") else f"{where}.request.model")
        references = _list(instance.get("references"), source, f"{where}.instance.references")
        budget.take_row(source)
        jury = read_item_jury(rs, benchmark, model, source, where, str(instance_id))
        if jury is not None:
            out.juries.append(jury)
        records.append(
            ItemRecord(
                benchmark=benchmark,
                instance_id=str(instance_id),
                model=model,
                input_text=input_text,
                output_text=output,
                reference_text=_choose_reference(references, source, where),
                meta={
                    "source": "helm",
                    "run": run.name,
                    "suite": run.parent.name,
                    "split": split,
                    "model_deployment": adapter.get("model_deployment"),
                },
                source=source,
                line=None,
                at=f"{where}.",
            )
        )
    stats_path = run / "per_instance_stats.json"
    if records and stats_path.is_file():
        wanted = {rec.instance_id for rec in records}
        out.stats = read_instance_stats(_load_json(stats_path, budget), str(stats_path), run_spec, wanted)
    return out


def helm_runs(path: Path, report: ImportReport, budget: ReadBudget | None = None) -> list[HelmRun]:
    """A run folder, or every run in a suite folder, as read by :func:`read_run`."""
    budget = budget or ReadBudget()
    runs = [read_run(run, report, budget) for run in run_folders(path)]
    if not any(run.records for run in runs):
        raise InputFileError(path, "no evaluation request states with a completion were found")
    return runs
