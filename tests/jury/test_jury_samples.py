"""Repeated samples (``samples = k``): k calls per item and judge, each cached apart, averaged by every reader,
and the judges' self-consistency (ICC(1) of the samples, share of identical samples) against a hand computation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sqlmodel import Session
from support.fake_openai_server import FakeOpenAI
from support.helpers import study_named
from support.jury_support import LOCAL_A, LOCAL_B, fast_config, make_study, verdicts

from medhelm_core.agreement.bias import self_consistency, self_consistency_sentences
from medhelm_core.errors import ValidationError
from medhelm_core.frames.jury import judge_scores_frame, jury_means
from medhelm_core.jury import run_jury
from medhelm_core.jury.config import JudgeSpec, JuryConfig, samples_warning, sha256_json
from medhelm_core.jury.store import verdict_cache_key
from medhelm_core.rubric import default_rubric

KEY = "sk-test-SECRET-0123456789abcdef"


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def test_three_samples_make_three_calls_per_item_and_judge_and_resume_makes_none(engine, server):
    study = make_study(engine, ["good", "good", "good"])
    config = fast_config(server.base_url, (LOCAL_A, LOCAL_B), temperature=0.7, samples=3)
    summary = run_jury(engine, study_named(engine, study), config)
    assert (summary.planned, summary.done, summary.failed, summary.calls_made) == (18, 18, 0, 18)
    assert len(server.calls) == 18
    stored = verdicts(engine)
    assert len(stored) == 18
    per_pair: dict[tuple[int, str], list[int]] = {}
    for v in stored:
        per_pair.setdefault((v.item_id, v.judge), []).append(v.sample)
    assert len(per_pair) == 6 and all(sorted(s) == [0, 1, 2] for s in per_pair.values())
    # each sample is cached apart; sample 0 keeps the key of a one-sample jury
    one = replace(config, samples=1)
    for v in stored:
        key = verdict_cache_key(v.item_id, config.judge(v.judge), config, v.sample)
        assert v.cache_key == key
        assert (v.cache_key == verdict_cache_key(v.item_id, config.judge(v.judge), one)) == (v.sample == 0)
    assert len({v.cache_key for v in stored}) == 18

    again = run_jury(engine, study_named(engine, study), config)
    assert (again.calls_made, again.done, again.planned) == (0, 18, 18) and len(server.calls) == 18
    assert len(verdicts(engine)) == 18

    # the readers see one score per judge, item and criterion: the mean of its samples (here equal)
    with Session(engine) as session:
        flat = judge_scores_frame(session, again.run_id)
        every = judge_scores_frame(session, again.run_id, samples=True)
    assert len(flat) == 6 * 3 and "sample" not in flat.columns
    assert len(every) == 18 * 3 and sorted(every["sample"].unique()) == [0, 1, 2]
    assert set(jury_means(flat)["n_judges"]) == {2}
    table = self_consistency(every)
    assert list(table["judge"]) == [LOCAL_A, LOCAL_B] and set(table["n_samples"]) == {3}
    assert set(table["share_identical"]) == {1.0}  # the fake judge always answers the same


def test_one_sample_is_todays_call_and_a_three_sample_run_reuses_it(sqlite_engine, server):
    study = make_study(sqlite_engine, ["good", "good"])
    single = fast_config(server.base_url, (LOCAL_A,))
    assert single.samples == 1 and "samples" not in _hash_input(single)
    # a one-sample jury hashes as before samples existed: old runs and their cached verdicts stay valid
    assert single.config_hash == sha256_json(_hash_input(single))
    first = run_jury(sqlite_engine, study_named(sqlite_engine, study), single)
    assert (first.planned, first.calls_made) == (2, 2) and {v.sample for v in verdicts(sqlite_engine)} == {0}
    request = server.calls[0]
    assert request["temperature"] == 0

    tripled = replace(single, samples=3)
    assert tripled.config_hash != single.config_hash
    second = run_jury(sqlite_engine, study_named(sqlite_engine, study), tripled)
    assert (second.planned, second.reused, second.calls_made) == (6, 2, 4)
    assert len(server.calls) == 6
    # samples 1 and 2 of that item are the same request, asked again
    assert sum(c["messages"] == request["messages"] for c in server.calls) == 3


def _hash_input(config: JuryConfig) -> dict:
    return {"judges": sorted([j.model, j.temperature] for j in config.judges),
            "prompt_template": config.template_hash, "rubric": config.rubric_hash}


@pytest.mark.parametrize("bad", [0, 11, 2.5, "x"])
def test_samples_outside_one_to_ten_is_a_clear_message(bad):
    with pytest.raises(ValidationError, match=r"samples must be a whole number from 1 to 10"):
        JuryConfig(judges=(JudgeSpec(LOCAL_A),), rubric=default_rubric(), samples=bad)


def test_repeated_samples_at_temperature_zero_get_a_warning():
    rubric = default_rubric()
    assert samples_warning(JuryConfig(judges=(JudgeSpec(LOCAL_A),), rubric=rubric)) is None
    cold = samples_warning(JuryConfig(judges=(JudgeSpec(LOCAL_A), JudgeSpec(LOCAL_B, temperature=1.0)),
                                      rubric=rubric, samples=3))
    assert cold is not None and "likely be identical" in cold and LOCAL_A in cold and LOCAL_B not in cold
    warm = JuryConfig(judges=(JudgeSpec(LOCAL_A, temperature=0.7),), rubric=rubric, samples=2)
    assert samples_warning(warm) is None
    assert JuryConfig.from_dict(warm.to_dict(), rubric).samples == 2


def test_jury_means_average_a_judges_samples_first():
    rows = [  # judge a: samples 4, 2 (mean 3); judge b: 5 and a failed sample; judge c: failed only
        (1, "a", "ok", "accuracy", 4.0, 0), (1, "a", "ok", "accuracy", 2.0, 1),
        (1, "b", "ok", "accuracy", 5.0, 0), (1, "b", "failed", None, np.nan, 1),
        (1, "c", "failed", None, np.nan, 0), (1, "c", "failed", None, np.nan, 1),
    ]
    scores = pd.DataFrame(rows, columns=["item_id", "judge", "status", "criterion", "score", "sample"])
    means = jury_means(scores)
    assert means[["score", "n_judges"]].values.tolist() == [[4.0, 2]]  # (3 + 5) / 2 over two judges


def test_self_consistency_equals_a_hand_computation():
    # judge a, 2 samples x 4 items; judge b, a failed sample on item 4 (left out), 3 items; judge c, one sample
    a = {1: (1, 1), 2: (3, 4), 3: (5, 5), 4: (2, 2)}
    b = {1: (2, 3), 2: (4, 4), 3: (5, 3)}
    rows = [("a", i, s, float(x), "ok") for i, xs in a.items() for s, x in enumerate(xs)]
    rows += [("b", i, s, float(x), "ok") for i, xs in b.items() for s, x in enumerate(xs)]
    rows += [("b", 4, 0, 3.0, "ok"), ("b", 4, 1, np.nan, "failed"), ("c", 1, 0, 3.0, "ok")]
    frame = pd.DataFrame(rows, columns=["judge", "item_id", "sample", "score", "status"]).assign(criterion="acc")
    table = self_consistency(frame).set_index("judge")

    def icc1(matrix: list[tuple[int, int]]) -> tuple[float, float, float]:
        x = np.array(matrix, dtype=float)
        n, k = x.shape
        msb = k * ((x.mean(axis=1) - x.mean()) ** 2).sum() / (n - 1)
        msw = ((x - x.mean(axis=1, keepdims=True)) ** 2).sum() / (n * (k - 1))
        f = msb / msw
        f_low, f_high = f / stats.f.ppf(0.975, n - 1, n * (k - 1)), f * stats.f.ppf(0.975, n * (k - 1), n - 1)
        return (msb - msw) / (msb + (k - 1) * msw), (f_low - 1) / (f_low + k - 1), (f_high - 1) / (f_high + k - 1)

    for judge, data, identical in (("a", a, 3 / 4), ("b", b, 1 / 3)):
        icc, low, high = icc1(list(data.values()))
        row = table.loc[judge]
        assert (row["n_items"], row["n_samples"]) == (len(data), 2)
        assert row["icc"] == pytest.approx(icc) and row["share_identical"] == pytest.approx(identical)
        assert row["ci_low"] == pytest.approx(low) and row["ci_high"] == pytest.approx(high)
    assert table.loc["a", "icc"] == pytest.approx(0.96)  # (6.125 - 0.125) / (6.125 + 0.125)
    assert table.loc["c", "n_samples"] == 1 and np.isnan(table.loc["c", "icc"])
    assert "not measured" in table.loc["c", "note"]
    words = self_consistency_sentences(table.reset_index())
    assert len(words) == 2 and words[0].startswith("a agrees with itself over 2 samples with ICC(1) 0.96")
    assert self_consistency_sentences(table.reset_index().iloc[2:]) == [
        "self-consistency: not measured (run the jury with samples >= 2)"]


def test_the_cli_refuses_samples_out_of_range_in_one_line_and_warns_at_temperature_zero(sqlite_engine, capsys):
    from medhelm_core.cli import main

    make_study(sqlite_engine, ["good"])
    url = str(sqlite_engine.url.render_as_string(hide_password=False))
    with pytest.raises(SystemExit) as exit_info:
        main(["--database-url", url, "jury", "run", "s", "--judge", LOCAL_A, "--samples", "11"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and len(err.strip().splitlines()) == 1
    assert "samples must be a whole number from 1 to 10" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["--database-url", url, "jury", "run", "s", "--judge", LOCAL_A, "--api-base", "http://127.0.0.1:9/v1",
              "--samples", "2", "--dry-run", "--json"])
    captured = capsys.readouterr()
    assert exit_info.value.code == 0 and "will likely be identical" in captured.err
    assert '"calls": 2' in captured.out


def test_the_verdicts_bias_panel_says_whether_self_consistency_was_measured(sqlite_demo_engine):
    from sqlmodel import select

    from medhelm_core.db.engine import transaction
    from medhelm_core.db.models import JudgeVerdict, JuryRun
    from medhelm_core.demo import MEDHELM_STUDY
    from medhelm_core.studies import get_study
    from medhelm_core.verdict import study_verdict

    not_measured = "self-consistency: not measured (run the jury with samples >= 2)"
    with Session(sqlite_demo_engine) as s:
        before = study_verdict(s, get_study(s, MEDHELM_STUDY), record_view=False)
    assert not_measured in before.bias_words
    with transaction(sqlite_demo_engine) as s:
        study = get_study(s, MEDHELM_STUDY)
        run_ids = select(JuryRun.id).where(JuryRun.study_id == study.id)
        for n, v in enumerate(s.exec(select(JudgeVerdict).where(JudgeVerdict.jury_run_id.in_(run_ids))).all()):
            # a second sample of every verdict, one point lower on every third
            shifted = {k: x - (1 if n % 3 == 0 and x > 1 else 0) for k, x in v.scores.items()}
            s.add(JudgeVerdict(jury_run_id=v.jury_run_id, item_id=v.item_id, judge=v.judge, sample=1,
                               status=v.status, scores=shifted, explanations=v.explanations, prompt=v.prompt,
                               raw_response=v.raw_response))
    with Session(sqlite_demo_engine) as s:
        after = study_verdict(s, get_study(s, MEDHELM_STUDY), record_view=False)
    assert not_measured not in after.bias_words
    table = after.self_consistency
    assert not table.empty and set(table["n_samples"]) == {2}
    assert (table["share_identical"] < 1).all() and (table["icc"] < 1).all()
    assert any("agrees with itself over 2 samples" in w for w in after.bias_words)
    assert after.to_dict()["self_consistency"]
