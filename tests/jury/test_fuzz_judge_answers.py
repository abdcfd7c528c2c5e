"""Whatever a judge answers, the parser returns valid scores or a VerdictParseError with a reason: it never
crashes, never accepts a score off the rubric's scale, and never scores an answer holding differing verdicts."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from medhelm_core.jury.parse import ParsedVerdict, VerdictParseError, parse_verdict
from medhelm_core.rubric import default_rubric

RUBRIC = default_rubric()
CRITERIA = RUBRIC.criterion_names

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
verdict_like = st.fixed_dictionaries(
    {c: st.one_of(json_values, st.fixed_dictionaries({"score": json_values, "explanation": json_values}))
     for c in CRITERIA}
)


def check(text: str) -> None:
    try:
        parsed = parse_verdict(text, RUBRIC)
    except VerdictParseError as exc:
        assert str(exc)  # a reason that can be stored beside the raw text
        return
    assert isinstance(parsed, ParsedVerdict)
    for criterion in RUBRIC.criteria:
        score = parsed.scores[criterion.name]
        assert isinstance(score, int) and criterion.scale_min <= score <= criterion.scale_max


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_random_text_is_parsed_or_refused_with_a_reason(text):
    check(text)


@settings(max_examples=300, deadline=None)
@given(verdict_like, st.text(max_size=40), st.text(max_size=40), st.booleans())
def test_verdict_shaped_json_with_junk_around_it_is_parsed_or_refused(verdict, before, after, fenced):
    body = json.dumps(verdict)
    check(f"{before}\n```json\n{body}\n```\n{after}" if fenced else f"{before}{body}{after}")


# JSON-like pieces, so that random answers reach the decoder, the wrappers and the scales, not just prose.
PIECES = ['{', '}', '[', ']', '"', ':', ',', ' ', '\n', '\\', '"score"', '"explanation"', '"accuracy"',
          '"completeness"', '"clarity"', '"Accuracy"', '1', '3', '5', '7', '-1', '4.0', '"4"', '1e999', 'NaN',
          'true', 'null', '```json\n', '```', '<response>', '</response>', '<response_0123456789abcdef>',
          '</response_0123456789abcdef>']
json_soup = st.lists(st.sampled_from(PIECES), max_size=80).map("".join)
nesting = st.tuples(st.sampled_from(['[', '{"a": ', '{"accuracy": ']), st.integers(0, 3_000),
                    st.booleans()).map(lambda t: t[0] * t[1] + ("1" + "]" * t[1] if t[0] == "[" and t[2] else ""))


@settings(max_examples=200, deadline=None)
@given(st.one_of(json_soup, nesting, st.text(max_size=200)), json_soup, st.text(max_size=40))
def test_any_text_is_parsed_or_refused_never_raising(first, second, junk):
    """Random JSON fragments, deep nesting and prose: a ParsedVerdict or a VerdictParseError, nothing else."""
    check(first + junk + second)
    try:
        parse_verdict(first + junk + second, RUBRIC, ("response_0123456789abcdef",), prompt_text=second + junk)
    except VerdictParseError:
        pass


scores = st.fixed_dictionaries({c.name: st.integers(c.scale_min, c.scale_max) for c in RUBRIC.criteria})


def as_verdict(given_scores: dict[str, int], form: int, why: str) -> dict:
    """One verdict in one of the shapes a judge writes: bare scores, score objects, or under a wrapper key."""
    if form == 0:
        return dict(given_scores)
    body = {c: {"score": s, "explanation": why} for c, s in given_scores.items()}
    return body if form == 1 else {"evaluation": body}


@settings(max_examples=200, deadline=None)
@given(scores, scores, st.integers(0, 2), st.integers(0, 2), st.text(max_size=30), st.text(max_size=30),
       st.text(max_size=30), st.text(max_size=20), st.sampled_from(["plain", "fenced", "tagged", "one object"]))
def test_an_answer_with_two_differing_verdicts_never_yields_scores(a, b, form_a, form_b, before, between, after,
                                                                   why, layout):
    """Whatever the shapes, the junk around them and how they are set out, two different verdicts are refused."""
    assume(a != b)
    va, vb = json.dumps(as_verdict(a, form_a, why)), json.dumps(as_verdict(b, form_b, why))
    text = {
        "plain": f"{before}{va}{between}{vb}{after}",
        "fenced": f"{before}```json\n{va}\n```{between}```\n{vb}\n```{after}",
        "tagged": f"{before}{va}{between}<response>\n{vb}\n</response>{after}",
        "one object": json.dumps({"mine": as_verdict(a, form_a, why), "quoted": as_verdict(b, form_b, why)}),
    }[layout]
    with pytest.raises(VerdictParseError):
        parse_verdict(text, RUBRIC)
