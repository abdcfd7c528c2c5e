"""``medhelm study``, ``plan``, ``gold`` and ``quality``: design a study and read its rater quality from the shell."""

from __future__ import annotations

import functools
import json

import pytest
from support.helpers import run_cli

from medhelm_core.demo import ANNOTATIONS


@pytest.fixture
def medhelm(capsys):
    """Run the CLI in this process (a subprocess per call would spend most of the test importing)."""
    return functools.partial(run_cli, capsys)


def test_settings_plan_gold_and_quality_round_trip(tmp_path, medhelm):
    url = f"sqlite:///{tmp_path / 'q.db'}"
    assert medhelm(url, "demo", "--no-start").returncode == 0
    changed = medhelm(url, "study", "set", "demo", "--speed-threshold", "45", "--retest-share", "0.1",
                      "--retest-gap", "5", "--adjudication-threshold", "2", "--json")
    assert changed.returncode == 0, changed.stderr
    settings = json.loads(changed.stdout)
    assert (settings["speed_threshold_seconds"], settings["retest_share"], settings["retest_gap"],
            settings["adjudication_threshold"]) == (45.0, 0.1, 5, 2)
    off = json.loads(medhelm(url, "study", "set", "demo", "--adjudication-threshold", "off", "--json").stdout)
    assert off["adjudication_threshold"] is None and off["retest_share"] == 0.1

    headline = json.loads(medhelm(url, "plan", "--json").stdout)  # the Agreement page's ICC(C,k) by default
    assert (headline["items"], headline["design"], headline["measure"]) == (136, "two-way consistency", "average")
    plan = json.loads(medhelm(url, "plan", "--form", "icc1", "--study", "demo", "--save", "--json").stdout)
    assert plan["items"] == 98 and plan["study"] == {"name": "demo", "items": 48, "complete_items": 0, "saved": True}
    shown = json.loads(medhelm(url, "study", "show", "demo", "--json").stdout)
    assert shown["plan"]["items"] == 98 and shown["plan"]["raters"] == 2

    gold = medhelm(url, "gold", "import", "demo", str(ANNOTATIONS / "demo" / "gold.csv"), "--json")
    assert gold.returncode == 0, gold.stderr
    assert json.loads(gold.stdout)["gold_items"] == 3
    listed = json.loads(medhelm(url, "gold", "list", "demo", "--json").stdout)
    assert len(listed) == 5 and {r["criterion"] for r in listed} == {"accuracy", "clarity", "completeness"}
    assigned = json.loads(medhelm(url, "assign", "demo", "--json").stdout)
    assert assigned["added"] > 0  # the gold items reach the clinicians who did not have them

    quality = json.loads(medhelm(url, "quality", "demo", "--json").stdout)
    assert quality["threshold_seconds"] == 45.0 and quality["gold_items"] == 3 and quality["speed"] == []
    text = medhelm(url, "quality", "demo")
    assert text.returncode == 0 and "Gold accuracy (3 gold items)" in text.stdout


def test_bad_settings_fail_with_one_line(tmp_path, medhelm):
    url = f"sqlite:///{tmp_path / 'q.db'}"
    medhelm(url, "demo", "--no-start")
    for args, words in (
        (["study", "set", "demo", "--retest-share", "0.9"], "retest share"),
        (["study", "set", "demo", "--speed-threshold", "-3"], "speed threshold"),
        (["study", "set", "demo", "--adjudication-threshold", "lots"], "adjudication-threshold"),
        (["study", "set", "nope", "--speed-threshold", "3"], "no study named 'nope'"),
        (["plan", "--save"], "--save needs --study"),
        (["gold", "clear", "demo"], "--yes"),
        (["gold", "import", "demo", str(tmp_path / "missing.csv")], "no such file"),
    ):
        result = medhelm(url, *args)
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], (args, result.stderr)
