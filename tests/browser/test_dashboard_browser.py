"""A real Chromium against `streamlit run`: a researcher opens the Agreement page, sees the headline and the
charts, filters the MedHELM study to the paper's benchmarks and reads 0.474; the exported HTML report draws
its charts with the network cut off.

Uses Debian's chromium (`/usr/bin/chromium`) through the Playwright package; never `playwright install`.
Screenshots go to $MEDHELM_SCREENSHOTS when it is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import REPO
from sqlmodel import Session
from support.dashboard_support import copy_of, rated_figures
from support.helpers import browser_sign_in, start_app

from medhelm_core.db.engine import make_engine
from medhelm_core.demo import DEMO_STUDY
from medhelm_core.report import ReportOptions, render_html, report_content
from medhelm_core.studies import get_study

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:The inplace keyword")]
SHOTS = Path(os.environ["MEDHELM_SCREENSHOTS"]) if os.environ.get("MEDHELM_SCREENSHOTS") else None


@pytest.fixture(scope="module")
def served(tmp_path_factory, browser):
    url = copy_of("rated", tmp_path_factory.mktemp("agreement-browser"))
    base, proc = start_app(REPO, url)
    yield base
    proc.terminate()
    proc.wait(timeout=20)


def settle(page) -> None:
    """Wait until Streamlit has finished the rerun: no element is stale and every chart has drawn."""
    page.wait_for_function("document.querySelectorAll('[data-stale=\"true\"]').length === 0", timeout=30_000)
    page.wait_for_timeout(600)


def shot(page, name: str) -> None:
    """The page and each chart at full size, when MEDHELM_SCREENSHOTS names a folder."""
    if not SHOTS:
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    for i, chart in enumerate(page.locator("[data-testid='stVegaLiteChart']").all()):
        chart.screenshot(path=str(SHOTS / f"{name}_chart{i}.png"))


def choose(page, scope, label: str, option: str) -> None:
    """Pick ``option`` in the Streamlit selectbox or multiselect labelled ``label`` inside ``scope``."""
    scope.get_by_role("combobox", name=label).click()
    page.get_by_role("option", name=option, exact=True).click()


def test_the_agreement_page_shows_headline_charts_and_the_papers_0474(served, browser):
    # Tall, so that a screenshot shows the charts too (Streamlit scrolls inside its own container).
    page = browser.new_page(viewport={"width": 1400, "height": 4200})
    browser_sign_in(page, served, "researcher")
    page.get_by_role("link", name="Agreement").click()
    page.get_by_text("Headline agreement").wait_for(timeout=60_000)
    page.get_by_text("jury-clinician").first.wait_for(timeout=30_000)
    charts = page.locator("[data-testid='stVegaLiteChart']")
    charts.nth(7).wait_for(timeout=30_000)
    assert charts.count() == 8  # headline, scatter, Bland-Altman, per judge, judge subsets, versions, clinicians,
    # distribution
    settle(page)
    shot(page, "agreement_demo")

    choose(page, page, "Study", "medhelm-validation")
    page.get_by_text("Recorded jury scores").wait_for(timeout=30_000)
    # The study opens on the paper's choice (aci_bench and medi_qa pooled): 0.474 with no benchmark to pick.
    page.get_by_test_id("stMetricValue").filter(has_text="0.474").wait_for(timeout=30_000)
    page.get_by_text("95% CI 0.10 to 0.69 · n = 56").wait_for()
    settle(page)
    shot(page, "agreement_medhelm")
    page.close()


def test_the_exported_html_report_draws_its_charts_offline(tmp_path, browser):
    data, table = rated_figures()
    engine = make_engine(copy_of("rated", tmp_path))
    with Session(engine) as s:
        content = report_content(s, get_study(s, DEMO_STUDY), data, ReportOptions(), table)
    engine.dispose()
    report = tmp_path / "report.html"
    report.write_text(render_html(content), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    asked: list[str] = []

    def only_the_file(route):
        asked.append(route.request.url)
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            route.abort()

    page.route("**/*", only_the_file)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report.as_uri())
    page.locator("#chart-distribution svg").wait_for(timeout=30_000)
    assert page.locator(".chart svg").count() == len(content.charts) == 10  # the 8 of the page, and the models'
    assert [u for u in asked if not u.startswith("file:")] == [] and errors == []
    assert page.evaluate("window.__pwned === undefined")
    shot(page, "report_html")
    page.close()
