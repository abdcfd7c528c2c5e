"""The calibration report: the HTML parses and loads nothing from the network, model text is escaped, the PDF
opens, the data bundle recomputes the same ICC, the manifest says what produced it, and `medhelm report`
behaves like every other command."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pypdf import PdfReader
from sqlmodel import Session
from support.dashboard_support import HOSTILE, PROMPT_HASH, rated_database, rated_figures

from medhelm_core.agreement import agreement_table
from medhelm_core.cli import main
from medhelm_core.db.engine import make_engine
from medhelm_core.db.migrate import current_revision, head_revision
from medhelm_core.demo import DEMO_STUDY, MEDHELM_STUDY
from medhelm_core.report import ReportOptions, read_scores_long, render_html, report_content, write_report
from medhelm_core.studies import get_study

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of every script."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out, out.err


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory) -> Path:
    """The rated demo's report, written as the page writes it (reusing the page's data and table)."""
    out = tmp_path_factory.mktemp("demo-report")
    data, table = rated_figures()
    engine = make_engine(f"sqlite:///{rated_database('rated')}")
    with Session(engine) as s:
        write_report(s, get_study(s, DEMO_STUDY), out, ReportOptions(), data=data, agreement=table)
    engine.dispose()
    return out


@pytest.fixture(scope="module")
def medhelm_report(tmp_path_factory) -> tuple[Path, dict]:
    """The MedHELM validation study's report, made with `medhelm report --json` (aci_bench and medi_qa pooled)."""
    out = tmp_path_factory.mktemp("medhelm-report")
    url = f"sqlite:///{rated_database('seeded')}"
    mp = pytest.MonkeyPatch()
    mp.setenv("MEDHELM_DATABASE_URL", url)
    printed = io.StringIO()
    try:
        with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(printed):
            main(["report", MEDHELM_STUDY, "--out", str(out), "-b", "aci_bench", "-b", "medi_qa", "--json"])
    finally:
        mp.undo()
    assert exit_info.value.code in (0, None)
    return out, json.loads(printed.getvalue())


@pytest.fixture(params=["demo", "medhelm"])
def report(request, demo_report, medhelm_report) -> Path:
    return demo_report if request.param == "demo" else medhelm_report[0]


def test_the_html_parses_and_loads_nothing_from_the_network(report):
    html = (report / "report.html").read_text(encoding="utf-8")
    parser = Tags()
    parser.feed(html)
    parser.close()
    external = [
        (tag, attrs) for tag, attrs in parser.tags
        for key in ("src", "href") if (attrs.get(key) or "").strip().lower().startswith(("http:", "https:", "//"))
    ]
    assert external == []
    loaded = [t for t, a in parser.tags if t in ("script", "link", "img", "iframe") and (a.get("src") or a.get("href"))]
    assert loaded == []
    assert len(parser.scripts) == 3  # the Vega bundle, the chart specs, the embed call
    assert "vegaEmbed" in parser.scripts[0] and len(parser.scripts[0]) > 500_000
    specs = json.loads(parser.scripts[1])
    assert "icc" in specs and all(s["$schema"].startswith("https://vega.github.io/schema/vega-lite/") for s in
                                  specs.values())


def test_model_text_in_the_html_is_escaped(demo_report):
    html = (demo_report / "report.html").read_text(encoding="utf-8")
    assert "<script>window.__pwned" not in html and "<img src=x" not in html and "<b>x</b>" not in html
    assert escape(HOSTILE) in html  # the output excerpt of the item the jury and clinicians disagree on most
    assert "model&lt;b&gt;x&lt;/b&gt;" in html


def test_the_report_can_leave_item_texts_out(demo_report):
    data, table = rated_figures()
    engine = make_engine(f"sqlite:///{rated_database('rated')}")
    with Session(engine) as s:
        content = report_content(s, get_study(s, DEMO_STUDY), data, ReportOptions(item_texts=False), table)
    engine.dispose()
    html = render_html(content)
    assert "Take 500 mg" not in html and "output (excerpt)" not in html
    assert "Take 500 mg" in (demo_report / "report.html").read_text(encoding="utf-8")


def test_the_pdf_opens_with_the_same_content(report):
    raw = (report / "report.pdf").read_bytes()
    assert raw.startswith(b"%PDF-") and raw.rstrip().endswith(b"%%EOF")
    reader = PdfReader(report / "report.pdf")
    assert len(reader.pages) >= 3
    text = " ".join(page.extract_text() for page in reader.pages)
    for words in ("Headline agreement", "Method", "ICC(3,k)", "z-scored", "Every figure"):
        assert words in text


def test_the_bundle_recomputes_the_same_icc(report):
    manifest = json.loads((report / "manifest.json").read_text())
    analysis = manifest["analysis"]
    long = read_scores_long(report / analysis["input"])
    again = agreement_table(long, protocol=analysis["protocol"], benchmarks=analysis["benchmarks"],
                            n_resamples=analysis["n_resamples"], seed=analysis["seed"])
    stored = pd.read_csv(report / analysis["output"], keep_default_na=False, na_values={
        c: [""] for c in ("estimate", "ci_low", "ci_high", "pearson_r", "spearman_rho", "kappa_qw")})
    assert len(again) == len(stored)
    assert list(again["comparison"]) == list(stored["comparison"])
    for column in ("estimate", "ci_low", "ci_high", "pearson_r", "spearman_rho", "kappa_qw"):
        assert np.allclose(again[column].astype(float), stored[column].astype(float), atol=1e-9, equal_nan=True)
    assert list(again["n_items"]) == list(stored["n_items"])
    for name, meta in manifest["files"].items():
        assert hashlib.sha256((report / name).read_bytes()).hexdigest() == meta["sha256"]


def test_the_manifest_says_what_produced_the_report(demo_report):
    manifest = json.loads((demo_report / "manifest.json").read_text())
    engine = make_engine(f"sqlite:///{rated_database('rated')}")
    assert manifest["schema_revision"] == current_revision(engine) == head_revision()
    engine.dispose()
    assert manifest["study"]["name"] == DEMO_STUDY and manifest["study"]["n_items"] == 48
    assert [c["name"] for c in manifest["rubric"]["criteria"]] == ["accuracy", "completeness", "clarity"]
    assert manifest["prompt_hash"] == PROMPT_HASH and manifest["jury_run"]["n_failed"] == 1
    assert manifest["jury_run"]["config_hash"] == "cd" * 32 and not manifest["jury_run"]["recorded"]
    assert set(manifest["metrics"]) == {"rougeL_f", "bertscore_f1"}
    for package in ("python", "medhelm-calibrate", "pandas", "pingouin", "altair", "vl-convert-python", "fpdf2"):
        assert manifest["package_versions"][package]
    assert {"data/ratings.csv", "data/verdicts.csv", "data/metrics.csv", "data/agreement.csv"} <= set(manifest["files"])


def test_the_medhelm_report_shows_0474_and_says_the_jury_is_recorded(medhelm_report):
    out, printed = medhelm_report
    jury = next(r for r in printed["pooled"] if (r["comparison"], r["criterion"]) == ("jury-clinician", "composite"))
    assert round(jury["icc"], 3) == 0.474 and printed["html"] == str(out / "report.html")
    assert printed["data"]["data/scores_long.csv"] > 0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "0.474" in html and "0.10 to 0.69" in html
    assert "recorded</strong>" in html
    headline = pd.read_csv(out / "data" / "headline.csv")
    jury = headline.query("comparison == 'jury-clinician' and benchmark == 'pooled' and criterion == 'composite'")
    assert round(float(jury["icc"].iloc[0]), 3) == 0.474
    text = " ".join(p.extract_text() for p in PdfReader(out / "report.pdf").pages)
    assert "0.474" in text and "RECORDED" in text
    for words in ("ICC(3,k)", "z-scored", "No bootstrap", "items lacking either side are left out"):
        assert words in html


def test_the_report_command_prints_json_and_fails_with_one_line(capsys, monkeypatch, tmp_path, medhelm_report):
    monkeypatch.setenv("MEDHELM_DATABASE_URL", f"sqlite:///{rated_database('seeded')}")
    code, out, err = run_cli(capsys, "report", "nope", "--out", str(tmp_path))
    assert code == 1 and err.startswith("error: no study named 'nope'") and len(err.strip().splitlines()) == 1
    code, out, err = run_cli(capsys, "report", DEMO_STUDY, "--out", str(tmp_path))
    assert code == 1 and err.strip() == (
        "error: Not enough ratings yet: 0 item(s) have clinician ratings; agreement needs at least 3 items rated by "
        "a clinician and also by a second clinician, the jury or a metric."
    )
    code, _, err = run_cli(capsys, "report", DEMO_STUDY, "--out", str(tmp_path), "--protocol", "paper")
    assert code == 1 and "--protocol 'paper' unknown" in err
    assert not any(tmp_path.iterdir())


def test_the_report_says_which_judges_and_versions_to_trust_and_bundles_their_tables(demo_report):
    html = (demo_report / "report.html").read_text(encoding="utf-8")
    for heading in ("Skew-robust agreement", "Which judges to trust", "Jury versions", "Rater quality: speed"):
        assert f"<h2>{heading}</h2>" in html
    text = " ".join(page.extract_text() for page in PdfReader(demo_report / "report.pdf").pages)
    for words in ("Skew-robust agreement", "Which judges to trust", "Jury versions", "Gwet", "paired"):
        assert words in text
    manifest = json.loads((demo_report / "manifest.json").read_text())
    assert {"data/robust_agreement.csv", "data/judge_subsets.csv", "data/jury_versions.csv",
            "data/rater_speed.csv"} <= set(manifest["files"])
    robust = pd.read_csv(demo_report / "data" / "robust_agreement.csv")
    assert set(robust["method"]) == {"AC2", "kappa_qw"} and "jury-clinician" in set(robust["comparison"])
    subsets = pd.read_csv(demo_report / "data" / "judge_subsets.csv")
    assert "clinician ceiling" in set(subsets["subset"]) and "all judges" in set(subsets["subset"])


def test_the_report_opens_with_the_verdict_and_the_bias_panel(medhelm_report):
    out, _ = medhelm_report
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.index("<h2>Verdict") < html.index("<h2>Judge bias panel") < html.index("<h2>Headline agreement")
    assert "NOT ENOUGH DATA" in html and "cannot run the Alternative Annotator Test" in html
    assert "not pre-registered" in html  # the seeded study has no protocol fixed
    text = " ".join(p.extract_text() for p in PdfReader(out / "report.pdf").pages[:2])
    assert "Verdict: can the jury stand in for a clinician?" in text and "Judge bias panel" in text
