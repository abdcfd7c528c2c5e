"""The Agreement page's report download after a drill-down (issue 19, fix 3): the file Streamlit builds at the click
is the report of the filters on the page, however the page ran after drawing the button.

The report itself is built by :func:`medhelm_core.figures.report_archive.report_archive` (tests/report/ test it);
here it is replaced by a recorder, so the test checks what the page asks for, in a second rather than half a minute.
"""

from __future__ import annotations

import functools

from conftest import REPO
from sqlmodel import select
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest
from support.dashboard_support import copy_of

from medhelm_core.accounts import auth
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Item, Study
from medhelm_core.figures import FigureKey
from medhelm_core.figures import report_archive as archive_module
from pages.common import TOKEN_KEY


def test_the_report_downloads_for_the_pages_filters_after_a_drill_down(tmp_path, monkeypatch):
    url = copy_of("rated", tmp_path)
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    deferred = []  # what Streamlit calls, in a thread of its own, when the browser asks for the file
    original = MediaFileManager.add_deferred

    def keep(self, data, *args, **kwargs):
        deferred.append(data)
        return original(self, data, *args, **kwargs)

    asked: list[tuple] = []
    monkeypatch.setattr(MediaFileManager, "add_deferred", keep)
    monkeypatch.setattr(archive_module, "report_archive",
                        lambda engine, key, actor=None: asked.append((key, actor.username)) or b"zip")
    engine = make_engine(url)
    with transaction(engine) as s:
        token = auth.sign_in(s, "researcher", "researcher-demo").token
        item, study_id = s.exec(select(Item.id, Study.id).join(Study).where(Study.name == "demo")
                                .order_by(Item.id)).first()
    at = AppTest.from_file(str(REPO / "pages" / "agreement.py"), default_timeout=120)
    at.session_state[TOKEN_KEY] = token
    at.run()
    at.text_input(key="agreement_item_id").input(str(item)).run()  # the drill-down
    assert not at.exception
    assert f"**Item {item}**" in [m.value for m in at.markdown]

    assert deferred[-1]() == b"zip"  # the button drawn by the drill-down's run, clicked
    # Streamlit keeps the callable after the run: it is a library function bound to the filters, not a lambda of the
    # page's, which would keep the page's globals (the figures and scores of that run) alive with it
    bound = [c.cell_contents for c in deferred[-1].__closure__ if isinstance(c.cell_contents, functools.partial)]
    assert bound and bound[0].func is archive_module.report_archive
    [(key, actor)] = asked
    assert isinstance(key, FigureKey) and key.study_id == study_id and actor == "researcher"
    engine.dispose()
