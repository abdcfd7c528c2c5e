"""Rubrics as data: read a TOML or JSON rubric file, validate it, and store it.

A rubric file has ``name``, ``version``, ``title``, ``description`` and a list of ``criteria``, each with
``name``, ``label``, ``description``, ``scale = [min, max]`` and optional ``anchors`` (level -> text).
See ``annotations/rubrics/medhelm.toml``.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from medhelm_core.errors import InputFileError, NotFoundError, ValidationError
from medhelm_core.models import Criterion, Rubric

BUNDLED_RUBRICS = Path(__file__).resolve().parent.parent / "annotations" / "rubrics"


@dataclass(frozen=True)
class CriterionSpec:
    """One criterion: a name, its integer scale and a text per level."""

    name: str
    label: str
    description: str
    scale_min: int
    scale_max: int
    anchors: dict[int, str] = field(default_factory=dict, hash=False)

    def check_score(self, score: Any) -> int:
        """Return ``score`` as an int if it is a whole number on this criterion's scale, else raise."""
        if isinstance(score, bool):
            raise ValidationError(f"{self.name}: {score!r} is not a score")
        try:
            value = float(score)
        except (TypeError, ValueError):
            raise ValidationError(f"{self.name}: {score!r} is not a number") from None
        if value != value or not value.is_integer():
            raise ValidationError(f"{self.name}: {score!r} is not a whole number")
        if not self.scale_min <= value <= self.scale_max:
            raise ValidationError(
                f"{self.name}: {int(value)} is outside the scale {self.scale_min} to {self.scale_max}"
            )
        return int(value)


@dataclass(frozen=True)
class RubricSpec:
    """A rubric as plain, hashable data (what a jury config and a report refer to)."""

    name: str
    version: int
    title: str
    description: str
    criteria: tuple[CriterionSpec, ...]

    @property
    def criterion_names(self) -> list[str]:
        return [c.name for c in self.criteria]

    def criterion(self, name: str) -> CriterionSpec:
        for c in self.criteria:
            if c.name == name:
                return c
        raise ValidationError(f"rubric {self.name} has no criterion {name!r}")


def parse_rubric(data: dict[str, Any], source: str = "<rubric>") -> RubricSpec:
    """Validate a rubric mapping (as read from TOML or JSON) and return a :class:`RubricSpec`."""

    def need(mapping: dict[str, Any], key: str, where: str) -> Any:
        if key not in mapping:
            raise InputFileError(source, f"missing '{key}'", field=where)
        return mapping[key]

    name = str(need(data, "name", "name")).strip()
    if not name:
        raise InputFileError(source, "the rubric needs a name", field="name")
    raw_criteria = need(data, "criteria", "criteria")
    if not isinstance(raw_criteria, list) or not raw_criteria:
        raise InputFileError(source, "'criteria' must be a non-empty list", field="criteria")
    criteria: list[CriterionSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_criteria):
        where = f"criteria[{i}]"
        cname = str(need(raw, "name", f"{where}.name")).strip()
        if not cname or cname in seen:
            raise InputFileError(source, f"criterion name {cname!r} is empty or repeated", field=where)
        seen.add(cname)
        scale = raw.get("scale", [1, 5])
        if (
            not isinstance(scale, list)
            or len(scale) != 2
            or not all(isinstance(s, int) for s in scale)
            or scale[0] >= scale[1]
        ):
            raise InputFileError(source, "scale must be [min, max] integers, min < max", field=f"{where}.scale")
        anchors: dict[int, str] = {}
        for level, text in (raw.get("anchors") or {}).items():
            try:
                lvl = int(level)
            except ValueError:
                raise InputFileError(source, f"anchor level {level!r} is not an integer", field=where) from None
            if not scale[0] <= lvl <= scale[1]:
                raise InputFileError(source, f"anchor level {lvl} is off the scale", field=where)
            anchors[lvl] = str(text)
        criteria.append(
            CriterionSpec(
                name=cname,
                label=str(raw.get("label") or cname.capitalize()),
                description=str(raw.get("description", "")),
                scale_min=scale[0],
                scale_max=scale[1],
                anchors=anchors,
            )
        )
    return RubricSpec(
        name=name,
        version=int(data.get("version", 1)),
        title=str(data.get("title", name)),
        description=str(data.get("description", "")),
        criteria=tuple(criteria),
    )


def load_rubric_file(path: str | Path) -> RubricSpec:
    """Read a rubric from a ``.toml`` or ``.json`` file."""
    p = Path(path)
    if not p.is_file():
        raise InputFileError(p, "no such rubric file")
    try:
        text = p.read_text(encoding="utf-8")
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise InputFileError(p, f"not UTF-8 text (byte {exc.start})") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(p, f"cannot parse: {exc}") from None
    return parse_rubric(data, str(p))


def default_rubric() -> RubricSpec:
    """MedHELM's accuracy / completeness / clarity rubric, bundled in annotations/rubrics."""
    return load_rubric_file(BUNDLED_RUBRICS / "medhelm.toml")


def store_rubric(session: Session, spec: RubricSpec) -> Rubric:
    """Return the stored rubric with this name and version, creating it if new.

    A stored rubric is immutable: storing a different definition under an existing name and version is
    refused, so that ratings always refer to the criteria they were made on.
    """
    existing = session.exec(
        select(Rubric).where(Rubric.name == spec.name, Rubric.version == spec.version)
    ).first()
    if existing is not None:
        if rubric_spec(session, existing) != spec:
            raise ValidationError(
                f"rubric {spec.name} version {spec.version} is already stored with other criteria; "
                "give the changed rubric a new version"
            )
        return existing
    rubric = Rubric(name=spec.name, version=spec.version, title=spec.title, description=spec.description)
    session.add(rubric)
    session.flush()
    for pos, c in enumerate(spec.criteria):
        session.add(
            Criterion(
                rubric_id=rubric.id,
                name=c.name,
                label=c.label,
                description=c.description,
                scale_min=c.scale_min,
                scale_max=c.scale_max,
                position=pos,
                anchors={str(k): v for k, v in c.anchors.items()},
            )
        )
    session.flush()
    return rubric


def rubric_spec(session: Session, rubric: Rubric | int) -> RubricSpec:
    """Read a stored rubric back as a :class:`RubricSpec`."""
    row = session.get(Rubric, rubric) if isinstance(rubric, int) else rubric
    if row is None:
        raise NotFoundError(f"no rubric with id {rubric}")
    rows = session.exec(
        select(Criterion).where(Criterion.rubric_id == row.id).order_by(Criterion.position)
    ).all()
    return RubricSpec(
        name=row.name,
        version=row.version,
        title=row.title,
        description=row.description,
        criteria=tuple(
            CriterionSpec(
                name=c.name,
                label=c.label,
                description=c.description,
                scale_min=c.scale_min,
                scale_max=c.scale_max,
                anchors={int(k): v for k, v in c.anchors.items()},
            )
            for c in rows
        ),
    )
