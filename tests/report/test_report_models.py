"""The report's model sections and the data bundle's model tables, from which the figures recompute."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
from sqlmodel import Session
from support.model_support import insert_jury, rate_first

from medhelm_core.csv_safe import write_csv
from medhelm_core.demo import DEMO_STUDY
from medhelm_core.figures.model_figures import ModelOptions, model_figures, study_model_figures
from medhelm_core.report.bundle import _alignment_tables
from medhelm_core.report.model_sections import model_charts, model_manifest, model_sections
from medhelm_core.studies import get_study


def test_the_bundle_holds_the_model_tables_and_they_recompute(sqlite_demo_engine, tmp_path):
    rate_first(sqlite_demo_engine, 5)
    insert_jury(sqlite_demo_engine)
    options = ModelOptions(n_resamples=300, seed=3)
    with Session(sqlite_demo_engine) as s:
        figs = study_model_figures(s, get_study(s, DEMO_STUDY), options)
    charts = model_charts(figs)
    content = SimpleNamespace(models=figs, charts=charts, robust=None, subsets=None, version_figures=None,
                              quality=None)
    headings = [section.heading for section in model_sections(content)]
    assert headings == ["Models: clinician-anchored scores", "Models: rankings against the clinicians' order",
                        "Models: mean win rate", "Models: clinician ratings still needed"]
    assert set(charts) == {"models", "model_ranks"}
    tables = _alignment_tables(content)
    assert {"model_item_scores", "model_design", "model_anchored", "model_tau"} <= set(tables)
    for name in ("model_item_scores", "model_design", "model_anchored"):
        write_csv(tables[name], tmp_path / f"{name}.csv")
    again = model_figures(pd.read_csv(tmp_path / "model_item_scores.csv"), pd.read_csv(tmp_path / "model_design.csv"),
                          options, criteria=figs.criteria)
    written = pd.read_csv(tmp_path / "model_anchored.csv")
    for column in ("anchored", "anchored_low", "anchored_high", "clinician_mean", "jury_mean", "n_effective"):
        assert np.allclose(again.anchored[column], written[column], equal_nan=True, atol=1e-9)
    assert np.allclose(again.means["ci_low"], figs.means["ci_low"], equal_nan=True, atol=1e-12)
    assert model_manifest(figs)["input"] == ["data/model_item_scores.csv", "data/model_design.csv"]
