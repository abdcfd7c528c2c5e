"""Rubrics as data: read a TOML or JSON rubric file, validate it, and store it.

A rubric file has ``name``, ``version``, ``title``, ``description`` and a list of ``criteria``, each with
``name``, ``label``, ``description``, ``scale = [min, max]`` and optional ``anchors`` (level -> text).
See ``annotations/rubrics/medhelm.toml``.

Versions for the jury: clinicians always rate on their study's rubric, but the judges may be shown another
version of it with new wording (labels, descriptions, anchors) and the same criteria and scales
(:func:`save_rubric_version`, :func:`compatible_rubric_versions`), so a change of wording can be judged
by its effect on agreement.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from medhelm_core.db.audit import Actor, record_event
from medhelm_core.db.models import AuditAction, Criterion, Rubric, Study
from medhelm_core.errors import InputFileError, NotFoundError, ValidationError

BUNDLED_RUBRICS = Path(__file__).resolve().parent.parent / "annotations" / "rubrics"
#: A rubric file is a page of text; anything much larger is not a rubric.
MAX_RUBRIC_BYTES = 1 * 2**20


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


#: A scale has at most this many points (0 to 10 is the widest clinical rating scale in use); a scale of
#: [1, 1e9] would give the Rate page a billion choices and the agreement statistics nonsense.
MAX_SCALE_POINTS = 11
#: Scale bounds stay within -100 to 100.
MAX_SCALE_BOUND = 100


def parse_rubric(data: dict[str, Any], source: str = "<rubric>") -> RubricSpec:
    """Validate a rubric mapping (as read from TOML or JSON) and return a :class:`RubricSpec`.

    Every problem is an :class:`InputFileError` naming the field: names short enough for their columns and
    free of control characters, texts the database can store, integer scales of at most
    :data:`MAX_SCALE_POINTS` points.
    """
    # imported here: the importers read rubrics, so a module-level import would be circular
    from medhelm_core.importers.values import check_identifier, check_text

    def need(mapping: dict[str, Any], key: str, where: str) -> Any:
        if key not in mapping:
            raise InputFileError(source, f"missing '{key}'", field=where)
        return mapping[key]

    def text(value: Any, where: str, max_length: int | None = None) -> str:
        if isinstance(value, (dict, list)):
            raise InputFileError(source, "expected text, found a table or list", field=where)
        value = str(value)
        if max_length is None:
            return check_text(value, source, None, where)
        return check_identifier(value.strip(), source, None, where, max_length)

    if not isinstance(data, dict):
        raise InputFileError(source, "a rubric must be a table (an object) with name and criteria")
    name = text(need(data, "name", "name"), "name", Rubric.__table__.c.name.type.length)
    if not name:
        raise InputFileError(source, "the rubric needs a name", field="name")
    raw_criteria = need(data, "criteria", "criteria")
    if not isinstance(raw_criteria, list) or not raw_criteria:
        raise InputFileError(source, "'criteria' must be a non-empty list", field="criteria")
    criteria: list[CriterionSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_criteria):
        where = f"criteria[{i}]"
        if not isinstance(raw, dict):
            raise InputFileError(source, "a criterion must be a table with name, label and scale", field=where)
        cname = text(need(raw, "name", f"{where}.name"), f"{where}.name", Criterion.__table__.c.name.type.length)
        if not cname or cname in seen:
            raise InputFileError(source, f"criterion name {cname!r} is empty or repeated", field=where)
        seen.add(cname)
        scale = raw.get("scale", [1, 5])
        if (
            not isinstance(scale, list)
            or len(scale) != 2
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in scale)
            or scale[0] >= scale[1]
        ):
            raise InputFileError(source, "scale must be [min, max] integers, min < max", field=f"{where}.scale")
        if scale[1] - scale[0] + 1 > MAX_SCALE_POINTS or max(abs(scale[0]), abs(scale[1])) > MAX_SCALE_BOUND:
            raise InputFileError(
                source, f"scale {scale} is too wide: at most {MAX_SCALE_POINTS} points, bounds within "
                f"-{MAX_SCALE_BOUND} to {MAX_SCALE_BOUND}", field=f"{where}.scale",
            )
        raw_anchors = raw.get("anchors") or {}
        if not isinstance(raw_anchors, dict):
            raise InputFileError(source, "anchors must be a table of level = text", field=f"{where}.anchors")
        anchors: dict[int, str] = {}
        for level, anchor in raw_anchors.items():
            try:
                lvl = int(level)
            except ValueError:
                raise InputFileError(source, f"anchor level {level!r} is not an integer", field=where) from None
            if not scale[0] <= lvl <= scale[1]:
                raise InputFileError(source, f"anchor level {lvl} is off the scale", field=where)
            anchors[lvl] = text(anchor, f"{where}.anchors.{level}")
        criteria.append(
            CriterionSpec(
                name=cname,
                label=text(raw.get("label") or cname.capitalize(), f"{where}.label",
                           Criterion.__table__.c.label.type.length),
                description=text(raw.get("description", ""), f"{where}.description"),
                scale_min=scale[0],
                scale_max=scale[1],
                anchors=anchors,
            )
        )
    version = data.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= 1_000_000:
        raise InputFileError(source, f"version {version!r} is not a whole number from 1", field="version")
    return RubricSpec(
        name=name,
        version=version,
        title=text(data.get("title", name), "title", Rubric.__table__.c.title.type.length),
        description=text(data.get("description", ""), "description"),
        criteria=tuple(criteria),
    )


def load_rubric_file(path: str | Path) -> RubricSpec:
    """Read a rubric from a ``.toml`` or ``.json`` file."""
    p = Path(path)
    if not p.is_file():
        raise InputFileError(p, "no such rubric file")
    if p.stat().st_size > MAX_RUBRIC_BYTES:
        raise InputFileError(p, f"is larger than {MAX_RUBRIC_BYTES // 2**10} KB; a rubric is a short text")
    try:
        text = p.read_text(encoding="utf-8")
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise InputFileError(p, f"not UTF-8 text (byte {exc.start})") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(p, f"cannot parse: {exc}") from None
    except RecursionError:
        raise InputFileError(p, "cannot parse: nested too deeply") from None
    except ValueError as exc:  # a number of thousands of digits
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


def version_differences(base: RubricSpec, other: RubricSpec) -> list[str]:
    """Why ``other`` cannot stand for ``base`` before the judges: each criterion added, missing or rescaled.

    Empty when ``other`` has the same name, the same criteria and the same scales (its wording may differ).

    Examples
    --------
    >>> base = default_rubric()
    >>> wider = replace(base, criteria=(replace(base.criteria[0], scale_max=10), *base.criteria[1:]))
    >>> version_differences(base, wider)
    ["criterion 'accuracy' has the scale 1 to 10; the study's rubric has 1 to 5"]
    """
    reasons: list[str] = []
    if other.name != base.name:
        reasons.append(f"it is rubric {other.name!r}; the study's rubric is {base.name!r}")
    mine = {c.name: c for c in other.criteria}
    for c in base.criteria:
        if c.name not in mine:
            reasons.append(f"criterion {c.name!r} of the study's rubric is missing")
        elif (mine[c.name].scale_min, mine[c.name].scale_max) != (c.scale_min, c.scale_max):
            m = mine[c.name]
            reasons.append(f"criterion {c.name!r} has the scale {m.scale_min} to {m.scale_max}; "
                           f"the study's rubric has {c.scale_min} to {c.scale_max}")
    known = set(base.criterion_names)
    reasons += [f"criterion {c.name!r} is not in the study's rubric" for c in other.criteria if c.name not in known]
    return reasons


def _same_wording(a: RubricSpec, b: RubricSpec) -> bool:
    return replace(a, version=0) == replace(b, version=0)


def compatible_rubric_versions(session: Session, study: Study) -> list[RubricSpec]:
    """Every stored version of the study's rubric that its judges may be shown, oldest first.

    A version is compatible when it has the study rubric's name, criteria and scales; the study's own
    version is always among them.
    """
    base = rubric_spec(session, study.rubric_id)
    rows = session.exec(select(Rubric).where(Rubric.name == base.name).order_by(Rubric.version)).all()
    specs = [rubric_spec(session, row) for row in rows]
    return [s for s in specs if not version_differences(base, s)]


def judge_rubric(session: Session, study: Study, version: int | None = None) -> RubricSpec:
    """The rubric version the judges of ``study`` see: ``version``, or the study's own when None.

    Raises
    ------
    NotFoundError
        No stored version ``version`` of the study's rubric.
    ValidationError
        The version exists but has other criteria or scales (the message names the criterion).
    """
    base = rubric_spec(session, study.rubric_id)
    if version is None or version == base.version:
        return base
    row = session.exec(select(Rubric).where(Rubric.name == base.name, Rubric.version == version)).first()
    if row is None:
        known = ", ".join(f"v{s.version}" for s in compatible_rubric_versions(session, study))
        raise NotFoundError(f"rubric {base.name} has no version {version} (versions for this study: {known})")
    spec = rubric_spec(session, row)
    reasons = version_differences(base, spec)
    if reasons:
        raise ValidationError(f"rubric {base.name} v{version} cannot be shown to this study's judges: {reasons[0]}")
    return spec


def save_rubric_version(
    session: Session, study: Study, spec: RubricSpec, actor: Actor = None
) -> tuple[RubricSpec, bool]:
    """Store ``spec`` (new wording of the study's rubric) as the next version of that rubric.

    The criteria's names and scales must be those of the study's rubric; labels, descriptions, anchors,
    title and description may change. ``spec.version`` is ignored: the version is the next free one. A
    wording already stored as a version is not stored again. Clinicians keep rating on the study's own
    rubric; only judges are shown the new version, when a jury run asks for it.

    Parameters
    ----------
    session : Session
        The caller's session (the version and its ``rubric.version_saved`` audit event commit with it).
    study : Study
        The study whose rubric this is a version of.
    spec : RubricSpec
        The new wording, for example from :func:`load_rubric_file`.
    actor
        Who saved it, for the audit trail.

    Returns
    -------
    tuple of (RubricSpec, bool)
        The stored version and whether it was created now.

    Raises
    ------
    ValidationError
        A criterion is missing, added or rescaled, or the rubric has another name; the message names it.

    Examples
    --------
    >>> base = rubric_spec(session, study.rubric_id)  # doctest: +SKIP
    >>> clearer = replace(base, criteria=(replace(base.criteria[0], description="Is it correct?"),
    ...                                   *base.criteria[1:]))  # doctest: +SKIP
    >>> save_rubric_version(session, study, clearer, actor="cli")[0].version  # doctest: +SKIP
    2
    """
    base = rubric_spec(session, study.rubric_id)
    reasons = version_differences(base, spec)
    if reasons:
        raise ValidationError(f"this is not a version of the study's rubric {base.name}: {'; '.join(reasons)}")
    for existing in compatible_rubric_versions(session, study):
        if _same_wording(existing, spec):
            return existing, False
    last = session.exec(select(Rubric.version).where(Rubric.name == base.name).order_by(Rubric.version.desc())).first()
    stored = replace(spec, version=int(last or 0) + 1)
    store_rubric(session, stored)
    record_event(session, AuditAction.rubric_version_saved, actor=actor, study_id=study.id, name=stored.name,
                 version=stored.version, based_on=base.version)
    return stored, True
