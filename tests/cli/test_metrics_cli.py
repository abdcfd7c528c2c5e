"""``medhelm metrics`` fills both metrics for the demo study offline, with progress on stderr only."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from medhelm_core.db.engine import make_engine
from medhelm_core.demo import seed_demo

# A dead proxy on the loopback (port 9, discard): any attempt to reach a model hub fails instead of
# downloading, so a passing run proves the model came from disk. HF_HUB_OFFLINE is left for the code to set.
OFFLINE_ENV = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "",
               "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "no_proxy": ""}


def medhelm(url, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(OFFLINE_ENV, MEDHELM_DATABASE_URL=url)
    return subprocess.run([sys.executable, "-m", "medhelm_core", "metrics", *args], capture_output=True, text=True,
                          env=env, timeout=240)


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'demo.db'}"
    engine = make_engine(url)
    seed_demo(engine)
    engine.dispose()
    return url


def test_metrics_fills_both_metrics_for_the_demo_study_offline(demo_url):
    result = medhelm(demo_url, "demo", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)  # stdout is the JSON alone; the progress bars went to stderr
    assert (report["items"], report["without_reference"], report["device"]) == (48, 0, "cpu")
    assert [(m["family"], m["scored"], m["already_done"]) for m in report["metrics"]] == [
        ("rougeL", 48, 0), ("rougeLsum", 48, 0), ("bertscore", 48, 0)]
    assert report["metrics"][2]["settings"]["num_layers"] == 6
    assert "bertscore" in result.stderr and "Traceback" not in result.stderr

    again = medhelm(demo_url, "demo", "--rouge-l")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        "study demo: 48 items, 0 without a reference (skipped)",
        "rougeL, stemmer on: 0 scored, 48 already done",
        "rougeLsum, stemmer on: 0 scored, 48 already done",
    ]


def test_items_without_a_reference_are_counted(demo_url):
    result = medhelm(demo_url, "medhelm-validation", "--rouge-l", "--no-stemmer", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["items"], report["without_reference"]) == (74, 74)
    assert [m["scored"] for m in report["metrics"]] == [0, 0]


def test_help():
    result = medhelm("sqlite:///:memory:", "--help")
    assert result.returncode == 0 and "--bertscore" in result.stdout and "--layer" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nostudy"], "no study named 'nostudy'"),
        (["demo", "--bertscore", "--model", "/no/such/model"], "is not a local model folder"),
        (["demo", "--bertscore", "--layer", "99"], "layer 99 is outside"),
        (["demo", "--batch-size", "0"], "batch size must be at least 1"),
    ],
)
def test_failures_are_one_clear_line(demo_url, args, message):
    result = medhelm(demo_url, *args)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
