"""The Rate page in a real Chromium at 1280x800, as a clinician spends a day on it: three items rated with the
keyboard alone (each next item at the top of the page, its first criterion ready for a key), markdown in a model's
output drawn as formatting that loads and links nothing, and a clinician in two studies who stays in the second
after submitting there.

One app and one browser serve the whole module. With MEDHELM_SCREENSHOTS set, the pages are saved there.
"""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import REPO
from sqlmodel import Session, select
from support.helpers import browser_sign_in, free_port, start_app

from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Assignment, Item, RatingSubmission, Study, User
from medhelm_core.demo import seed_demo
from medhelm_core.rating.assignment import assign_balanced
from medhelm_core.studies import get_or_create_study

pytestmark = pytest.mark.browser
SHOTS = Path(os.environ["MEDHELM_SCREENSHOTS"]) if os.environ.get("MEDHELM_SCREENSHOTS") else None
SECOND = "A second study"


class Listener(BaseHTTPRequestHandler):
    """Counts every request: the server an output's image and link point at, which must never be asked."""

    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        Listener.requests.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:  # noqa: ANN002 - quiet
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    listener = ThreadingHTTPServer(("127.0.0.1", free_port()), Listener)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    port = listener.server_port
    url = f"sqlite:///{tmp_path_factory.mktemp('rate') / 'app.db'}"
    engine = make_engine(url)
    seed_demo(engine)
    with transaction(engine) as s:
        # clinician1's first item: an output in markdown with everything that must not load, link or run.
        uid = s.exec(select(User.id).where(User.username == "clinician1")).one()
        first = s.exec(select(Assignment).where(Assignment.user_id == uid).order_by(Assignment.position)).first()
        item = s.get(Item, first.item_id)
        item.output_text = (
            "## Plan\n\n- **Stop lisinopril** today\n- Start losartan 50 mg\n\n"
            f"![scan](http://127.0.0.1:{port}/pixel.png) [leaflet](http://127.0.0.1:{port}/link) "
            f"http://127.0.0.1:{port}/bare <img src=x onerror=\"window.__pwned = 1\"> "
            "<script>window.__pwned = 2</script> costs $5 to $10"
        )
        s.add(item)
        # clinician2 also rates in a second study.
        second, _ = get_or_create_study(s, "second", title=SECOND)
        for n in range(3):
            s.add(Item(study_id=second.id, benchmark="b", instance_id=f"i{n}", model="m", input_text=f"question {n}",
                       output_text=f"answer {n}"))
        s.flush()
        assign_balanced(s, second, 1, ["clinician2"])
    base, proc = start_app(REPO, url)
    yield base, engine, port
    proc.terminate()
    proc.wait(timeout=20)
    engine.dispose()
    listener.shutdown()


def shot(page, name: str) -> None:  # noqa: ANN001 - a Page
    if SHOTS:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"))


def submissions(engine, username: str) -> list[RatingSubmission]:
    with Session(engine) as s:
        uid = s.exec(select(User.id).where(User.username == username)).one()
        return list(s.exec(select(RatingSubmission).where(RatingSubmission.rater_id == uid)
                           .order_by(RatingSubmission.id)).all())


def focused_criterion(page) -> str | None:  # noqa: ANN001 - a Page
    return page.evaluate("(document.activeElement && document.activeElement.closest('[role=radiogroup]') || "
                         "{getAttribute: () => null}).getAttribute('aria-label')")


def scrolled_to_top(page) -> bool:  # noqa: ANN001 - a Page
    return page.evaluate("[document.scrollingElement, ...document.querySelectorAll('[data-testid=stMain], "
                         "[data-testid=stAppViewContainer]')].every(e => !e || e.scrollTop === 0)")


def test_three_items_are_rated_with_the_keyboard_alone_and_markdown_loads_nothing(served, browser):
    base, engine, port = served
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    browser_sign_in(page, base, "clinician1")
    page.get_by_role("link", name="Rate").click()
    page.get_by_text("0 of 32 done").wait_for(timeout=30_000)
    page.wait_for_function("document.activeElement && document.activeElement.closest('[role=radiogroup]')",
                           timeout=30_000)
    assert focused_criterion(page) == "Accuracy"

    # The output's markdown is formatting; its image, link, bare address, HTML and script are characters.
    response = page.locator("[class*='st-key-rate_text_response_']")
    response.locator("strong", has_text="Stop lisinopril").wait_for()
    assert response.locator("li").count() == 2 and response.locator("h1, h2, h3").count() == 0
    assert page.locator(f"img[src*='{port}'], a[href*='{port}'], img[src='x']").count() == 0
    response.get_by_text("[image: scan] leaflet (http", exact=False).wait_for()
    response.get_by_text("<script>window.__pwned = 2</script> costs $5 to $10", exact=False).wait_for()
    # Everything fits one screen: the submit button and the whole response box are in the 800 px viewport.
    submit_box = page.get_by_role("button", name="Submit rating").bounding_box()
    assert submit_box["y"] + submit_box["height"] <= 800
    box = response.bounding_box()
    assert box["y"] + box["height"] <= 800
    shot(page, "rate_keyboard_first_item")

    typed = [("4", "3", "5"), ("2", "2", "3"), ("5", "4", "4")]
    for done, keys in enumerate(typed, start=1):
        for key in keys:
            page.keyboard.press(key)
        if done == 2:  # Tab from the last criterion to the comment; Enter there submits too
            page.keyboard.press("Tab")
            page.keyboard.type("dose too high")
        page.keyboard.press("Enter")
        page.get_by_text(f"{done} of 32 done").wait_for(timeout=30_000)
        page.get_by_text(f"Item {done + 1} of 32").wait_for(timeout=30_000)
        page.wait_for_function("document.activeElement && document.activeElement.closest('[role=radiogroup]')",
                               timeout=30_000)
        assert focused_criterion(page) == "Accuracy" and scrolled_to_top(page)
    saved = submissions(engine, "clinician1")
    assert [tuple(str(s.scores[c]) for c in ("accuracy", "completeness", "clarity")) for s in saved] == typed
    assert [s.comment for s in saved] == ["", "dose too high", ""]

    # K goes back to the third item, with its scores; J comes forward again.
    page.keyboard.press("k")
    page.get_by_role("button", name="Save revision").wait_for(timeout=30_000)
    page.wait_for_function("document.querySelectorAll('[role=radiogroup] input:checked').length === 3",
                           timeout=30_000)
    assert page.evaluate("Array.from(document.querySelectorAll('[role=radiogroup] input:checked'))"
                         ".map(e => e.closest('label').innerText.trim())") == ["5", "4", "4"]
    # The page has answered K once the item's first criterion holds the focus: a key pressed before that is the
    # keyboard's to ignore (it would land on the form on its way out), so J waits for it, as a clinician sees it.
    page.wait_for_function("document.activeElement && document.activeElement.closest('[role=radiogroup]')",
                           timeout=30_000)
    page.keyboard.press("j")
    page.get_by_role("button", name="Submit rating").wait_for(timeout=30_000)
    page.get_by_text("Item 4 of 32").wait_for()
    shot(page, "rate_keyboard_fourth_item")
    assert Listener.requests == [] and dialogs == []
    assert page.evaluate("window.__pwned === undefined")
    page.close()


def test_a_clinician_in_two_studies_stays_in_the_second_after_submitting(served, browser):
    base, engine, _ = served
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    browser_sign_in(page, base, "clinician2")
    page.get_by_role("link", name="Rate").click()
    page.get_by_text("0 of 32 done").wait_for(timeout=30_000)
    page.get_by_role("combobox", name="Study").click()
    page.get_by_role("option", name=SECOND).click()
    page.get_by_text("0 of 3 done").wait_for(timeout=30_000)
    for criterion, score in (("Accuracy", "4"), ("Completeness", "3"), ("Clarity", "5")):
        page.get_by_role("radiogroup", name=criterion).get_by_text(score, exact=True).click()
    page.get_by_role("button", name="Submit rating").click()
    page.get_by_text("1 of 3 done").wait_for(timeout=30_000)
    page.get_by_text("Item 2 of 3").wait_for(timeout=30_000)
    page.wait_for_timeout(300)  # a moment for anything that would switch the study back
    assert page.get_by_role("combobox", name="Study").input_value() == SECOND
    assert page.get_by_text("of 32 done").count() == 0
    shot(page, "rate_second_study")
    with Session(engine) as s:
        second_items = set(s.exec(select(Item.id).join(Study, Study.id == Item.study_id)
                                  .where(Study.name == "second")).all())
    saved = submissions(engine, "clinician2")
    assert len(saved) == 1 and {s.item_id for s in saved} <= second_items
    page.close()
