"""Whatever a judge answers, the parser returns valid scores or a VerdictParseError with a reason: it never
crashes and never accepts a score off the rubric's scale."""

from __future__ import annotations

import json

from hypothesis import given, settings
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
