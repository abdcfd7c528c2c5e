"""Figures kept while fresh ones are computed: the store serves current figures, serves the previous ones marked
stale while one background computation runs, replaces them when it is done, keeps and reports a failure, and
never runs two computations of one key at once; the Agreement page draws the previous figures with a note after
a new rating, then the new ones, and the report uses current figures.

Threads are synchronised with events and joins, never with sleeps: each computation below blocks on an event
the test sets, and the test waits for the store (``wait``), which returns when the computation has finished.
"""

from __future__ import annotations

import threading

import pytest
from conftest import REPO
from sqlmodel import Session, select
from streamlit.testing.v1 import AppTest
from support.dashboard_support import add_small_study, copy_of

from medhelm_core.accounts import auth
from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.models import Item, User
from medhelm_core.figures import (
    FigureKey,
    RefreshStore,
    agreement_figures,
    data_version,
    extra_figures,
    fresh_figures,
    freshness_note,
    wait_for_updates,
)
from medhelm_core.figures import cache as figures_module
from medhelm_core.rating.ratings import record_rating
from medhelm_core.rubric import rubric_spec
from medhelm_core.studies import get_study
from pages.common import TOKEN_KEY

PAGE = str(REPO / "pages" / "agreement.py")
STUDY = "a-small-study"
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")


class Computation:
    """A compute function that records each call and its thread, and can be held until the test releases it."""

    def __init__(self, value: object = None, *, hold: bool = False, error: BaseException | None = None) -> None:
        self.value, self.error = value, error
        self.calls: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self._lock = threading.Lock()
        self.running = self.most_at_once = 0

    def __call__(self) -> object:
        with self._lock:
            self.calls.append(threading.current_thread().name)
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.started.set()
        try:
            assert self.release.wait(timeout=30), "the test never released the computation"
            if self.error is not None:
                raise self.error
            return self.value
        finally:
            with self._lock:
                self.running -= 1


# -- the store ---------------------------------------------------------------------------------------------------


def test_current_figures_are_computed_once_and_returned_for_their_version():
    store, first = RefreshStore(), Computation("figures v1")
    seen = store.lookup("study", 1, first)
    assert seen.current and not seen.stale and not seen.updating and seen.error is None
    assert seen.value == "figures v1"
    assert first.calls == [threading.current_thread().name]  # a first visit computes in the caller's thread
    again = Computation("not used")
    assert store.lookup("study", 1, again).value == "figures v1"
    assert again.calls == []


def test_the_previous_figures_are_served_marked_stale_while_a_background_recompute_runs():
    store = RefreshStore()
    store.lookup("study", 1, Computation("figures v1"))
    second = Computation("figures v2", hold=True)
    seen = store.lookup("study", 2, second)  # returns at once, though the computation is held
    assert seen.stale and not seen.current and seen.updating
    assert seen.value == "figures v1" and seen.figures.version == 1
    assert second.started.wait(timeout=30)
    assert second.calls != [threading.current_thread().name]  # it runs in a thread of its own
    assert store.lookup("study", 2, second).stale and store.updating("study")
    second.release.set()
    assert store.wait("study", timeout=30)
    done = store.lookup("study", 2, Computation("not used"))
    assert done.current and not done.updating and done.value == "figures v2"
    assert second.calls and len(second.calls) == 1


def test_without_waiting_a_first_computation_runs_in_the_background_and_is_not_started_twice():
    store = RefreshStore()
    first = Computation("figures v1", hold=True)
    seen = store.lookup("study", 1, first, wait=False)  # returns at once, with nothing to draw yet
    assert seen.figures is None and seen.updating and seen.error is None and not seen.stale
    with pytest.raises(LookupError):
        _ = seen.value
    assert first.started.wait(timeout=30)
    assert first.calls != [threading.current_thread().name]
    assert store.lookup("study", 1, first, wait=False).updating  # the same computation, not a second one
    first.release.set()
    assert store.wait("study", timeout=30)
    assert store.lookup("study", 1, Computation("not used"), wait=False).value == "figures v1"
    assert len(first.calls) == 1
    failing = Computation(error=RuntimeError("no database"))
    assert store.lookup("other", 1, failing, wait=False).figures is None
    assert store.wait("other", timeout=30)
    failed = store.lookup("other", 1, failing, wait=False)
    assert failed.figures is None and not failed.updating and str(failed.error) == "no database"


def test_a_failed_recompute_keeps_its_error_and_the_previous_figures_until_retried():
    store = RefreshStore()
    store.lookup("study", 1, Computation("figures v1"))
    failing = Computation(error=RuntimeError("the database went away"))
    assert store.lookup("study", 2, failing).stale
    assert store.wait("study", timeout=30)
    seen = store.lookup("study", 2, failing)
    assert seen.stale and not seen.updating and seen.value == "figures v1"
    assert isinstance(seen.error, RuntimeError) and str(seen.error) == "the database went away"
    assert len(failing.calls) == 1  # reported, not retried in a loop
    with pytest.raises(RuntimeError, match="the database went away"):
        store.fresh("study", 2, failing)
    store.retry("study")
    fixed = Computation("figures v2")
    assert store.lookup("study", 2, fixed).stale  # recomputing in the background again
    assert store.wait("study", timeout=30)
    assert store.lookup("study", 2, fixed).value == "figures v2" and len(fixed.calls) == 1


def test_an_error_with_no_previous_figures_is_reported_to_the_page():
    store = RefreshStore()
    seen = store.lookup("study", 1, Computation(error=ValueError("too few ratings")))
    assert seen.figures is None and isinstance(seen.error, ValueError)
    with pytest.raises(ValueError, match="too few ratings"):
        _ = seen.value


def test_one_key_never_runs_two_computations_at_once():
    store = RefreshStore()
    first = Computation("figures v1", hold=True)
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(store.lookup("study", 1, first).value))
               for _ in range(6)]
    for t in threads:
        t.start()
    assert first.started.wait(timeout=30)
    first.release.set()
    for t in threads:
        t.join(timeout=30)
    assert results == ["figures v1"] * 6 and len(first.calls) == 1  # the others waited for it
    second = Computation("figures v2", hold=True)
    store.lookup("study", 2, second)
    assert second.started.wait(timeout=30)
    third = Computation("figures v3")
    for _ in range(3):  # new data while v2 is computing: v3 waits for it, no second computation starts
        assert store.lookup("study", 3, third).value == "figures v1"
    assert third.calls == [] and store.updating("study")
    second.release.set()
    assert store.wait("study", timeout=30)  # v2 done, then v3 (queued) done
    assert store.lookup("study", 3, Computation("not used")).value == "figures v3"
    assert len(second.calls) == 1 and len(third.calls) == 1
    assert first.most_at_once == second.most_at_once == third.most_at_once == 1


def test_an_export_waits_for_current_figures_and_never_takes_stale_ones():
    store = RefreshStore()
    store.lookup("study", 1, Computation("figures v1"))
    second = Computation("figures v2", hold=True)
    assert store.lookup("study", 2, second).stale
    exported: list[object] = []
    exporter = threading.Thread(target=lambda: exported.append(store.fresh("study", 2, second)))
    exporter.start()
    assert second.started.wait(timeout=30)
    second.release.set()
    exporter.join(timeout=30)
    assert exported == ["figures v2"] and len(second.calls) == 1


def test_the_least_recently_used_keys_are_dropped():
    store = RefreshStore(max_keys=2)
    for key in ("a", "b", "c"):
        store.lookup(key, 1, Computation(key))
    assert store.latest("a") is None and store.latest("c").value == "c"


# -- the page ----------------------------------------------------------------------------------------------------


@pytest.fixture
def small_study(tmp_path, monkeypatch) -> str:
    """A copy of the demo with a six-item study first in the list (cheap to recompute); no update left running."""
    url = copy_of("seeded", tmp_path)
    add_small_study(url, STUDY)
    monkeypatch.setenv("MEDHELM_DATABASE_URL", url)
    yield url
    assert wait_for_updates(timeout=60)


def open_page(url: str) -> AppTest:
    engine = make_engine(url)
    with transaction(engine) as s:
        token = auth.sign_in(s, "researcher", "researcher-demo").token
    engine.dispose()
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state[TOKEN_KEY] = token
    return at.run()


def rate(url: str, score: int) -> None:
    engine = make_engine(url)
    with transaction(engine) as s:
        study = get_study(s, STUDY)
        rubric = rubric_spec(s, study.rubric_id)
        user = s.exec(select(User).where(User.username == "clinician2")).one()
        item = s.exec(select(Item).where(Item.study_id == study.id, Item.instance_id == "0")).one()
        record_rating(s, item=item, rater=user, rubric=rubric,
                      scores={"accuracy": score, "completeness": score, "clarity": score})
    engine.dispose()


def pair_icc(at: AppTest) -> str:
    return {m.label: m.value for m in at.metric}["clinician-clinician"]


def notes(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if "Figures as of" in w.value]


def test_after_a_new_rating_the_page_draws_the_previous_figures_with_a_note_then_the_new_ones(small_study):
    at = open_page(small_study)
    before = pair_icc(at)
    assert not notes(at)
    rate(small_study, 5)
    at.run()
    assert not at.exception
    assert pair_icc(at) == before  # the previous figures, drawn at once ...
    [note] = notes(at)  # ... and said to be older than the data
    assert "have changed since" in note and "the page refreshes by itself" in note
    assert at.get("vega_lite_chart")
    assert wait_for_updates(timeout=60)
    at.run()
    assert not at.exception and not at.error
    assert not notes(at)
    assert pair_icc(at) != before


def test_a_failed_update_shows_its_error_beside_the_previous_figures(small_study, monkeypatch):
    at = open_page(small_study)
    before = pair_icc(at)

    # The update fails only once the page has drawn the older figures with its note: on a busy machine an
    # instant failure could otherwise land before the page run reads it, and the note would already be the error.
    noted = threading.Event()

    def broken(*args: object, **kwargs: object) -> None:
        noted.wait(timeout=60)
        raise RuntimeError("the engine broke")

    monkeypatch.setattr(figures_module, "compute_figures", broken)
    rate(small_study, 5)
    at.run()
    assert notes(at)
    noted.set()
    assert wait_for_updates(timeout=60)
    at.run()
    assert not at.exception
    assert pair_icc(at) == before
    [error] = [e.value for e in at.error]
    assert error.startswith("Updating the figures failed: RuntimeError: the engine broke. The figures below are as of")
    monkeypatch.undo()
    monkeypatch.setenv("MEDHELM_DATABASE_URL", small_study)
    at.button(key="agreement_retry").click().run()
    assert wait_for_updates(timeout=60)
    at.run()
    assert not at.exception and not at.error and not notes(at)
    assert pair_icc(at) != before


def test_the_report_uses_current_figures_while_the_page_shows_older_ones(small_study):
    engine = make_engine(small_study)
    with Session(engine) as s:
        study = get_study(s, STUDY)
        before = data_version(s, study)
    key = FigureKey.of(engine, study)
    old = agreement_figures(engine, key, before).value
    rate(small_study, 5)
    with Session(engine) as s:
        after = data_version(s, study)
    seen = agreement_figures(engine, key, after)
    assert seen.stale and seen.value is old and "have changed since" in freshness_note(seen)
    current = fresh_figures(engine, key)
    assert current is not old
    assert agreement_figures(engine, key, after).current
    assert not current.headline.equals(old.headline)
    engine.dispose()


def test_the_extra_tables_follow_on_their_own_and_never_hold_back_the_figures(small_study, monkeypatch):
    engine = make_engine(small_study)
    with Session(engine) as s:
        study = get_study(s, STUDY)
        before = data_version(s, study)
    key = FigureKey.of(engine, study)
    agreement_figures(engine, key, before)
    old = extra_figures(engine, key, before, "robust")  # none yet: computed here
    assert old.current and not old.value.empty

    held = Computation("robust at the new version", hold=True)
    monkeypatch.setitem(figures_module.EXTRAS, "robust", lambda figures: held())
    rate(small_study, 5)
    with Session(engine) as s:
        after = data_version(s, study)
    seen = extra_figures(engine, key, after, "robust")
    assert seen.stale and seen.value is old.value and seen.updating
    assert freshness_note(seen, "table").startswith("This table is as of")  # not the words of the figures' note
    assert held.started.wait(timeout=60)  # the table's update has begun: it waited for the current figures ...
    assert agreement_figures(engine, key, after).current  # ... which are current while the table is still computed
    assert not figures_module.figures_updating(key)  # the page draws the current figures now ...
    assert figures_module.extra_updating(key, "robust")  # ... and keeps polling for the table
    held.release.set()
    assert wait_for_updates(timeout=60)
    assert extra_figures(engine, key, after, "robust").value == "robust at the new version"
    assert not figures_module.extra_updating(key, "robust")
    engine.dispose()
