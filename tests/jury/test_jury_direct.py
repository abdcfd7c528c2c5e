"""OpenAI-compatible judges through the openai SDK's client directly, and verdicts written in batches (issue 20),
against the real loopback server: retries, timeouts, refused keys, exactly-once writes, and no litellm import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import MetaData, select
from support.fake_openai_server import FakeOpenAI
from support.helpers import study_named
from support.jury_support import LOCAL_A, LOCAL_B, by_scenario, fast_config, make_study, the_run, verdicts

from medhelm_core.db.engine import transaction
from medhelm_core.db.models import Item, JuryRun
from medhelm_core.errors import MissingCredentialsError
from medhelm_core.jury import run_jury
from medhelm_core.jury.config import JudgeSpec
from medhelm_core.jury.openai_compatible import speaks_openai
from medhelm_core.jury.store import VerdictOutcome, open_run, record_verdicts

SECRET = "sk-judge-cred-0123456789abcdefXYZ"
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def server():
    with FakeOpenAI(slow_seconds=2.0) as fake:
        yield fake


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-any-value-will-do")


def test_which_judges_are_called_directly():
    assert speaks_openai(JudgeSpec(LOCAL_A, api_base="http://127.0.0.1:9/v1"))
    assert speaks_openai(JudgeSpec("openai/gpt-4o"))  # OpenAI's own API
    assert speaks_openai(JudgeSpec("hosted_vllm/llama", api_base="http://127.0.0.1:9/v1"))
    assert not speaks_openai(JudgeSpec("ollama_chat/llama3.3", api_base="http://127.0.0.1:11434"))  # Ollama's API
    assert not speaks_openai(JudgeSpec("anthropic/claude-3-7-sonnet-20250219"))


def test_an_openai_only_jury_runs_without_importing_litellm(sqlite_engine, server):
    study = make_study(sqlite_engine, ["good", "garbage_then_good", "prose"])
    script = f"""
import json, sys
sys.path.insert(0, {str(TESTS)!r})
from support.helpers import study_named
from support.jury_support import LOCAL_A, LOCAL_B, fast_config
from medhelm_core.db.engine import make_engine
from medhelm_core.jury import run_jury
engine = make_engine({str(sqlite_engine.url)!r})
summary = run_jury(engine, study_named(engine, {study!r}), fast_config({server.base_url!r}, (LOCAL_A, LOCAL_B)))
print(json.dumps({{"done": summary.done, "failed": summary.failed, "litellm": "litellm" in sys.modules,
                  "openai": "openai" in sys.modules}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "OPENAI_API_KEY": "sk-test-any-value-will-do"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"done": 6, "failed": 0, "litellm": False, "openai": True}
    assert len(server.calls) == 8  # 6 verdicts, two of them after a reminder
    assert {c["user_agent"].split("/")[0] for c in server.calls} == {"AsyncOpenAI"}  # the SDK's own client
    assert {c["max_tokens"] for c in server.calls} == {4096}
    assert len(verdicts(sqlite_engine)) == 6


def test_a_direct_judge_retries_429_with_retry_after_500_and_a_timeout(sqlite_engine, server):
    study = make_study(sqlite_engine, ["rate_limit_then_good", "server_error_then_good", "slow_then_good"])
    started = time.monotonic()
    summary = run_jury(sqlite_engine, study_named(sqlite_engine, study), fast_config(server.base_url, timeout=0.5))
    assert time.monotonic() - started >= 1.0  # the 429's Retry-After: 1 was waited out
    assert (summary.done, summary.failed) == (3, 0)
    assert {s: len(server.calls_for(s)) for s in ("rate_limit_then_good", "server_error_then_good",
                                                  "slow_then_good")} == dict.fromkeys(
        ("rate_limit_then_good", "server_error_then_good", "slow_then_good"), 2)
    assert all(v.status == "ok" and v.scores for v in verdicts(sqlite_engine))


def test_a_call_that_times_out_every_time_fails_its_verdict_and_is_asked_again_on_resume(sqlite_engine, server):
    study = make_study(sqlite_engine, ["slow_then_good", "good"])
    once = replace(fast_config(server.base_url, timeout=0.3), max_retries=0)
    first = run_jury(sqlite_engine, study_named(sqlite_engine, study), once)
    slow = by_scenario(sqlite_engine)["slow_then_good"][0]
    assert (first.done, first.failed) == (2, 1) and slow.status == "failed" and slow.raw_response == ""
    assert "gave up after 1 attempts" in slow.error and "timed out" in slow.error.lower()
    again = run_jury(sqlite_engine, study_named(sqlite_engine, study), once)  # no answer came: asked again
    assert (again.done, again.failed, again.calls_made) == (2, 0, 1)


def test_a_refused_key_stops_the_run_naming_its_variable_and_is_never_stored(engine, server, monkeypatch):
    monkeypatch.setenv("JUDGE_CRED", SECRET)
    study = make_study(engine, ["unauthorized", "unauthorized"])
    with pytest.raises(MissingCredentialsError, match="refused the key in JUDGE_CRED"):
        run_jury(engine, study_named(engine, study), fast_config(server.base_url, api_key_env="JUDGE_CRED"))
    assert server.calls[0]["authorization"] == f"Bearer {SECRET}"
    assert len(server.calls) <= 4  # the calls in flight at most (concurrency 4), never a retry
    with engine.connect() as conn:
        (run,) = conn.execute(select(JuryRun)).all()
    assert run.status == "failed" and "JUDGE_CRED" in run.config["state"]["error"]
    meta = MetaData()
    meta.reflect(engine)
    with engine.connect() as conn:
        assert SECRET not in repr([conn.execute(select(t)).all() for t in meta.tables.values()])
    with pytest.raises(MissingCredentialsError, match="refused the call without a valid key.*--api-key-env"):
        run_jury(engine, study_named(engine, study), fast_config(server.base_url))  # a local server, no variable


def test_verdicts_written_in_batches_are_stored_once_and_counted_right(engine, server):
    study = make_study(engine, ["good"] * 30 + ["garbage"] * 5)
    seen = []
    summary = run_jury(engine, study_named(engine, study), fast_config(server.base_url, (LOCAL_A, LOCAL_B),
                                                                       concurrency=12), on_progress=seen.append)
    rows = verdicts(engine)
    assert len(rows) == 70 and len({(v.item_id, v.judge, v.sample) for v in rows}) == 70
    # every (item, judge) asked once; the garbage answers once more, with the reminder (the same first message)
    assert sorted(server.attempts.values()) == [1] * 60 + [2] * 10 and len(server.calls) == 80
    run = the_run(engine, summary.run_id)
    assert (run.calls_done, run.calls_failed) == (summary.done, summary.failed) == (70, 10)
    assert (seen[-1].done, seen[-1].failed) == (70, 10)
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert run.prompt_tokens == sum(v.prompt_tokens for v in rows) == seen[-1].prompt_tokens


def outcome(item_id: int, status: str = "ok", judge: str = LOCAL_A, tokens: int = 10) -> VerdictOutcome:
    ok = status == "ok"
    return VerdictOutcome(item_id=item_id, judge=judge, cache_key="k", status=status,
                          scores={"accuracy": 4} if ok else {}, explanations={}, prompt="p",
                          raw_response="{}" if ok else "", error=None if ok else "call failed", latency_seconds=0.1,
                          prompt_tokens=tokens, completion_tokens=1)


def test_one_write_of_many_verdicts_replaces_failures_and_never_overwrites_an_ok_verdict(engine, server):
    study = make_study(engine, ["good"] * 3)
    with transaction(engine) as session:
        run_id = open_run(session, study_named(engine, study), fast_config(server.base_url)).id
        items = list(session.scalars(select(Item.id).order_by(Item.id)))
    a, b, c = items
    first = record_verdicts(engine, run_id, [outcome(a), outcome(b, "failed"), outcome(b), outcome(c, "failed")])
    assert first == ["new", "new", "replaced", "new"]
    run = the_run(engine, run_id)
    assert (run.calls_done, run.calls_failed, run.prompt_tokens) == (3, 1, 40)
    second = record_verdicts(engine, run_id, [outcome(a, tokens=99), outcome(c)])
    assert second == [None, "replaced"]  # a's verdict is ok already: kept as it was, its tokens not counted
    run = the_run(engine, run_id)
    assert (run.calls_done, run.calls_failed, run.prompt_tokens) == (3, 0, 50)
    assert sorted((v.item_id, v.status) for v in verdicts(engine)) == [(a, "ok"), (b, "ok"), (c, "ok")]
    gone = max(items) + 1000  # an item deleted meanwhile: that verdict alone is dropped, the others are kept
    assert record_verdicts(engine, run_id, [outcome(gone), outcome(a, judge=LOCAL_B)]) == [None, "new"]
    assert the_run(engine, run_id).calls_done == 4



def test_a_jury_mixing_a_direct_judge_and_a_litellm_judge_runs_both(sqlite_engine, server):
    """A provider litellm knows by its own name (LM Studio's server here) stays with litellm, beside a direct judge."""
    study = make_study(sqlite_engine, ["good", "rate_limit_then_good"])
    litellm_judge = "lm_studio/local-judge-b"
    assert not speaks_openai(JudgeSpec(litellm_judge, api_base=server.base_url))
    summary = run_jury(sqlite_engine, study_named(sqlite_engine, study),
                       fast_config(server.base_url, (LOCAL_A, litellm_judge)))
    assert (summary.done, summary.failed) == (4, 0)
    assert sorted(c["model"] for c in server.calls) == ["local-judge-a"] * 3 + ["local-judge-b"] * 3  # 429s retried
    assert {v.judge: v.scores["accuracy"] for v in verdicts(sqlite_engine)} == {LOCAL_A: 4, litellm_judge: 2}
