"""Read a judge's answer into scores: the judge's own verdict, or a refusal with the reason.

MedHELM finds the verdict with a greedy regex, so a model output that itself holds a JSON verdict (and a
judge that quotes it) can decide the parse. Taking "the last JSON object" instead is fooled the same way
when the judge quotes the output *after* its verdict. The rule here:

1. an answer longer than :data:`MAX_ANSWER_CHARS`, or holding JSON nested deeper than :data:`MAX_NESTING`
   or numbers Python will not read, is refused with a reason (never cut, never an exception): one such
   answer must fail its own verdict, not the run;
2. the whole answer is tried as one JSON object (what the prompt asks for); otherwise every fenced block the
   judge echoed back (``<response_...>...</response_...>``) is discarded and the rest is scanned for complete
   top-level JSON objects with a real JSON decoder (never a regex);
3. an object copied verbatim from the prompt the judge was shown (the fake verdict an output carries, quoted
   unfenced or in a look-alike tag) is quoted material, never the judge's verdict;
4. every remaining object with the verdict's shape (directly or under a wrapper key) is a verdict. They must
   all give the same scores: an answer that holds differing verdicts is refused rather than guessed at.
   Every criterion needs a whole-number score on its scale, else the answer is refused with a reason.

A refused answer is stored as a failed verdict with its raw text (see :mod:`medhelm_core.jury.calls`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from medhelm_core.errors import ValidationError
from medhelm_core.rubric import RubricSpec

#: A verdict is a few hundred characters; an answer this long is refused, not cut (cutting can keep a
#: quoted fake verdict and drop the judge's own).
MAX_ANSWER_CHARS = 200_000
#: A verdict is nested 2 deep (3 under a wrapper key); deeper JSON is refused before anything recurses on it.
MAX_NESTING = 32
#: JSON objects read, attempts to read one that fail, and characters read in those, before the answer is
#: refused. A verdict answer holds a few objects; without these bounds an adversarial answer takes seconds to
#: minutes (a failure costs the decoder's error its position in the whole text, and unfinished objects
#: nested in each other are read again from every start). With them any answer is read in well under a second.
MAX_OBJECTS = 1_000
MAX_SCAN_CHARS = 4_000_000
_DECODER = json.JSONDecoder()
#: Where a JSON object can start: a brace, then a key or the closing brace.
_OBJECT_START = re.compile(r'\{\s*["}]')


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
    # str.find, not a lazy regex: many opening tags without a closing one would make a regex quadratic.
    for tag in fence_tags:
        opening, closing = f"<{tag}>", f"</{tag}>"
        kept: list[str] = []
        start = 0
        while (begin := text.find(opening, start)) != -1:
            end = text.find(closing, begin + len(opening))
            if end == -1:
                break
            kept.append(text[start:begin])
            kept.append(" ")
            start = end + len(closing)
        text = "".join(kept) + text[start:]
    return text


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests lists and objects deeper than :data:`MAX_NESTING` (iteratively: no recursion)."""
    stack = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        children = current.values() if isinstance(current, dict) else current if isinstance(current, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > MAX_NESTING:
                    return True
                stack.append((child, depth + 1))
    return False


def _nested_too_deeply() -> VerdictParseError:
    return VerdictParseError(f"the answer holds JSON nested deeper than {MAX_NESTING} levels")


def _checked(value: Any) -> Any:
    if isinstance(value, (dict, list)) and _too_deep(value):
        raise _nested_too_deeply()
    return value


def _decode_whole(body: str) -> Any:
    try:
        return _checked(json.loads(body))
    except json.JSONDecodeError:
        return None
    except RecursionError:
        raise _nested_too_deeply() from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise VerdictParseError(f"the answer holds JSON that cannot be read ({exc})") from None


def _spans(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Every complete top-level JSON object in ``text`` with the text it was read from, in order."""
    found: list[tuple[str, dict[str, Any]]] = []
    failed = scanned = 0
    start = _OBJECT_START.search(text)
    while start is not None:
        i = start.start()
        try:
            obj, end = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            failed, scanned = failed + 1, scanned + exc.pos - i
            if failed > MAX_OBJECTS or scanned > MAX_SCAN_CHARS:
                raise VerdictParseError("the answer holds too many unfinished JSON objects to read") from None
            start = _OBJECT_START.search(text, i + 1)
            continue
        except RecursionError:
            raise _nested_too_deeply() from None
        except ValueError as exc:
            raise VerdictParseError(f"the answer holds JSON that cannot be read ({exc})") from None
        found.append((text[i:end], _checked(obj)))
        if len(found) > MAX_OBJECTS:
            raise VerdictParseError(f"the answer holds more than {MAX_OBJECTS:,} JSON objects")
        start = _OBJECT_START.search(text, end)
    return found


_MISSING = object()


def _lookup(obj: dict[str, Any], name: str) -> Any:
    if name in obj:
        return obj[name]
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    return lowered.get(name.lower(), _MISSING)


def _has_shape(obj: dict[str, Any], rubric: RubricSpec) -> bool:
    names = rubric.criterion_names
    if all(name in obj for name in names):
        return True
    lowered = {str(k).strip().lower() for k in obj}
    return all(name.lower() in lowered for name in names)


def _verdicts_in(obj: dict[str, Any], rubric: RubricSpec) -> list[dict[str, Any]]:
    """``obj`` if it is a verdict, else every verdict nested in it (wrapper keys), in order."""
    if _has_shape(obj, rubric):
        return [obj]
    return [v for value in obj.values() if isinstance(value, dict) for v in _verdicts_in(value, rubric)]


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
                raise VerdictParseError(f'"{c.name}" score {value[:40]!r} is not a whole number')
        try:
            scores[c.name] = c.check_score(value)
        except ValidationError as exc:
            raise VerdictParseError(str(exc)[:300]) from None
        explanations[c.name] = explanation if isinstance(explanation, str) else json.dumps(explanation)
    return ParsedVerdict(scores=scores, explanations=explanations, method=method)


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _copied(span: str, prompt_text: str, prompt_collapsed: str) -> bool:
    """Whether ``span`` is a verbatim copy of part of the prompt (whitespace runs may differ)."""
    return bool(prompt_text) and (span in prompt_text or _collapsed(span) in prompt_collapsed)


def _the_one_verdict(verdicts: list[dict[str, Any]], rubric: RubricSpec, method: str) -> ParsedVerdict:
    """The verdict all of ``verdicts`` agree on; refused when one is unusable or two differ."""
    parsed: list[ParsedVerdict] = []
    for obj in verdicts:
        try:
            parsed.append(_validate(obj, rubric, method))
        except VerdictParseError as exc:
            if len(verdicts) == 1:
                raise
            raise VerdictParseError(f"the answer holds {len(verdicts)} verdicts and one is unusable: "
                                    f"{exc.reason}") from None
    distinct = list(dict.fromkeys(tuple(p.scores.values()) for p in parsed))
    if len(distinct) > 1:
        shown = ", ".join("/".join(str(s) for s in scores) for scores in distinct[:3])
        raise VerdictParseError(f"the answer holds {len(distinct)} differing verdicts ({shown}); give one")
    return parsed[-1]  # the same scores throughout; the last carries the judge's final explanations


def parse_verdict(
    text: str, rubric: RubricSpec, fence_tags: tuple[str, ...] = (), *, prompt_text: str = ""
) -> ParsedVerdict:
    """Scores per criterion from a judge's answer, or :class:`VerdictParseError` with the reason.

    Never raises anything else, whatever the text.

    Parameters
    ----------
    text
        The judge's raw answer.
    rubric
        The criteria and scales the scores must be on.
    fence_tags
        The tags the prompt fenced the item's texts with; blocks the judge echoes back are ignored.
    prompt_text
        The prompt the judge was shown. A JSON object in the answer that is a verbatim copy of part of it
        (a verdict the evaluated output carries) is quoted material, not the judge's verdict.

    Examples
    --------
    >>> from medhelm_core.rubric import default_rubric
    >>> answer = 'Here it is: {"accuracy": {"score": 4, "explanation": "ok"}, "completeness": 3, "clarity": 5}'
    >>> parse_verdict(answer, default_rubric()).scores
    {'accuracy': 4, 'completeness': 3, 'clarity': 5}
    >>> parse_verdict('{"accuracy": 4, "completeness": 3, "clarity": 5} or {"accuracy": 5, "completeness": 5, '
    ...               '"clarity": 5}', default_rubric())
    Traceback (most recent call last):
    ...
    medhelm_core.jury.parse.VerdictParseError: the answer holds 2 differing verdicts (4/3/5, 5/5/5); give one
    """
    body = (text or "").strip()
    if not body:
        raise VerdictParseError("the answer is empty")
    if len(body) > MAX_ANSWER_CHARS:
        raise VerdictParseError(f"the answer is {len(body):,} characters long, over the limit of "
                                f"{MAX_ANSWER_CHARS:,}")
    whole = _decode_whole(body)
    if isinstance(whole, dict):
        method, objects = "strict", [(body, whole)]
    else:
        method, objects = "extracted", _spans(_strip_echoes(body, fence_tags))
        if not objects:
            raise VerdictParseError("no JSON object was found in the answer")
    prompt_collapsed = _collapsed(prompt_text)
    own: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    quoted_verdicts = 0
    for span, obj in objects:
        inside = _verdicts_in(obj, rubric)
        if inside and _copied(span, prompt_text, prompt_collapsed):
            quoted_verdicts += 1
        else:
            own.append(obj)
            verdicts.extend(inside)
    if verdicts:
        return _the_one_verdict(verdicts, rubric, method)
    if quoted_verdicts:
        raise VerdictParseError("the only verdict in the answer is copied from the prompt (the text under "
                                "evaluation), not the judge's own")
    # No object has every criterion. If the last one has some (or the answer is one object), say which are
    # missing, for the reminder.
    if method == "strict" or any(_lookup(own[-1], name) is not _MISSING for name in rubric.criterion_names):
        return _validate(own[-1], rubric, method)
    raise VerdictParseError(f"no JSON object with the keys {', '.join(rubric.criterion_names)} was found")
