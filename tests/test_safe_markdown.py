"""A model's markdown drawn safely (:func:`medhelm_core.text.safe_markdown`): its formatting stays, and nothing in it
can load, link, run or pose as a construct once Streamlit renders the result (checked here by parsing the result as
CommonMark again: whatever markup is in it must be one the function wrote)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from medhelm_core.text import safe_markdown

PARSER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
ALLOWED = {"paragraph_open", "paragraph_close", "inline", "text", "softbreak", "hardbreak", "strong_open",
           "strong_close", "em_open", "em_close", "s_open", "s_close", "bullet_list_open", "bullet_list_close",
           "ordered_list_open", "ordered_list_close", "list_item_open", "list_item_close", "blockquote_open",
           "blockquote_close", "fence", "code_inline", "hr", "table_open", "table_close", "thead_open",
           "thead_close", "tbody_open", "tbody_close", "tr_open", "tr_close", "th_open", "th_close", "td_open",
           "td_close"}
HOSTILE = [
    "![x](http://127.0.0.1:9/pixel.png)",
    "[click](https://evil.example/a) and <https://evil.example/b> and www.evil.example",
    "<img src=x onerror=alert(1)> <script>alert(2)</script>",
    "<div>\nblock html\n</div>",
    "[ref]\n\n[ref]: http://evil.example/c",
    ":red[alarm] :material/warning: :smile: $x^2$",
    "    indented <b>code</b>",
    "```html\n<script>alert(3)</script>\n```",
    "| a | b |\n|---|---|\n| ![i](http://e/x) | [l](http://e/y) |",
]


def tokens(markdown: str) -> list:
    flat = []
    for token in PARSER.parse(markdown):
        flat.append(token)
        flat.extend(token.children or [])
    return flat


@pytest.mark.parametrize("text", HOSTILE)
def test_nothing_that_loads_links_or_runs_survives(text):
    drawn = safe_markdown(text)
    kinds = {t.type for t in tokens(drawn)}
    assert kinds <= ALLOWED, (drawn, kinds - ALLOWED)


def test_formatting_stays():
    drawn = safe_markdown("# Plan\n\n1. **Stop** it\n2. *Then* ~~not~~ this\n\n> note\n\n"
                          "| a | b |\n|---|--:|\n| 1 | 2 |")
    kinds = [t.type for t in tokens(drawn)]
    for kind in ("strong_open", "ordered_list_open", "em_open", "s_open", "blockquote_open", "table_open"):
        assert kind in kinds
    assert "heading_open" not in kinds  # a heading is a bold line, not a page title
    assert "--:" in drawn  # the column's alignment is kept


def test_characters_are_kept_as_stored():
    assert safe_markdown("line one\nline two") == "line one  \nline two"  # the model's line breaks stay
    assert safe_markdown("a_b * c") == "a\\_b \\* c"
    assert safe_markdown("\u202eEVITISOP") == "⟦U+202E⟧EVITISOP"
    assert safe_markdown(None) == "" and safe_markdown("") == ""


@given(st.text(alphabet=st.sampled_from(list("ab <>[]()!*_`#-|:$\\&\n/.h1tpw")), max_size=60))
def test_any_text_gives_only_the_allowed_constructs(text):
    assert {t.type for t in tokens(safe_markdown(text))} <= ALLOWED
