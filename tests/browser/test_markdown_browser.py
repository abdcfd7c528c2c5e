"""Markdown from data in a real Chromium (issue 22, item 10): a rubric whose label and anchor hold an image on
another server and a link is drawn as those characters; the browser never asks that server for anything."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import REPO
from sqlmodel import select
from support.helpers import browser_sign_in, free_port, start_app

from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Criterion, Study
from medhelm_core.demo import seed_demo

pytestmark = pytest.mark.browser


class Listener(BaseHTTPRequestHandler):
    """Counts every request: the image's server, which must never be asked."""

    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        Listener.requests.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:  # noqa: ANN002 - quiet
        pass


def test_an_image_in_a_rubric_label_is_shown_as_text_and_never_loaded(tmp_path, browser):
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Listener)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    image = f"![x](http://127.0.0.1:{server.server_port}/pixel.png)"
    url = f"sqlite:///{tmp_path / 'app.db'}"
    engine = make_engine(url)
    seed_demo(engine)
    with transaction(engine) as s:
        rubric_id = s.exec(select(Study.rubric_id).where(Study.name == "demo")).one()
        accuracy = s.exec(select(Criterion).where(Criterion.rubric_id == rubric_id,
                                                  Criterion.name == "accuracy")).one()
        accuracy.label = f"Accuracy {image} [see here](http://127.0.0.1:{server.server_port}/link)"
        accuracy.anchors = {**accuracy.anchors, "5": f"perfect {image}"}
        s.add(accuracy)
    base, proc = start_app(REPO, url)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        browser_sign_in(page, base, "clinician1")
        page.get_by_role("link", name="Rate").click()
        page.get_by_text("Response to rate").wait_for(timeout=30_000)
        page.get_by_text("Clarity", exact=True).wait_for(timeout=30_000)  # the radios and their anchors are drawn
        page.wait_for_timeout(1500)  # time for an image request to go out, had one been drawn
        assert Listener.requests == []
        assert page.locator(f"img[src*='{server.server_port}'], a[href*='{server.server_port}']").count() == 0
        # The characters as stored (a bare address carries an invisible word joiner, so it is not made a link).
        drawn = image.replace("http://", "http\u2060://")
        page.get_by_text(f"perfect {drawn}").wait_for(timeout=30_000)  # the anchor
        page.get_by_text(f"Accuracy {drawn} [see here]", exact=False).first.wait_for(timeout=30_000)  # the label
    finally:
        page.close()
        proc.terminate()
        proc.wait(timeout=20)
        server.shutdown()
        engine.dispose()
