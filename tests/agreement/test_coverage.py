"""The coverage study run small: every interval the product prints still covers its true value.

``benchmarks/interval_coverage.py`` is the full study (docs/benchmarks.md); here it runs with a fixed seed, few
replicates and bounds loose enough for that Monte Carlo error (four standard errors), so that a change that
breaks an interval's coverage fails. The McGraw & Wong row shows the test can fail: that interval, which the
product no longer prints for raters drawn at random, undercovers beyond the bound.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_spec = importlib.util.spec_from_file_location(
    "benchmarks_coverage", Path(__file__).parents[2] / "benchmarks" / "interval_coverage.py"
)
assert _spec is not None and _spec.loader is not None
coverage = importlib.util.module_from_spec(_spec)
sys.modules["benchmarks_coverage"] = coverage
_spec.loader.exec_module(coverage)


def lower_bound(replicates: int, nominal: float = 0.95) -> float:
    return nominal - 4 * np.sqrt(nominal * (1 - nominal) / replicates)


@pytest.fixture(scope="module")
def small_table():
    return coverage.coverage_table(replicates=300, sizes=(100,), seed=0, small=True)


def test_every_printed_interval_covers_at_100_items(small_table) -> None:
    assert small_table["printed"].all() and small_table["interval"].nunique() == sum(
        i.printed for i in coverage.INTERVALS
    )
    for row in small_table.itertuples():
        assert row.coverage >= lower_bound(row.replicates), row
        # Not needlessly wide either: McGraw & Wong's interval for fixed raters covered 100%.
        assert row.coverage <= 0.995 or row.replicates < 200, row


def test_the_interval_the_product_dropped_fails_the_same_bound() -> None:
    run = coverage.absolute_f("ICC2", "random")
    hits = run(coverage.RANDOM[0], 100, 300, np.random.default_rng(1), True)
    assert hits.mean() < lower_bound(300)  # about 76%: why ICC(A,·) of two random raters gets the GCI


def test_the_coverage_table_prints_for_the_docs(small_table) -> None:
    text = coverage.markdown(small_table)
    assert text.splitlines()[0].startswith("| interval | design | method | printed | 100 items |")
    assert "GCI (raters random)" in text and coverage.failures(small_table, (0.0, 1.0)).empty
