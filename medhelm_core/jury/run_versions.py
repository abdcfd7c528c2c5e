"""Which versions a jury run uses: chosen for a new run, read back from a stored one.

A new run's judges get a stored prompt template version (:mod:`medhelm_core.jury.templates`) and a version
of the study's rubric (:func:`medhelm_core.rubric.judge_rubric`); both, and the judges, are recorded in
``JuryRun.config``. :func:`run_versions` reads them back for tables, the CLI and per-version agreement;
:func:`stored_config` rebuilds a run's config, on the rubric version it used, to resume it;
:func:`preview_prompt` shows what the judges would get for one item before a run is paid for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from medhelm_core.db.audit import Actor
from medhelm_core.db.models import Item, JuryRun, RunSource, Study
from medhelm_core.errors import ValidationError
from medhelm_core.jury.config import JuryConfig, JuryFile, stored_prompt
from medhelm_core.jury.prompt import DEFAULT_TEMPLATE_NAME, RenderedPrompt, check_template, render_prompt
from medhelm_core.jury.templates import (
    TemplateVersion,
    find_template_by_text,
    get_template_version,
    template_for_text,
)
from medhelm_core.rubric import RubricSpec, judge_rubric
from medhelm_core.studies import study_item


@dataclass(frozen=True)
class RunVersions:
    """What a jury run used: its judges, the rubric version and the prompt template version."""

    run_id: int
    name: str
    source: str
    judges: tuple[str, ...]
    rubric_name: str | None
    rubric_version: int | None
    prompt_name: str | None
    prompt_version: int | None
    prompt_hash: str | None
    origin: str | None = None

    @property
    def recorded(self) -> bool:
        """Scores imported from elsewhere (such as MedHELM's published means): no judge was called here."""
        return self.source == RunSource.recorded

    @property
    def rubric_label(self) -> str:
        """``medhelm v2``, or ``unknown``."""
        if self.rubric_version is None:
            return "unknown"
        return f"{self.rubric_name} v{self.rubric_version}" if self.rubric_name else f"v{self.rubric_version}"

    @property
    def prompt_label(self) -> str:
        """``medhelm v2``; ``HELM's, kept with each verdict`` for verdicts imported from HELM run folders (each
        stored verdict holds the judge prompt it answered); ``not recorded`` for other imported scores;
        ``custom (not stored)`` for text that is no stored version; ``unknown`` when the run kept no template."""
        if self.recorded and self.prompt_version is None:
            return "HELM's, kept with each verdict" if self.origin == "helm" else "not recorded"
        if self.prompt_version is None and self.prompt_hash is None:
            return "unknown"
        if self.prompt_version is None:
            return f"{self.prompt_name or 'custom'} (not stored)"
        return f"{self.prompt_name} v{self.prompt_version}"

    @property
    def judges_label(self) -> str:
        """The judges joined with ``+``."""
        return " + ".join(self.judges) if self.judges else "no judges"

    @property
    def label(self) -> str:
        """One line naming the run by what it used: ``run 3: A + B; rubric medhelm v1; prompt medhelm v2``."""
        kind = " (recorded)" if self.recorded else ""
        return (f"run {self.run_id}{kind}: {self.judges_label}; rubric {self.rubric_label}; "
                f"prompt {self.prompt_label}")

    @property
    def short_label(self) -> str:
        """What tells runs apart at a glance (an axis label, a choice): the judges first, by their short names,
        then the prompt and rubric versions: ``run 3: gpt-4o + claude-3-7-sonnet (prompt medhelm v2, rubric
        medhelm v1)``. The judges' full names are in :attr:`label`.

        Examples
        --------
        >>> RunVersions(3, "x", "litellm", ("openai/gpt-4o-2024-05-13", "anthropic/claude-3-7-sonnet-20250219"),
        ...             "medhelm", 1, "medhelm", 2, None).short_label
        'run 3: gpt-4o + claude-3-7-sonnet (prompt medhelm v2, rubric medhelm v1)'
        """
        kind = " (recorded)" if self.recorded else ""
        return f"run {self.run_id}{kind}: {short_judge_names(self.judges)} (prompt {self.prompt_label}, " \
               f"rubric {self.rubric_label})"

    def to_dict(self) -> dict[str, Any]:
        """Plain data with the labels, for ``--json`` and tables."""
        return {
            "run_id": self.run_id, "name": self.name, "source": self.source, "judges": list(self.judges),
            "rubric_name": self.rubric_name, "rubric_version": self.rubric_version,
            "prompt_name": self.prompt_name, "prompt_version": self.prompt_version,
            "prompt_hash": self.prompt_hash, "origin": self.origin, "label": self.label,
        }


_DATE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")


def short_judge_names(judges: Sequence[str]) -> str:
    """The judges joined with `` + ``, each without its provider prefix and date stamp, unless two would then
    read the same (``openai/gpt-4o-2024-05-13`` and ``openai/gpt-4o-2024-08-06`` keep their dates).

    Examples
    --------
    >>> short_judge_names(["openai/gpt-4o-2024-05-13", "meta/llama-3.3-70b-instruct"])
    'gpt-4o + llama-3.3-70b-instruct'
    >>> short_judge_names(["openai/gpt-4o-2024-05-13", "openai/gpt-4o-2024-08-06"])
    'gpt-4o-2024-05-13 + gpt-4o-2024-08-06'
    >>> short_judge_names([])
    'no judges'
    """
    if not judges:
        return "no judges"
    bare = [j.rsplit("/", 1)[-1] for j in judges]
    short = [_DATE_SUFFIX.sub("", b) for b in bare]
    names = [s if short.count(s) == 1 else b for s, b in zip(short, bare, strict=True)]
    names = [n if names.count(n) == 1 else full for n, full in zip(names, judges, strict=True)]
    return " + ".join(names)


def run_versions(run: JuryRun, session: Session | None = None) -> RunVersions:
    """The judges, rubric version and prompt version a run recorded.

    A run stored before versions were recorded names no prompt version; with a ``session``, the stored
    version with the same text names it (the oldest such), since the text is what the judges saw.
    """
    config = dict(run.config or {})
    judges = tuple(j["model"] if isinstance(j, dict) else str(j) for j in config.get("judges") or [])
    rubric = config.get("rubric") or {}
    prompt_name, prompt_version = stored_prompt(config)
    text = config.get("prompt_template")
    if prompt_version is None and session is not None and isinstance(text, str):
        found = find_template_by_text(session, text)
        if found is not None:
            prompt_name, prompt_version = found.name, found.version
    version = rubric.get("version")
    return RunVersions(
        run_id=int(run.id),
        name=run.name,
        source=run.source,
        judges=judges,
        rubric_name=rubric.get("name"),
        rubric_version=int(version) if version is not None else None,
        prompt_name=prompt_name,
        prompt_version=prompt_version,
        prompt_hash=config.get("prompt_template_hash"),
        origin=config.get("origin"),
    )


def stored_config(session: Session, study: Study, run: JuryRun) -> JuryConfig:
    """A litellm run's stored config, rebuilt on the rubric version it used (to resume it)."""
    if run.source != RunSource.litellm:
        raise ValidationError(f"jury run {run.id} holds recorded scores; there are no judges to call")
    version = ((run.config or {}).get("rubric") or {}).get("version")
    rubric = judge_rubric(session, study, int(version) if version is not None else None)
    return JuryConfig.from_dict(run.config, rubric)


def choose_template(
    session: Session,
    *,
    name: str | None = None,
    version: int | None = None,
    jury_file: JuryFile | None = None,
    store: bool = True,
    actor: Actor = None,
) -> TemplateVersion | None:
    """The template version a new run's judges get.

    ``version`` of template ``name`` (default ``medhelm``; its latest when no version is given), or the
    template a ``jury.toml`` gives, which is stored as a version of ``name`` unless a version already holds
    its text. With ``store=False`` (a dry run) nothing is written and a file's unstored text gives None:
    the run would use the file's text, not yet a version.
    """
    if jury_file is not None and jury_file.prompt_source:
        if version is not None:
            raise ValidationError(
                f"the jury file gives a prompt template ({jury_file.prompt_source}); leave out --prompt-version, "
                "or remove the template from the file"
            )
        text = jury_file.prompt_template
        target = name or DEFAULT_TEMPLATE_NAME
        if not store:
            return find_template_by_text(session, text, target)
        return template_for_text(session, target, text, note=f"from {jury_file.prompt_source}", actor=actor)[0]
    return get_template_version(session, name or DEFAULT_TEMPLATE_NAME, version)


def preview_items(session: Session, study: Study) -> list[tuple[int, str]]:
    """The study's items as (id, ``benchmark / instance / model``), to choose one to preview a prompt on."""
    rows = session.exec(
        select(Item.id, Item.benchmark, Item.instance_id, Item.model).where(Item.study_id == study.id)
        .order_by(Item.id)
    ).all()
    return [(int(i), f"{benchmark} / {instance} / {model}") for i, benchmark, instance, model in rows]


def preview_prompt(session: Session, study: Study, item_id: int, template: str, rubric: RubricSpec) -> RenderedPrompt:
    """The prompt a judge would get for one item of ``study`` with ``template`` and ``rubric``.

    Raises :class:`~medhelm_core.errors.ValidationError` for a broken template, before anything is rendered.
    """
    check_template(template)
    item = study_item(session, study, item_id)
    return render_prompt(template, rubric, benchmark=item.benchmark, input_text=item.input_text,
                         output_text=item.output_text, reference_text=item.reference_text)
