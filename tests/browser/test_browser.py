"""A real Chromium against `streamlit run`: a clinician rates, reloads, sees the rating kept, and a hostile
output is shown as characters and runs nothing.

Uses Debian's chromium (`/usr/bin/chromium`, installed by .ci/run) through the Playwright package; never
`playwright install`. Skipped outside CI when Chromium is missing; in CI a missing Chromium is an error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import REPO
from sqlmodel import Session, select
from support.helpers import browser_sign_in, start_app

from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Assignment, Item, RatingSubmission, User
from medhelm_core.demo import seed_demo

pytestmark = pytest.mark.browser
HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"
SHOTS = Path(os.environ.get("MEDHELM_SCREENSHOTS", "")) if os.environ.get("MEDHELM_SCREENSHOTS") else None


@pytest.fixture(scope="module")
def served(tmp_path_factory, browser):
    db = tmp_path_factory.mktemp("browser") / "app.db"
    url = f"sqlite:///{db}"
    engine = make_engine(url)
    seed_demo(engine)
    with transaction(engine) as s:
        # Put a hostile output first in clinician1's queue so the page shows it at once.
        uid = s.exec(select(User.id).where(User.username == "clinician1")).one()
        first = s.exec(select(Assignment).where(Assignment.user_id == uid).order_by(Assignment.position)).first()
        item = s.get(Item, first.item_id)
        item.output_text = f"Take 500 mg twice daily. {HOSTILE} **not bold**"
        s.add(item)
    base, proc = start_app(REPO, url)
    yield base, engine, first.item_id
    proc.terminate()
    proc.wait(timeout=20)
    engine.dispose()


def shot(page, name):
    if SHOTS:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_clinician_rates_reloads_and_sees_the_rating_kept_and_hostile_text_inert(served, browser):
    base, engine, hostile_item = served
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    browser_sign_in(page, base, "clinician1")
    page.get_by_role("link", name="Rate").click()
    page.get_by_text("Response to rate").wait_for(timeout=30_000)
    page.get_by_text("0 of 32 done").first.wait_for()

    # The hostile output is on screen as characters; its script and onerror handler never ran.
    page.get_by_text("<script>window.__pwned = 1</script>", exact=False).wait_for()
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator("img[src='x']").count() == 0
    # Markdown is formatting (safe markdown, the default); the plain-text switch shows the characters as stored.
    page.locator("[class*='st-key-rate_text_response_'] strong", has_text="not bold").wait_for()
    page.get_by_text("Plain text").click()
    page.get_by_text("**not bold**", exact=False).wait_for(timeout=30_000)
    shot(page, "rate_page")

    for criterion, score in (("Accuracy", "2"), ("Completeness", "4"), ("Clarity", "5")):
        group = page.get_by_role("radiogroup", name=criterion)
        group.get_by_text(score, exact=True).click()
    page.get_by_label("Comment (optional)").fill("dose looks wrong")
    page.get_by_role("button", name="Submit rating").click()
    page.get_by_text("1 of 32 done").first.wait_for(timeout=30_000)

    with Session(engine) as s:
        saved = s.exec(select(RatingSubmission).where(RatingSubmission.item_id == hostile_item)).one()
    assert saved.scores == {"accuracy": 2, "completeness": 4, "clarity": 5}
    assert saved.comment == "dose looks wrong"

    page.reload()  # the session cookie keeps the clinician signed in, on the Rate page
    page.get_by_text("1 of 32 done").first.wait_for(timeout=30_000)
    assert page.get_by_label("Username").count() == 0
    page.get_by_role("button", name="← Previous").click()
    page.get_by_role("button", name="Save revision").wait_for(timeout=30_000)
    # Streamlit may still be finishing the rerun: wait for the three saved choices to be drawn.
    page.wait_for_function("document.querySelectorAll('[role=radiogroup] input:checked').length === 3",
                           timeout=30_000)
    values = json.loads(page.evaluate(
        "JSON.stringify(Array.from(document.querySelectorAll('[role=radiogroup] input:checked'))"
        ".map(e => e.closest('label').innerText.trim()))"
    ))
    assert values == ["2", "4", "5"]
    assert page.evaluate("window.__pwned === undefined") and dialogs == []
    shot(page, "rate_page_revisit")
    page.close()
