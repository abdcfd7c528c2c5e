"""MedHELM's jury in HELM run folders, read into a recorded jury run.

MedHELM's LLM-jury annotators write, under ``annotations.<benchmark>`` of each request state in
``scenario_state.json``, the judge prompt (``prompt_text``) and one verdict per judge (``gpt``, ``llama``,
``claude``), each a score and an explanation per criterion::

    "annotations": {"medication_qa": {"prompt_text": "You are a medical expert ...",
                                      "gpt": {"accuracy": {"score": 5, "explanation": "..."}, ...},
                                      "llama": {...}, "claude": null}}

Every verdict of a suite's runs becomes one :class:`~medhelm_core.db.models.JudgeVerdict` of one recorded
jury run per suite (one jury over all the suite's items, as the agreement engine reads one run at a time),
with its scores, explanations and the judge prompt as evidence. A verdict is read by the same parser as a
live judge's answer (:func:`~medhelm_core.jury.parse.parse_verdict`) against the study's rubric; one that
holds no usable score (``null``, prose, a score off the scale), or a judge the file has for other items of
the run but not for this one, is stored as failed with the reason, and counted, never scored.

Judges are named as in the file, or as the run spec's annotator specs name their models (newer HELM
versions record ``annotator_models``), or as the importer is told (``--judge-name gpt=openai/gpt-4o``).

A block that is not what HELM writes (an ``annotations`` that is no object, a prompt that is no text, a judge
key that cannot be a name) is refused with the file, the instance and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlmodel import Session

from medhelm_core.db.models import JudgeVerdict, JuryRun, RunSource, Study, VerdictStatus
from medhelm_core.errors import InputFileError, ValidationError
from medhelm_core.importers.recorded import (
    RecordedVerdict,
    recorded_run,
    sha256_json,
    update_config,
    write_recorded_verdicts,
)
from medhelm_core.importers.records import ImportReport
from medhelm_core.importers.values import check_identifier, check_text
from medhelm_core.rubric import RubricSpec

if TYPE_CHECKING:
    from medhelm_core.db.models import Item
    from medhelm_core.importers.helm import HelmRun

PROMPT_KEY = "prompt_text"
#: how long a judge's name may be: the column's length
JUDGE_NAME_LENGTH = JudgeVerdict.__table__.c["judge"].type.length
#: how long a suite's name may be in a run's name (the column holds 200 characters)
MAX_SUITE_NAME = 150
MISSING_VERDICT = "the file holds no verdict from this judge for this item"
NULL_VERDICT = "the file records no verdict from this judge (null: HELM could not read its answer)"


@dataclass(frozen=True)
class ItemJury:
    """The jury block of one item's request state: the judge prompt and each judge's verdict as in the file."""

    key: tuple[str, str, str]
    prompt: str
    verdicts: dict[str, Any] = field(hash=False)


def _malformed(source: str, instance_id: str, field_name: str, message: str) -> InputFileError:
    return InputFileError(source, f"instance {instance_id!r}: {message}", field=field_name)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(value), "a number"
    )


def read_item_jury(
    state: dict[str, Any], benchmark: str, model: str, source: str, where: str, instance_id: str
) -> ItemJury | None:
    """The jury block of request state ``state`` (at ``where`` in ``source``), or None when it has none.

    The block is ``annotations.<benchmark>``, else the one annotation that holds a ``prompt_text``.
    """
    annotations = state.get("annotations")
    if annotations is None:
        return None
    if not isinstance(annotations, dict):
        raise _malformed(source, instance_id, f"{where}.annotations",
                         f"expected an object of annotations, found {_kind(annotations)}")
    name = benchmark if benchmark in annotations else None
    if name is None:
        juries = [k for k, v in annotations.items() if isinstance(v, dict) and PROMPT_KEY in v]
        if len(juries) > 1:
            raise _malformed(source, instance_id, f"{where}.annotations",
                             f"holds {len(juries)} jury blocks ({', '.join(map(str, juries[:5]))}) and none named "
                             f"after the benchmark {benchmark!r}")
        if not juries:
            return None
        name = juries[0]
    block = annotations[name]
    at = f"{where}.annotations.{name}"
    if block is None:
        return ItemJury((benchmark, instance_id, model), "", {})
    if not isinstance(block, dict):
        raise _malformed(source, instance_id, at, f"expected the jury's object (prompt_text and one verdict per "
                         f"judge), found {_kind(block)}")
    prompt = block.get(PROMPT_KEY, "")
    if prompt is None:
        prompt = ""
    if not isinstance(prompt, str):
        raise _malformed(source, instance_id, f"{at}.{PROMPT_KEY}", f"expected text, found {_kind(prompt)}")
    try:
        check_text(prompt, source, None, f"{at}.{PROMPT_KEY}")
        for judge in block:
            if judge != PROMPT_KEY:
                if not str(judge).strip():
                    raise InputFileError(source, "a judge's key is empty", field=f"{at} (a judge's key)")
                check_identifier(str(judge), source, None, f"{at} (a judge's key)", JUDGE_NAME_LENGTH)
    except InputFileError as exc:
        raise _malformed(source, instance_id, exc.field or at, exc.reason) from None
    verdicts = {str(judge): value for judge, value in block.items() if judge != PROMPT_KEY}
    return ItemJury((benchmark, instance_id, model), prompt, verdicts)


def annotator_models(run_spec: Mapping[str, Any], source: str) -> tuple[dict[str, str], list[str]]:
    """The judges' model names the run spec's annotator specs give (``args.annotator_models``), and the
    annotator classes: ``({"gpt": "openai/gpt-4o-2024-05-13", ...}, ["helm....MedicationQAAnnotator"])``.

    HELM versions before annotator models were configurable record neither (their annotators name the
    models in code), which gives an empty mapping: the judges keep the file's names unless told otherwise.
    """
    specs = run_spec.get("annotators")
    if specs is None:
        return {}, []
    if not isinstance(specs, list):
        raise InputFileError(source, f"expected a list, found {_kind(specs)}", field="annotators")
    models: dict[str, str] = {}
    classes: list[str] = []
    for index, spec in enumerate(specs):
        at = f"annotators[{index}]"
        if not isinstance(spec, dict):
            raise InputFileError(source, f"expected an object, found {_kind(spec)}", field=at)
        if isinstance(spec.get("class_name"), str):
            classes.append(check_text(spec["class_name"], source, None, f"{at}.class_name"))
        args = spec.get("args") or {}
        found = args.get("annotator_models") if isinstance(args, dict) else None
        if found is None:
            continue
        if not isinstance(found, dict):
            raise InputFileError(source, f"expected an object, found {_kind(found)}",
                                 field=f"{at}.args.annotator_models")
        for key, info in found.items():
            name = info.get("model_name") if isinstance(info, dict) else info
            where = f"{at}.args.annotator_models.{key}"
            if not isinstance(name, str) or not name.strip():
                raise InputFileError(source, "expected a model_name (text)", field=where)
            check_identifier(name, source, None, where, JUDGE_NAME_LENGTH)
            if models.setdefault(str(key), name) != name:
                raise InputFileError(source, f"names judge {key!r} both {models[str(key)]!r} and {name!r}", field=where)
    return models, classes


def parse_judge_names(pairs: Sequence[str]) -> dict[str, str]:
    """``["gpt=openai/gpt-4o-2024-05-13"]`` -> ``{"gpt": "openai/gpt-4o-2024-05-13"}`` (``--judge-name``).

    Examples
    --------
    >>> parse_judge_names(["gpt=openai/gpt-4o-2024-05-13", " claude = anthropic/claude-3-7-sonnet-20250219 "])
    {'gpt': 'openai/gpt-4o-2024-05-13', 'claude': 'anthropic/claude-3-7-sonnet-20250219'}
    """
    names: dict[str, str] = {}
    for pair in pairs:
        key, sep, name = pair.partition("=")
        key, name = key.strip(), name.strip()
        if not sep or not key or not name:
            raise ValidationError(f"--judge-name expects KEY=NAME (the judge's key in the file, then its name), "
                                  f"got {pair!r}")
        if key in names and names[key] != name:
            raise ValidationError(f"--judge-name names judge {key!r} twice ({names[key]!r} and {name!r})")
        check_identifier(name, "--judge-name", None, key, JUDGE_NAME_LENGTH)
        names[key] = name
    return names


def judge_verdict(value: Any, prompt: str, rubric: RubricSpec) -> tuple[dict[str, Any], str | None]:
    """One judge's verdict as the file holds it, read against ``rubric``: the stored fields, and the reason
    it holds no usable score (None when it does).

    An object is read as the JSON answer it was parsed from; text as a judge's raw answer (prose with no
    verdict in it fails); ``null`` is the judge HELM could not read.

    Examples
    --------
    >>> from medhelm_core.rubric import default_rubric
    >>> ok, reason = judge_verdict({c: {"score": 4, "explanation": "fine"} for c in
    ...                             ("accuracy", "completeness", "clarity")}, "prompt", default_rubric())
    >>> ok["scores"], reason
    ({'accuracy': 4, 'completeness': 4, 'clarity': 4}, None)
    >>> judge_verdict("The response is accurate and clear.", "prompt", default_rubric())[1]
    'no JSON object was found in the answer'
    """
    from medhelm_core.jury.parse import VerdictParseError, parse_verdict  # the jury package loads pandas

    if value is None:
        return {"raw_response": "null"}, NULL_VERDICT
    if isinstance(value, str):
        raw, answer = value, value
    elif isinstance(value, dict):
        try:
            answer = raw = json.dumps(value, ensure_ascii=False)
        except (RecursionError, ValueError):
            return {"raw_response": ""}, "the verdict is nested too deeply to read"
    else:
        try:
            raw = json.dumps(value)
        except (RecursionError, ValueError):
            raw = ""
        return {"raw_response": raw}, (
            f"a verdict must be an object of scores (or a judge's answer as text), found {_kind(value)}")
    if not _storable(raw):
        raw = json.dumps(value, ensure_ascii=True)
        return {"raw_response": raw}, "the verdict holds a character that cannot be stored (NUL or a lone surrogate)"
    try:
        # Text is a judge's raw answer, in which a verdict copied from the prompt (one the output carries) is
        # quoted material; an object is the verdict HELM already read from the answer.
        parsed = parse_verdict(answer, rubric, prompt_text=prompt if isinstance(value, str) else "")
    except VerdictParseError as exc:
        return {"raw_response": raw}, exc.reason
    if not all(_storable(text) for text in parsed.explanations.values()):
        return {"raw_response": raw}, "an explanation holds a character that cannot be stored"
    return {"raw_response": raw, "scores": dict(parsed.scores), "explanations": dict(parsed.explanations)}, None


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def judge_keys(runs: Sequence[HelmRun]) -> set[str]:
    """Every judge key the runs' jury blocks hold."""
    return {judge for run in runs for jury in run.juries for judge in jury.verdicts}


def _run_name(suite: str) -> str:
    return f"MedHELM jury (recorded), HELM suite {suite}"


def _judge_names(suite_runs: list[HelmRun], keys: list[str], given: Mapping[str, str]) -> dict[str, str]:
    """Each judge key's name: as given (``--judge-name``), else as the run specs name it, else the key."""
    names: dict[str, str] = {}
    for key in keys:
        from_specs = {run.judge_models[key] for run in suite_runs if key in run.judge_models}
        if key in given:
            names[key] = given[key]
        elif len(from_specs) > 1:
            raise ValidationError(f"the run specs of suite {suite_runs[0].suite!r} name judge {key!r} "
                                  f"{' and '.join(sorted(from_specs))}; name it with --judge-name {key}=NAME")
        else:
            names[key] = from_specs.pop() if from_specs else key
    taken: dict[str, str] = {}
    for key, name in names.items():
        if name in taken:
            raise ValidationError(f"judges {taken[name]!r} and {key!r} would both be named {name!r}; give each "
                                  "its own name (--judge-name KEY=NAME)")
        taken[name] = key
    return names


def _check_stored_names(run: JuryRun, names: Mapping[str, str]) -> dict[str, str]:
    stored = dict((run.config or {}).get("judge_names") or {})
    for key, name in names.items():
        if key in stored and stored[key] != name:
            raise ValidationError(
                f"the recorded jury run {run.name!r} names judge {key!r} {stored[key]!r}, this import names it "
                f"{name!r}; import with the same names (--judge-name {key}={stored[key]}) or into a new study"
            )
    return {**stored, **names}


def store_helm_juries(
    session: Session,
    study: Study,
    rubric: RubricSpec,
    runs: Sequence[HelmRun],
    items: Mapping[tuple[str, str, str], Item],
    report: ImportReport,
    judge_names: Mapping[str, str] | None = None,
) -> None:
    """Store the jury blocks of ``runs`` as one recorded jury run per suite, in the caller's transaction.

    Each item of a run whose request states carry a jury gets a verdict from each of that run's judges:
    read from the file, or failed when the file holds none for it. Re-importing the same folders writes
    nothing; naming a judge otherwise than the stored run does is refused.
    """
    given = dict(judge_names or {})
    suites: dict[str, list[HelmRun]] = {}
    for run in runs:
        if run.juries:
            suites.setdefault(run.suite, []).append(run)
    for suite, suite_runs in suites.items():
        if len(suite) > MAX_SUITE_NAME:
            raise InputFileError(suite_runs[0].folder.parent, f"the suite's name is longer than {MAX_SUITE_NAME} "
                                 "characters; rename the folder")
        keys = list(dict.fromkeys(judge for run in suite_runs for jury in run.juries for judge in jury.verdicts))
        names = _judge_names(suite_runs, keys, given)
        annotators = sorted({a for run in suite_runs for a in run.annotators})
        config = {
            "source": RunSource.recorded.value,
            "origin": "helm",
            "description": "The verdicts MedHELM's jury gave in HELM's run folders (annotations in "
                           "scenario_state.json); no judge was called by this app",
            "suite": suite,
            "judges": list(names.values()),
            "judge_names": names,
            "annotators": annotators,
            "aggregation": "mean over the judges whose verdict was read",
            "rubric": {"name": rubric.name, "version": rubric.version},
        }
        run, created = recorded_run(session, study, _run_name(suite), config)
        if not created:
            names = _check_stored_names(run, names)
            stored = dict(run.config or {})
            update_config(session, run, {
                **config, "judges": list(names.values()), "judge_names": names,
                "annotators": sorted(set(annotators) | set(stored.get("annotators") or [])),
            })
        cache_key = sha256_json({"source": RunSource.recorded.value, "origin": "helm", "study": study.id,
                                 "run": run.name})
        write_recorded_verdicts(session, run, _verdicts(suite_runs, items, names, rubric), report, cache_key)


def _verdicts(
    runs: list[HelmRun], items: Mapping[tuple[str, str, str], Item], names: Mapping[str, str], rubric: RubricSpec
) -> list[RecordedVerdict]:
    out: list[RecordedVerdict] = []
    for run in runs:
        keys = list(dict.fromkeys(judge for jury in run.juries for judge in jury.verdicts))
        juries = {jury.key: jury for jury in run.juries}
        for rec in run.records:
            jury = juries.get(rec.key)
            for key in keys:
                item_id = int(items[rec.key].id)
                if jury is None or key not in jury.verdicts:
                    out.append(RecordedVerdict(item_id, names[key], VerdictStatus.failed.value,
                                               prompt=jury.prompt if jury else "", error=MISSING_VERDICT))
                    continue
                fields, reason = judge_verdict(jury.verdicts[key], jury.prompt, rubric)
                status = VerdictStatus.ok.value if reason is None else VerdictStatus.failed.value
                out.append(RecordedVerdict(item_id, names[key], status, prompt=jury.prompt, error=reason, **fields))
    return out
