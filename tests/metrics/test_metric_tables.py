"""The Metrics page's read-out: one settings variant per metric family, one column per metric, a summary over
all items and per benchmark."""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from medhelm_core.metrics import metric_settings_frame
from medhelm_core.metrics.tables import metric_summary, metric_table, settings_choices


def scores() -> pd.DataFrame:
    rows = []
    for item, bench in ((1, "a"), (2, "a"), (3, "b")):
        for digest, stem, value, when in (("on000000x", True, 0.5 + item / 10, 2), ("off00000x", False, 0.1, 1)):
            rows.append({"item_id": item, "benchmark": bench, "instance_id": str(item), "model": "m",
                         "metric": "rougeL_f", "family": "rougeL", "value": value, "settings_hash": digest,
                         "settings": {"family": "rougeL", "use_stemmer": stem},
                         "computed_at": datetime(2026, 5, when, 12, 0)})
    return pd.DataFrame(rows)


def test_each_variant_is_offered_newest_first_with_what_it_covers():
    choices = settings_choices(metric_settings_frame(scores()))
    assert list(choices) == ["rougeL"]
    assert list(choices["rougeL"].items()) == [
        ("on000000: 3 items, 2026-05-02 12:00 use_stemmer=True", "on000000x"),
        ("off00000: 3 items, 2026-05-01 12:00 use_stemmer=False", "off00000x"),
    ]


def test_the_table_holds_the_chosen_variant_only_and_the_summary_pools_and_splits_benchmarks():
    table = metric_table(scores(), ["on000000x"])
    assert table["rougeL_f"].round(2).tolist() == [0.6, 0.7, 0.8]
    summary = metric_summary(table).set_index("benchmark")
    assert summary.loc["all", "count"] == 3 and summary.loc["a", "count"] == 2
    assert round(summary.loc["b", "mean"], 2) == 0.8
