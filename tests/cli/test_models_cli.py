"""``medhelm models STUDY`` and ``medhelm assign STUDY --where-uncertain N`` in the terminal and as JSON."""

from __future__ import annotations

import json

from support.helpers import run_cli
from support.model_support import insert_jury


def test_models_prints_what_the_data_can_tell_and_json_has_every_table(sqlite_demo_engine, capsys):
    url = str(sqlite_demo_engine.url)
    text = run_cli(capsys, url, "models", "medhelm-validation", "--resamples", "300")
    assert text.returncode == 0, text.stderr
    assert "74 items rated by clinicians" in text.stdout and "Kendall's tau-b" in text.stdout
    assert "nan" not in text.stdout.lower().replace("n/a", "")
    data = json.loads(run_cli(capsys, url, "models", "medhelm-validation", "--json", "--resamples", "100").stdout)
    assert data["messages"][0].startswith("Every item is rated by clinicians") and len(data["model_anchored"]) > 7
    assert {"model_means", "model_tau", "model_win_rates", "model_ratings_needed"} <= set(data)
    nothing = run_cli(capsys, url, "models", "demo")  # nothing rated, no jury, no metrics yet
    assert nothing.returncode == 1 and "nothing to say about the models" in nothing.stderr
    wrong = run_cli(capsys, url, "models", "medhelm-validation", "--criterion", "kindness", "--resamples", "50")
    assert wrong.returncode == 1 and wrong.stderr.startswith("error: criterion 'kindness' unknown")


def test_assign_where_uncertain_sends_the_next_ratings_and_says_where(sqlite_demo_engine, capsys):
    insert_jury(sqlite_demo_engine)
    url = str(sqlite_demo_engine.url)
    result = run_cli(capsys, url, "assign", "demo", "--where-uncertain", "6", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["added"] == 6 and sum(c["n_next"] for c in data["cells"]) == 6
    assert all(0 < c["draw_probability"] <= 1 for c in data["cells"])
    again = run_cli(capsys, url, "assign", "demo", "--where-uncertain", "3")
    assert again.returncode == 0 and again.stdout.startswith("3 of 3 ratings assigned")
