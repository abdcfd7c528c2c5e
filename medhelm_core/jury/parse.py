"""Read a judge's answer into scores: strict JSON first, then the judge's own final JSON object.

MedHELM finds the verdict with a greedy regex, so a model output that itself holds a JSON verdict (and a
judge that quotes it) can decide the parse. Here:

1. the whole answer is tried as one JSON object (what the prompt asks for);
2. otherwise every fenced block the judge echoed back (``<response_...>...</response_...>``) is discarded,
   the rest is scanned left to right for complete top-level JSON objects with a real JSON decoder (never a
   regex), and the **last** object that has the verdict's shape is taken: the judge's own final answer,
   whether in prose or in a code fence. An earlier object never stands in for a later one that fails;
3. every criterion needs a whole-number score on its scale, else the answer is refused with a reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from medhelm_core.errors import ValidationError
from medhelm_core.rubric import RubricSpec

#: Longer answers are cut before scanning; a verdict is a few hundred characters.
MAX_ANSWER_CHARS = 200_000
_DECODER = json.JSONDecoder()


class VerdictParseError(ValueError):
    """A judge's answer that holds no usable verdict; ``reason`` says why (it goes in the reminder)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ParsedVerdict:
    """Scores and explanations per criterion, and how the verdict was found."""

    scores: dict[str, int] = field(hash=False)
    explanations: dict[str, str] = field(hash=False)
    method: str = "strict"


def _strip_echoes(text: str, fence_tags: tuple[str, ...]) -> str:
    for tag in fence_tags:
        text = re.sub(rf"<{re.escape(tag)}>.*?</{re.escape(tag)}>", " ", text, flags=re.DOTALL)
    return text


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every complete top-level JSON object in ``text``, in order (nested objects stay inside theirs).

    Examples
    --------
    >>> json_objects('a {"x": 1} b {"y": {"z": 2}} c {broken')
    [{'x': 1}, {'y': {'z': 2}}]
    """
    found: list[dict[str, Any]] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        i = text.find("{", end)
    return found


def _lookup(obj: dict[str, Any], name: str) -> Any:
    if name in obj:
        return obj[name]
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    return lowered.get(name.lower(), _MISSING)


_MISSING = object()


def _has_shape(obj: dict[str, Any], rubric: RubricSpec) -> bool:
    return all(_lookup(obj, name) is not _MISSING for name in rubric.criterion_names)


def _shaped(obj: dict[str, Any], rubric: RubricSpec) -> dict[str, Any] | None:
    """``obj`` if it is a verdict, else the last verdict-shaped object nested in it (a wrapper key)."""
    if _has_shape(obj, rubric):
        return obj
    for value in reversed(list(obj.values())):
        if isinstance(value, dict):
            inner = _shaped(value, rubric)
            if inner is not None:
                return inner
    return None


def _validate(obj: dict[str, Any], rubric: RubricSpec, method: str) -> ParsedVerdict:
    scores: dict[str, int] = {}
    explanations: dict[str, str] = {}
    for c in rubric.criteria:
        value = _lookup(obj, c.name)
        if value is _MISSING:
            raise VerdictParseError(f'the JSON object has no "{c.name}"')
        explanation = ""
        if isinstance(value, dict):
            if "score" not in value:
                raise VerdictParseError(f'"{c.name}" has no "score"')
            explanation = value.get("explanation", value.get("justification", ""))
            value = value["score"]
        if isinstance(value, str):
            value = value.strip()
            if not re.fullmatch(r"[+-]?\d+(\.0+)?", value):
                raise VerdictParseError(f'"{c.name}" score {value!r} is not a whole number')
        try:
            scores[c.name] = c.check_score(value)
        except ValidationError as exc:
            raise VerdictParseError(str(exc)) from None
        explanations[c.name] = explanation if isinstance(explanation, str) else json.dumps(explanation)
    return ParsedVerdict(scores=scores, explanations=explanations, method=method)


def parse_verdict(text: str, rubric: RubricSpec, fence_tags: tuple[str, ...] = ()) -> ParsedVerdict:
    """Scores per criterion from a judge's answer, or :class:`VerdictParseError` with the reason.

    Parameters
    ----------
    text
        The judge's raw answer.
    rubric
        The criteria and scales the scores must be on.
    fence_tags
        The tags the prompt fenced the item's texts with; blocks the judge echoes back are ignored.

    Examples
    --------
    >>> from medhelm_core.rubric import default_rubric
    >>> answer = 'Here it is: {"accuracy": {"score": 4, "explanation": "ok"}, "completeness": 3, "clarity": 5}'
    >>> parse_verdict(answer, default_rubric()).scores
    {'accuracy': 4, 'completeness': 3, 'clarity': 5}
    """
    body = (text or "").strip()
    if not body:
        raise VerdictParseError("the answer is empty")
    body = body[:MAX_ANSWER_CHARS]
    try:
        whole = json.loads(body)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        shaped = _shaped(whole, rubric)
        return _validate(shaped if shaped is not None else whole, rubric, "strict")
    objects = json_objects(_strip_echoes(body, fence_tags))
    if not objects:
        raise VerdictParseError("no JSON object was found in the answer")
    for obj in reversed(objects):
        shaped = _shaped(obj, rubric)
        if shaped is not None:
            return _validate(shaped, rubric, "extracted")
    # No object has every criterion. If the last one has some, say which are missing (for the reminder).
    if any(_lookup(objects[-1], name) is not _MISSING for name in rubric.criterion_names):
        return _validate(objects[-1], rubric, "extracted")
    raise VerdictParseError(f"no JSON object with the keys {', '.join(rubric.criterion_names)} was found")
