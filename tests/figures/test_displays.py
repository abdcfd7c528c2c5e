"""The figures as the page and the report print them: one number and interval format, cards under the
headline, the jury run named in one line."""

from __future__ import annotations

import math

import pandas as pd

from medhelm_core.figures.displays import headline_cards, headline_rows, jury_run_note, pooled_rows
from medhelm_core.format import interval, intervals, number

HEADLINE = pd.DataFrame({
    "comparison": ["jury-clinician", "clinician-clinician", "jury-clinician"],
    "benchmark": ["pooled", "pooled", "medi_qa"],
    "criterion": ["composite", "composite", "composite"],
    "icc": [0.4736, math.nan, 0.5],
    "ci_low": [0.1012, math.nan, 0.2],
    "ci_high": [0.6893, math.nan, 0.7],
    "n_items": [56, 0, 20],
    "note": ["", "fewer than 3 items", ""],
})


def test_a_figure_prints_rounded_and_a_missing_one_as_n_a():
    assert number(0.4736) == "0.474" and number(-0.0001) == "0.000" and number(math.inf) == "n/a"
    assert interval(0.1012, 0.6893) == "0.10 to 0.69" and interval(math.nan, 0.5) == "n/a"
    assert intervals([0.1, None], [0.2, 0.3]) == ["0.10 to 0.20", "n/a"]


def test_the_headline_cards_show_the_pooled_icc_with_its_interval_or_the_note():
    cards = headline_cards(HEADLINE)
    assert [(c.comparison, c.value, c.caption) for c in cards] == [
        ("jury-clinician", "0.474", "95% CI 0.10 to 0.69 · n = 56"),
        ("clinician-clinician", "n/a", "fewer than 3 items"),
    ]


def test_the_headline_rows_keep_numbers_and_add_the_printed_interval():
    rows = headline_rows(HEADLINE, "composite")
    assert rows["icc"].iloc[0] == 0.4736 and rows["ci"].tolist() == ["0.10 to 0.69", "n/a", "0.20 to 0.70"]
    assert len(pooled_rows(HEADLINE)) == 2


def test_the_jury_run_is_named_in_one_line():
    assert jury_run_note(None) == "This study has no jury run yet."
