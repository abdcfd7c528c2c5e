"""Batch mode (issue 20, item 2): the calls go through a provider's Files and Batches API, the results are stored
as verdicts through the live path, the batches are split to the limits, and a run resumes without submitting any
call twice, against the loopback server's /v1/files and /v1/batches."""

from __future__ import annotations

import threading
import time

import pytest
from sqlmodel import Session, select
from support.fake_openai_server import FakeOpenAI, default_scores
from support.helpers import study_named
from support.jury_support import LOCAL_B, PRICED, by_scenario, fast_config, make_study, verdicts

from medhelm_core.db.models import BatchStatus, JuryBatch, JuryRun, RunStatus, VerdictStatus
from medhelm_core.errors import ValidationError
from medhelm_core.jury import batch_store, request_stop, run_jury
from medhelm_core.jury.batch import run_jury_batch
from medhelm_core.jury.batch_lines import BatchLimits

FAST = BatchLimits(poll_seconds=0.05)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")


def batch_rows(engine) -> list[JuryBatch]:
    with Session(engine) as session:
        return list(session.exec(select(JuryBatch).order_by(JuryBatch.id)).all())


def test_a_batch_run_stores_every_verdict_with_its_scores_and_failures(engine):
    scenarios = ["good", "good", "garbage", "always_500", "batch_line_failed", "batch_expired", "garbage_then_good"]
    make_study(engine, scenarios)
    with FakeOpenAI() as server:
        server.batches.in_progress_polls = 2
        summary = run_jury_batch(engine, study_named(engine, "s"), fast_config(server.base_url, (PRICED, LOCAL_B)),
                                 limits=FAST)
    assert (summary.status, summary.planned, summary.done, summary.calls_made) == (RunStatus.finished, 14, 14, 14)
    assert summary.failed == 10 and summary.unpriced == [LOCAL_B]
    assert len(server.batches.created) == 2  # one batch per judge: a batch holds one model
    assert set(server.batches.submitted.values()) == {1} and len(server.batches.submitted) == 14
    found = by_scenario(engine)
    for v in found["good"]:
        assert v.status == VerdictStatus.ok and v.scores == default_scores(v.judge.split("/")[-1])
        assert v.prompt_tokens > 0 and v.completion_tokens == 50
    priced = next(v for v in found["good"] if v.judge == PRICED)
    assert priced.cost_usd == pytest.approx(priced.prompt_tokens * 2.5e-6 + 50 * 7.5e-6)  # the map's batch price
    assert all(v.cost_usd == 0 for v in found["good"] if v.judge == LOCAL_B)
    # An unreadable answer is failed with its reason and text: no reminder in batch mode.
    for scenario in ("garbage", "garbage_then_good"):
        for v in found[scenario]:
            assert v.status == VerdictStatus.failed and v.raw_response and "batch mode sends no reminder" in v.error
    assert {v.error.split(":")[0] for v in found["always_500"]} == {"batch request failed (HTTP 500)"}
    assert all("HTTP 400" in v.error and "max_tokens" in v.error for v in found["batch_line_failed"])
    assert all("completion window expired" in v.error and not v.raw_response for v in found["batch_expired"])
    assert [(r.status, r.provider_status) for r in batch_rows(engine)] == [(BatchStatus.collected, "completed")] * 2
    # The next run asks again only where no answer came back, in a new batch; the unreadable answers stay.
    with FakeOpenAI() as again:
        summary = run_jury_batch(engine, study_named(engine, "s"), fast_config(again.base_url, (PRICED, LOCAL_B)),
                                 limits=FAST)
    assert summary.calls_made == 6 and sorted(again.batches.submitted.values()) == [1] * 6


def test_calls_are_split_to_the_batch_limit(engine):
    make_study(engine, ["good"] * 10)
    with FakeOpenAI() as server:
        summary = run_jury_batch(engine, study_named(engine, "s"), fast_config(server.base_url),
                                 limits=BatchLimits(max_requests=4, poll_seconds=0.05))
        sizes = [server.batches.batches[b]["request_counts"]["total"] for b in server.batches.created]
    assert sizes == [4, 4, 2] and (summary.done, summary.failed) == (10, 0)
    assert sorted(server.batches.submitted.values()) == [1] * 10
    assert len(verdicts(engine)) == 10


def test_a_batch_accepted_just_before_a_crash_is_found_not_submitted_again(sqlite_engine, monkeypatch):
    """The provider accepts the batch, the process dies before its id is stored: the rerun finds it by its token."""
    make_study(sqlite_engine, ["good"] * 5)
    original = batch_store.record_submitted

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # as a kill would: after the provider's answer, before the id is written

    with FakeOpenAI() as server:
        config = fast_config(server.base_url)
        monkeypatch.setattr(batch_store, "record_submitted", crash)
        with pytest.raises(KeyboardInterrupt):
            run_jury_batch(sqlite_engine, study_named(sqlite_engine, "s"), config, limits=FAST)
        [row] = batch_rows(sqlite_engine)
        assert row.batch_id is None and len(server.batches.created) == 1
        # Meanwhile a live run would pay for those calls again: refused.
        with pytest.raises(ValidationError, match="5 calls waiting in 1 provider batch"):
            run_jury(sqlite_engine, study_named(sqlite_engine, "s"), config)
        monkeypatch.setattr(batch_store, "record_submitted", original)
        summary = run_jury_batch(sqlite_engine, study_named(sqlite_engine, "s"), config, limits=FAST)
    assert (summary.status, summary.done, summary.calls_made) == (RunStatus.finished, 5, 0)
    assert len(server.batches.created) == 1 and sorted(server.batches.submitted.values()) == [1] * 5
    assert [(r.batch_id, r.status) for r in batch_rows(sqlite_engine)] == [(server.batches.created[0], "collected")]


def test_a_stop_leaves_the_batch_at_the_provider_and_the_next_run_collects_it(sqlite_engine):
    make_study(sqlite_engine, ["good"] * 3)
    with FakeOpenAI() as server:
        server.batches.hold = True  # in progress until released
        config = fast_config(server.base_url)

        def stop_once_submitted() -> None:  # as the page's Stop button does: through the database
            deadline = time.monotonic() + 30
            while not batch_rows(sqlite_engine) or batch_rows(sqlite_engine)[0].batch_id is None:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            with Session(sqlite_engine) as session:
                run_id = session.exec(select(JuryRun.id)).one()
            assert request_stop(sqlite_engine, run_id)

        stopper = threading.Thread(target=stop_once_submitted)
        stopper.start()
        first = run_jury_batch(sqlite_engine, study_named(sqlite_engine, "s"), config, limits=FAST)
        stopper.join()
        assert (first.status, first.done, first.calls_made) == (RunStatus.stopped, 0, 3)
        assert server.batches.batches[server.batches.created[0]]["status"] == "in_progress"  # not cancelled
        server.batches.hold = False
        summary = run_jury_batch(sqlite_engine, study_named(sqlite_engine, "s"), config, limits=FAST)
    assert (summary.status, summary.done, summary.calls_made) == (RunStatus.finished, 3, 0)
    assert sorted(server.batches.submitted.values()) == [1] * 3


def test_an_anthropic_judge_is_refused_before_anything_is_sent(sqlite_engine, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
    make_study(sqlite_engine, ["good"])
    config = fast_config("http://127.0.0.1:9/v1", ("anthropic/claude-3-5-sonnet-20240620",))
    with pytest.raises(ValidationError, match="cannot send Anthropic judges"):
        run_jury_batch(sqlite_engine, study_named(sqlite_engine, "s"), config, limits=FAST)
    assert batch_rows(sqlite_engine) == [] and verdicts(sqlite_engine) == []
