"""The jury against a real loopback OpenAI-compatible server: retries, failures, cache and resume, cost, keys."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace

import pytest
from sqlalchemy import MetaData, select
from sqlmodel import Session
from support.fake_openai_server import FakeOpenAI
from support.helpers import study_named
from support.jury_support import LOCAL_A, LOCAL_B, PRICED, by_scenario, fast_config, make_study, the_run, verdicts

from medhelm_core.db.models import AuditEvent
from medhelm_core.errors import MissingCredentialsError
from medhelm_core.export import export_study
from medhelm_core.frames import jury_long_frame, jury_runs
from medhelm_core.jury import calls as jury_calls
from medhelm_core.jury import estimate_run, item_jury_scores, run_jury, run_jury_async
from medhelm_core.jury.calls import REMINDER_SEPARATOR
from medhelm_core.jury.store import effective_status, request_stop
from medhelm_core.studies import get_study

KEY = "sk-test-SECRET-0123456789abcdef"


@pytest.fixture
def server():
    with FakeOpenAI(slow_seconds=2.0) as fake:
        yield fake


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


SCRIPTED = ["good", "prose", "fence", "garbage_then_good", "rate_limit_then_good", "server_error_then_good",
            "slow_then_good", "echo_injection", "garbage", "bad_score"]


def test_every_scripted_answer_ends_as_a_verdict_or_a_recorded_failure(engine, server):
    study = make_study(engine, SCRIPTED)
    summary = run_jury(engine, study_named(engine, study),
                       fast_config(server.base_url, (LOCAL_A, LOCAL_B), timeout=0.5))
    assert summary.status == "finished" and (summary.planned, summary.done, summary.failed) == (20, 20, 4)
    got = by_scenario(engine)
    for scenario in SCRIPTED[:8]:
        assert [v.status for v in got[scenario]] == ["ok", "ok"], scenario
        assert [v.scores for v in got[scenario]] == [
            {"accuracy": 4, "completeness": 3, "clarity": 5}, {"accuracy": 2, "completeness": 3, "clarity": 4}]
    for scenario in ("garbage", "bad_score"):
        assert {v.status for v in got[scenario]} == {"failed"}
        assert all(v.scores == {} and REMINDER_SEPARATOR in v.raw_response for v in got[scenario])
    assert "I would rather not give numbers." in got["garbage"][0].raw_response
    assert "outside the scale" in got["bad_score"][0].error


def test_transient_errors_are_retried_and_a_bad_answer_gets_one_reminder(sqlite_engine, server):
    study = make_study(sqlite_engine, ["rate_limit_then_good", "server_error_then_good", "slow_then_good",
                                       "garbage_then_good", "garbage"])
    started = time.monotonic()
    run_jury(sqlite_engine, study_named(sqlite_engine, study), fast_config(server.base_url, timeout=0.5))
    attempts = {s: len(server.calls_for(s)) for s in ("rate_limit_then_good", "server_error_then_good",
                                                      "slow_then_good", "garbage_then_good", "garbage")}
    assert attempts == {"rate_limit_then_good": 2, "server_error_then_good": 2, "slow_then_good": 2,
                        "garbage_then_good": 2, "garbage": 2}
    assert time.monotonic() - started >= 1.0  # the 429's Retry-After: 1 was honoured
    reminder = server.calls_for("garbage_then_good")[1]["messages"]
    assert [m["role"] for m in reminder] == ["user", "assistant", "user"]
    assert "could not be read" in reminder[2]["content"]
    assert all(c["temperature"] == 0 and c["max_tokens"] == 4096 for c in server.calls)


def test_a_judge_that_keeps_failing_is_recorded_as_failed_and_never_counted(engine, server):
    study = make_study(engine, ["good", "always_500", "garbage"])
    run_jury(engine, study_named(engine, study), fast_config(server.base_url, (LOCAL_A, LOCAL_B)))
    got = by_scenario(engine)
    assert "gave up after 4 attempts" in got["always_500"][0].error and got["always_500"][0].raw_response == ""
    assert len(server.calls_for("always_500")) == 8  # 4 attempts per judge
    with Session(engine) as session:
        scores = item_jury_scores(session, summary_run_id(engine))
        means = jury_long_frame(session, get_study(session, study))
    assert scores["jury_score"].tolist()[0] == pytest.approx(3.5)  # (4+3+5 + 2+3+4) / 6
    assert scores["n_judges"].tolist() == [2, 0, 0] and scores["n_failed"].tolist() == [0, 2, 2]
    assert scores["jury_score"].isna().tolist() == [False, True, True]  # no default score for a failed item
    assert set(means["item_id"]) == {scores["item_id"][0]} and set(means["n_judges"]) == {2}


def summary_run_id(engine) -> int:
    return verdicts(engine)[0].jury_run_id


def test_a_second_run_makes_no_calls_and_a_failure_without_an_answer_is_retried(engine, server):
    study = make_study(engine, ["good", "prose", "always_500"])
    config = fast_config(server.base_url)
    first = run_jury(engine, study_named(engine, study), config)
    n_calls = len(server.calls)
    second = run_jury(engine, study_named(engine, study), config)
    assert second.run_id == first.run_id and second.status == "finished"
    assert len(server.calls) - n_calls == 4  # only the verdict that failed with no answer: 4 attempts again
    assert (second.done, second.failed) == (3, 1) and len(verdicts(engine)) == 3
    server.calls.clear()
    assert run_jury(engine, study_named(engine, study),
                    fast_config(server.base_url, concurrency=1, timeout=9)).run_id == first.run_id
    assert len(server.calls_for("good")) == 0  # execution settings do not make a new run


def test_a_new_judge_reuses_the_verdicts_the_others_already_gave(engine, server):
    study = make_study(engine, ["good", "fence"])
    run_jury(engine, study_named(engine, study), fast_config(server.base_url, (LOCAL_A,)))
    server.calls.clear()
    both = run_jury(engine, study_named(engine, study), fast_config(server.base_url, (LOCAL_A, LOCAL_B)))
    assert {c["model"] for c in server.calls} == {"local-judge-b"} and len(server.calls) == 2
    assert (both.reused, both.done, both.calls_made) == (2, 4, 2)
    assert estimate_run(engine, study_named(engine, study), fast_config(server.base_url, (LOCAL_A, LOCAL_B))).calls == 0


def test_an_interrupted_run_resumes_without_repeating_or_duplicating(engine):
    with FakeOpenAI(latency=0.1) as server:
        study = make_study(engine, ["good"] * 10)
        config = fast_config(server.base_url, concurrency=2)

        async def interrupt() -> None:
            task = asyncio.create_task(run_jury_async(engine, study_named(engine, study), config))
            while sum(1 for _ in verdicts(engine)) < 3:
                await asyncio.sleep(0.05)
            task.cancel()  # what Ctrl-C does to the CLI's run
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(interrupt())
        done_before = len(verdicts(engine))
        run = the_run(engine, verdicts(engine)[0].jury_run_id)
        assert run.status == "stopped" and 3 <= done_before < 10 and run.calls_done == done_before
        calls_before = len(server.calls)
        resumed = run_jury(engine, study_named(engine, study), config)
        assert resumed.status == "finished" and resumed.done == 10
        assert len(server.calls) - calls_before == 10 - done_before
        assert len(verdicts(engine)) == 10 and len({(v.item_id, v.judge) for v in verdicts(engine)}) == 10


def test_a_stop_request_lets_calls_in_flight_finish_then_resume_completes(sqlite_engine):
    with FakeOpenAI(latency=0.1) as server:
        study = make_study(sqlite_engine, ["good"] * 30)
        config = fast_config(server.base_url, concurrency=2)
        result = {}
        row = study_named(sqlite_engine, study)
        worker = threading.Thread(target=lambda: result.setdefault("s", run_jury(sqlite_engine, row, config)))
        worker.start()
        while len(verdicts(sqlite_engine)) < 2:
            time.sleep(0.02)
        run_id = verdicts(sqlite_engine)[0].jury_run_id
        assert effective_status(the_run(sqlite_engine, run_id)) == "running"
        assert request_stop(sqlite_engine, run_id)
        worker.join(20)
        assert result["s"].status == "stopped" and result["s"].done < 30
        assert len(server.calls) == len(verdicts(sqlite_engine))  # nothing in flight was lost
        assert run_jury(sqlite_engine, study_named(sqlite_engine, study), config).done == 30


def test_tokens_and_cost_are_summed_from_litellms_usage(engine, server):
    study = make_study(engine, ["good", "garbage_then_good", "prose"])
    summary = run_jury(engine, study_named(engine, study), fast_config(server.base_url, (PRICED, LOCAL_B)))
    rows = verdicts(engine)
    served_prompt = sum(sum(len(m["content"]) for m in c["messages"]) // 4 for c in server.calls)
    assert summary.prompt_tokens == sum(v.prompt_tokens for v in rows) == served_prompt
    assert summary.completion_tokens == 50 * len(server.calls) == 400
    priced = [v for v in rows if v.judge == PRICED]
    expected = sum(v.prompt_tokens * 5e-6 + v.completion_tokens * 15e-6 for v in priced)
    assert summary.cost_usd == pytest.approx(expected, rel=1e-9) and expected > 0
    assert all(v.cost_usd == 0 for v in rows if v.judge == LOCAL_B) and summary.unpriced == [LOCAL_B]
    run = the_run(engine, summary.run_id)
    assert (run.prompt_tokens, run.cost_usd) == (summary.prompt_tokens, pytest.approx(summary.cost_usd))


def test_the_estimate_counts_calls_and_prices_known_models(sqlite_engine, server):
    study = make_study(sqlite_engine, ["good"] * 5)
    estimate = estimate_run(sqlite_engine, study_named(sqlite_engine, study),
                            fast_config(server.base_url, (PRICED, LOCAL_B)))
    assert (estimate.calls, estimate.planned, estimate.done) == (10, 10, 0)
    assert estimate.cost_usd > 0 and estimate.unpriced == [LOCAL_B] and not server.calls


def test_keys_are_never_stored_logged_or_exported(engine, server, tmp_path, caplog):
    study = make_study(engine, ["good", "garbage", "always_500"])
    run_jury(engine, study_named(engine, study), fast_config(server.base_url))
    assert {c["authorization"] for c in server.calls} == {f"Bearer {KEY}"}  # it was used ...
    meta = MetaData()
    meta.reflect(engine)
    with engine.connect() as conn:
        dump = repr([conn.execute(select(t)).all() for t in meta.tables.values()])
    assert "OPENAI_API_KEY" not in dump and KEY not in dump  # ... and is nowhere in the database
    with Session(engine) as session:
        export_study(session, get_study(session, study), tmp_path / "out")
    assert all(KEY not in p.read_text() for p in (tmp_path / "out").iterdir())
    assert KEY not in caplog.text


def test_a_missing_key_stops_before_any_call_with_the_variable_to_set(sqlite_engine, server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    study = make_study(sqlite_engine, ["good"])
    config = fast_config(server.base_url)
    hosted = replace(config, judges=tuple(replace(j, api_base=None) for j in config.judges))  # the provider's own API
    with pytest.raises(MissingCredentialsError, match="set OPENAI_API_KEY"):
        run_jury(sqlite_engine, study_named(sqlite_engine, study), hosted)
    assert not server.calls
    with Session(sqlite_engine) as session:
        (run,) = jury_runs(session, get_study(session, study))
    assert run.status == "failed" and "OPENAI_API_KEY" in run.config["state"]["error"]


def test_a_local_judge_needs_no_key(sqlite_engine, server, monkeypatch):
    """Issue 19, fix 8: a judge at its own API base (an OpenAI-compatible server on this machine) runs without any
    key variable set, and is sent a placeholder, never a real key."""
    monkeypatch.delenv("OPENAI_API_KEY")
    study = make_study(sqlite_engine, ["good", "good"])
    assert run_jury(sqlite_engine, study_named(sqlite_engine, study), fast_config(server.base_url)).done == 2
    assert {c["authorization"] for c in server.calls} == {f"Bearer {jury_calls.NO_KEY}"}


def test_litellms_missing_credentials_error_becomes_a_clear_message(sqlite_engine, server, monkeypatch):
    """litellm raises InternalServerError("Missing credentials") for an OpenAI-compatible server called without a
    key: the run stops with a message that says how to give the server its key."""
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setattr("medhelm_core.jury.runner.check_credentials", lambda litellm, config: None)
    monkeypatch.setattr(jury_calls, "api_key_for", lambda judge, litellm=None: None)
    study = make_study(sqlite_engine, ["good"])
    with pytest.raises(MissingCredentialsError, match="refused the call without a valid key.*--api-key-env"):
        run_jury(sqlite_engine, study_named(sqlite_engine, study), fast_config(server.base_url))
    assert len(verdicts(sqlite_engine)) == 0


def test_a_named_key_variable_is_used_and_required(sqlite_engine, server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    study = make_study(sqlite_engine, ["good"])
    with pytest.raises(MissingCredentialsError, match="set LOCAL_JUDGE_KEY"):
        run_jury(sqlite_engine, study_named(sqlite_engine, study),
                 fast_config(server.base_url, api_key_env="LOCAL_JUDGE_KEY"))
    monkeypatch.setenv("LOCAL_JUDGE_KEY", "local-secret-42")
    assert run_jury(sqlite_engine, study_named(sqlite_engine, study),
                    fast_config(server.base_url, api_key_env="LOCAL_JUDGE_KEY")).done == 1
    assert server.calls[-1]["authorization"] == "Bearer local-secret-42"


def test_redaction_removes_keys_from_errors():
    assert jury_calls.redact(f"bad key {KEY} given", [KEY]) == "bad key *** given"
    assert "abcdefghijklmnop" not in jury_calls.redact("Incorrect API key provided: sk-proj-abcdefghijklmnop", [])


def test_each_start_or_resume_of_a_run_is_audited(sqlite_engine, server):
    study = make_study(sqlite_engine, ["good"])
    config = fast_config(server.base_url)
    run_jury(sqlite_engine, study_named(sqlite_engine, study), config, actor="cli")
    run_jury(sqlite_engine, study_named(sqlite_engine, study), config, actor="cli")
    with Session(sqlite_engine) as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == "jury.run")).all()
    assert [(e.actor, e.details["judges"], e.details["resumed"]) for e in events] == [
        ("cli", [LOCAL_A], False), ("cli", [LOCAL_A], True)]
    assert KEY not in repr([e.details for e in events])
