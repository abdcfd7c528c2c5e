"""The figures as the page and the report print them: one number and interval format, cards under the
headline, the jury run named in one line."""

from __future__ import annotations

import math

import pandas as pd

from medhelm_core.figures.displays import headline_cards, headline_rows, jury_run_note, pooled_rows
from medhelm_core.format import interval, intervals, number

HEADLINE = pd.DataFrame({
    "comparison": ["jury-clinician", "clinician-clinician", "jury-clinician", "clinician ceiling"],
    "benchmark": ["pooled", "pooled", "medi_qa", "pooled"],
    "criterion": ["composite", "composite", "composite", "composite"],
    "method": ["ICC3k", "ICC3k", "ICC3k", "ICC3k"],
    "icc": [0.4736, math.nan, 0.5, 0.39],
    "ci_low": [0.1012, math.nan, 0.2, 0.24],
    "ci_high": [0.6893, math.nan, 0.7, 0.64],
    "ci_method": ["F", "F", "F", "range over clinicians"],
    "n_items": [56, 0, 20, 43],
    "n_available": [56, 50, 25, 50],
    "pearson_r": [0.3105, math.nan, 0.33, 0.30],
    "spearman_rho": [0.1060, math.nan, 0.3, 0.28],
    "note": ["", "fewer than 3 items", "", ""],
})


def test_a_figure_prints_rounded_and_a_missing_one_as_n_a():
    assert number(0.4736) == "0.474" and number(-0.0001) == "0.000" and number(math.inf) == "n/a"
    assert interval(0.1012, 0.6893) == "0.10 to 0.69" and interval(math.nan, 0.5) == "n/a"
    assert intervals([0.1, None], [0.2, 0.3]) == ["0.10 to 0.20", "n/a"]


def test_the_headline_cards_show_the_pooled_icc_with_its_interval_or_the_note():
    cards = headline_cards(HEADLINE)
    assert [(c.comparison, c.value, c.caption) for c in cards] == [
        ("jury-clinician", "0.474", "ICC(C,k) · 95% CI 0.10 to 0.69 · n = 56 of 56 · r 0.310, rho 0.106"),
        ("clinician-clinician", "n/a", "fewer than 3 items"),
        # The ceiling's interval is its range over clinicians, and says so.
        ("clinician ceiling", "0.390", "ICC(C,k), median · range 0.24 to 0.64 · n = 43 of 50 · r 0.300, rho 0.280"),
    ]


def test_the_headline_rows_keep_numbers_and_add_the_printed_interval():
    rows = headline_rows(HEADLINE, "composite")
    assert rows["icc"].iloc[0] == 0.4736
    assert rows["ci"].tolist() == ["0.10 to 0.69", "n/a", "0.20 to 0.70", "range 0.24 to 0.64"]
    assert rows["n_used"].tolist() == ["56 of 56", "0 of 50", "20 of 25", "43 of 50"]
    assert len(pooled_rows(HEADLINE)) == 3


def test_the_jury_run_is_named_in_one_line():
    assert jury_run_note(None) == "This study has no jury run yet."
