"""Attacks on the pages (issue 22), written as the attacks.

* A session that stops being open (account disabled, session revoked or expired) while its page is on the
  screen: the Agreement page's report download and the Jury page's Resume and Stop (buttons in a fragment)
  must do nothing. Streamlit runs a download's data callable and a fragment's re-run without the page script,
  so the page's own check at the top never sees them.
* Markdown from data (rubric labels, anchors and help, import error messages, rater names) must reach the
  screen as the characters stored, never as an image fetched from another server, a link or a code span.
* Direction-control characters in a model's output must not reorder what a clinician reads.
"""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta

import pytest
from conftest import REPO
from sqlalchemy import update
from sqlmodel import Session, select
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.scriptrunner import RerunData
from streamlit.testing.v1 import AppTest, local_script_runner
from support.dashboard_support import copy_of
from support.fake_openai_server import FakeOpenAI
from support.helpers import study_named
from support.jury_support import LOCAL_A, fast_config, make_study, the_run

from medhelm_core.accounts import auth
from medhelm_core.accounts.users import add_user, disable_user
from medhelm_core.db.audit import audit_events
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Assignment, AuthSession, Criterion, Item, Job, JuryRun, Study, User, utcnow
from medhelm_core.errors import AccessDenied
from medhelm_core.jury import request_stop, run_jury
from medhelm_core.text import markdown_literal
from pages.common import TOKEN_KEY

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")

IMAGE = "![x](http://127.0.0.1:9/pixel.png)"
LINK = "[see here](https://example.org/phish)"


def page(name: str) -> str:
    return str(REPO / "pages" / f"{name}.py")


def signed_in(engine, page_name: str, username: str, password: str) -> AppTest:
    at = AppTest.from_file(page(page_name), default_timeout=60)
    with transaction(engine) as s:
        at.session_state[TOKEN_KEY] = auth.sign_in(s, username, password).token
    return at


def end_session(engine, how: str, username: str, token: str) -> None:
    """Close ``username``'s session the way an admin or the clock does, straight in the database."""
    with transaction(engine) as s:
        if how == "disabled":
            disable_user(s, username)
        elif how == "revoked":
            auth.sign_out(s, token)
        else:  # expired
            s.execute(update(AuthSession).values(expires_at=utcnow() - timedelta(minutes=1)))


def fragment_rerun(at: AppTest) -> AppTest:
    """Run ``at`` as the browser does after a click inside the page's fragment: only the fragment re-runs, not
    the page script (AppTest alone always reruns the whole page)."""
    (fragment_id,) = at._fragment_storage._fragments  # the page has one fragment
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(local_script_runner, "RerunData",
                   lambda **data: RerunData(**data, fragment_id_queue=[fragment_id]))
        return at.run()


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


# --- 2. the report download after the session closed ---------------------------------------------------------

@pytest.mark.parametrize("how", ["disabled", "revoked", "expired"])
def test_a_closed_session_downloads_no_report_from_an_open_agreement_page(tmp_path, monkeypatch, how):
    url = copy_of("rated", tmp_path)
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    deferred = []  # what Streamlit would call when the browser asks for the file
    original = MediaFileManager.add_deferred

    def keep(self, data, *args, **kwargs):
        deferred.append((data, kwargs.get("file_name")))
        return original(self, data, *args, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", keep)
    engine = make_engine(url)
    at = signed_in(engine, "agreement", "researcher", "researcher-demo").run()
    assert not at.exception
    [(build, file_name)] = deferred
    assert file_name.endswith("-calibration-report.zip")

    end_session(engine, how, "researcher", at.session_state[TOKEN_KEY])
    with pytest.raises(AccessDenied):
        build()  # Streamlit answers "Failed to generate file for download": no bytes leave
    with Session(engine) as s:
        assert not audit_events(s, actions=["report.export"])
    engine.dispose()


# --- 3. Resume and Stop in the Jury page's fragment after the account is disabled ---------------------------

@pytest.fixture
def jury_db(sqlite_engine, monkeypatch):
    with transaction(sqlite_engine) as s:
        add_user(s, "researcher", "researcher", "researcher-demo")
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_engine.url))
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    return sqlite_engine


def test_a_disabled_accounts_resume_calls_no_judge(jury_db):
    with FakeOpenAI() as server:
        make_study(jury_db, ["good"] * 2, name="s")
        run_jury(jury_db, study_named(jury_db, "s"), fast_config(server.base_url, (LOCAL_A,)))
        make_study(jury_db, ["good"] * 2, name="s", benchmark="aci_bench")  # two items the run has not judged
        at = signed_in(jury_db, "jury", "researcher", "researcher-demo").run()
        at.selectbox[0].select("s").run()
        assert not at.exception
        calls = len(server.calls)
        with Session(jury_db) as s:
            run_id = s.exec(select(JuryRun.id)).one()
        before = the_run(jury_db, run_id)
        resume = button(at, "Resume")

        end_session(jury_db, "disabled", "researcher", at.session_state[TOKEN_KEY])
        resume.click()
        at = fragment_rerun(at)
        with Session(jury_db) as s:
            assert not s.exec(select(Job)).all()  # nothing queued for a worker
        time.sleep(0.5)  # a run started anyhow would have called by now
        assert len(server.calls) == calls == 2
        after = the_run(jury_db, run_id)
        assert (after.status, after.calls_done) == (before.status, before.calls_done)
        assert "jury_run" not in at.session_state
        assert any(w.value == "Please sign in." for w in at.warning)


def the_run_started(engine) -> bool:
    with Session(engine) as s:
        return s.exec(select(JuryRun.id).where(JuryRun.status == "running")).first() is not None


def test_a_disabled_accounts_stop_leaves_the_run_alone(jury_db):
    with FakeOpenAI(latency=0.2) as server:
        make_study(jury_db, ["good"] * 60, name="slow")
        stop_switch = threading.Event()  # a worker working the run
        worker = threading.Thread(target=run_jury, args=(jury_db, study_named(jury_db, "slow"),
                                                         fast_config(server.base_url, (LOCAL_A,), concurrency=1)),
                                  kwargs={"stop": stop_switch})
        worker.start()
        while not the_run_started(jury_db):
            time.sleep(0.05)
        with Session(jury_db) as s:
            run_id = s.exec(select(JuryRun.id)).one()
        try:
            at = signed_in(jury_db, "jury", "researcher", "researcher-demo").run()
            at.selectbox[0].select("slow").run()
            stop = button(at, "Stop")
            end_session(jury_db, "disabled", "researcher", at.session_state[TOKEN_KEY])
            stop.click()
            fragment_rerun(at)
            assert the_run(jury_db, run_id).status == "running"
        finally:
            request_stop(jury_db, run_id)
            stop_switch.set()
            worker.join(30)
            assert not worker.is_alive()


def test_a_disabled_accounts_callback_does_nothing(sqlite_demo_engine, monkeypatch):
    """A callback runs before the page script: the Rate page's Next must not move a disabled clinician on."""
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    at = signed_in(sqlite_demo_engine, "rate", "clinician1", "clinician1-demo").run()
    with Session(sqlite_demo_engine) as s:
        position = f"position_{s.exec(select(Study.id).where(Study.name == 'demo')).one()}"
    assert at.session_state[position] == 0
    end_session(sqlite_demo_engine, "disabled", "clinician1", at.session_state[TOKEN_KEY])
    at = button(at, "Next →").click().run()
    assert at.session_state[position] == 0
    assert [w.value for w in at.warning] == ["Please sign in."] and not at.text


# --- 10. markdown from data ----------------------------------------------------------------------------------

MARKDOWN_ELEMENTS = ("markdown", "caption", "error", "warning", "info", "success", "subheader", "title")
UNESCAPED = re.compile(r"(?<!\\)(!\[|\]\()")  # an image or a link (the pages' own captions hold `code`)


def markdown_bodies(at: AppTest) -> list[str]:
    """Every string that Streamlit renders as markdown on the page: text elements, alerts, widget labels,
    help texts and radio options."""
    bodies = [e.value for kind in MARKDOWN_ELEMENTS for e in at.get(kind)]
    for widget in (*at.radio, *at.selectbox, *at.text_area, *at.text_input, *at.button, *at.multiselect):
        bodies += [widget.label, widget.help or ""]
    bodies += [str(option) for radio in at.radio for option in radio.options]
    return bodies


def assert_shown_as_characters(at: AppTest, *payloads: str) -> None:
    bodies = markdown_bodies(at)
    for body in bodies:
        assert not UNESCAPED.search(body), body
    for payload in payloads:
        assert any(markdown_literal(payload) in body for body in bodies), payload
        assert not any(payload in body for body in bodies), payload


def test_a_rubric_with_images_and_links_is_drawn_as_characters_on_the_rate_page(sqlite_demo_engine, monkeypatch):
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    with transaction(sqlite_demo_engine) as s:
        rubric_id = s.exec(select(Study.rubric_id).where(Study.name == "demo")).one()
        criterion = s.exec(select(Criterion).where(Criterion.rubric_id == rubric_id,
                                                   Criterion.name == "accuracy")).one()
        criterion.label = f"Accuracy {IMAGE}"
        criterion.description = f"Read {LINK} first `code` :red[alarm] :material/warning:"
        criterion.anchors = {**criterion.anchors, "5": f"perfect {IMAGE} <img src=x>"}
        s.add(criterion)
    at = signed_in(sqlite_demo_engine, "rate", "clinician1", "clinician1-demo").run()
    assert not at.exception
    assert_shown_as_characters(at, f"Accuracy {IMAGE}", f"Read {LINK} first", f"perfect {IMAGE}")
    accuracy = at.radio[0]
    assert accuracy.label == markdown_literal(f"Accuracy {IMAGE}")
    assert "\\:red\\[alarm\\]" in accuracy.help and "\\:material/warning\\:" in accuracy.help


def test_an_import_error_naming_a_hostile_file_is_drawn_as_characters(sqlite_demo_engine, monkeypatch):
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    name = f"{IMAGE.replace('/', chr(92))} {LINK.replace('/', chr(92))}.csv"  # no "/" in a file name
    at = signed_in(sqlite_demo_engine, "data", "researcher", "researcher-demo").run()
    at.file_uploader[0].upload(name, b"benchmark,instance_id,model,input,output\nmedi_qa,1,m,q\n", "text/csv")
    at = button(at, "Import").click().run()
    assert not at.exception
    [error] = at.error
    assert "line 2" in error.value
    assert_shown_as_characters(at, name)


def test_a_hostile_rater_name_is_drawn_as_characters_on_the_raters_page(sqlite_demo_engine, monkeypatch):
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    rater = f"{IMAGE}{LINK}"  # an account made before usernames had rules (or by an import)
    with transaction(sqlite_demo_engine) as s:
        user = User(username=rater, display_name=rater, role="clinician")
        s.add(user)
        s.flush()
        study_id = s.exec(select(Study.id).where(Study.name == "demo")).one()
        first = s.exec(select(User.id).where(User.username == "clinician1")).one()
        theirs = select(Assignment.item_id).where(Assignment.user_id == first)
        item = s.exec(select(Item).where(Item.study_id == study_id, Item.id.not_in(theirs)).order_by(Item.id)).first()
        item.model = f"model {IMAGE}"
        s.add(item)
        s.add(Assignment(study_id=study_id, item_id=item.id, user_id=user.id, position=0))
    at = signed_in(sqlite_demo_engine, "raters", "researcher", "researcher-demo").run()
    next(b for b in at.selectbox if b.label == "From").select(rater).run()
    at = button(at, "Reassign").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert_shown_as_characters(at, f"moved from {rater} to")


# --- 12. direction-control characters ------------------------------------------------------------------------

def test_a_right_to_left_override_is_shown_in_stored_order_with_a_marker(sqlite_demo_engine, monkeypatch):
    monkeypatch.setenv("MEDHELM_DATABASE_URL", str(sqlite_demo_engine.url))
    with transaction(sqlite_demo_engine) as s:
        uid = s.exec(select(User.id).where(User.username == "clinician1")).one()
        first = s.exec(select(Assignment).where(Assignment.user_id == uid).order_by(Assignment.position)).first()
        item = s.get(Item, first.item_id)
        item.output_text = "\u202eEVITISOP si tset"
        s.add(item)
    at = signed_in(sqlite_demo_engine, "rate", "clinician1", "clinician1-demo").run()
    assert not at.exception
    shown = [t.value for t in at.text] + [m.value for m in at.markdown]  # the output is drawn as safe markdown
    assert "⟦U+202E⟧EVITISOP si tset" in shown
    assert not any("\u202e" in text for text in shown)
    assert any("direction-control characters" in c.value for c in at.caption)
