"""Metric scores are stored with their settings, batch by batch: a stop keeps what was done, a re-run skips
it, items without a reference are counted, and the scores survive a restart."""

from __future__ import annotations

import bert_score
import pytest
from rouge_score import rouge_scorer
from sqlmodel import func, select
from support.helpers import study_named

from medhelm_core.db.engine import make_engine, transaction
from medhelm_core.db.migrate import upgrade_database
from medhelm_core.db.models import Item, MetricScore
from medhelm_core.frames import metrics_long_frame
from medhelm_core.metrics import (
    RougeSpec,
    bertscore_spec,
    compute_metrics,
    metric_scores_frame,
    metric_settings_frame,
    metric_specs,
)
from medhelm_core.studies import get_or_create_study, get_study

PAIRS = [
    ("The patient has a fever and a dry cough.", "Patient is febrile with a non-productive cough."),
    ("Take ibuprofen 400 mg twice daily.", "Ibuprofen 400 mg every 12 hours with meals."),
    ("Follow up in two weeks.", "Review in 2 weeks, or earlier if breathless."),
    ("Chest pain, rule out MI.\nECG now.", "Acute chest pain: rule out myocardial infarction.\nECG and troponin."),
    ("", "No medication changes."),
    ("Rest and fluids.", "Rest, fluids and paracetamol as needed."),
    ("Refer to cardiology.", "Cardiology referral within a week."),
]
ROUGE_ONLY = [RougeSpec("rougeL"), RougeSpec("rougeLsum")]


def _seed(engine, pairs=PAIRS, without_reference=2, study="s"):
    with transaction(engine) as session:
        target, _ = get_or_create_study(session, study)
        for k, (output, reference) in enumerate(pairs):
            session.add(Item(study_id=target.id, benchmark="medi_qa", instance_id=f"i{k}", model="m",
                             input_text="q", output_text=output, reference_text=reference))
        for k in range(without_reference):
            session.add(Item(study_id=target.id, benchmark="medi_qa", instance_id=f"none{k}", model="m",
                             input_text="q", output_text="an answer", reference_text=None if k % 2 == 0 else "  "))


def _count(engine) -> int:
    with transaction(engine) as session:
        return session.exec(select(func.count()).select_from(MetricScore)).one()


def _frame(engine, study="s"):
    with transaction(engine) as session:
        return metric_scores_frame(session, get_study(session, study))


def test_rouge_scores_are_stored_per_item_with_their_settings(engine):
    _seed(engine)
    report = compute_metrics(engine, study_named(engine, "s"), ROUGE_ONLY, batch_size=3)
    assert (report.items, report.without_reference) == (9, 2)
    assert [(m.family, m.scored, m.already_done) for m in report.metrics] == [("rougeL", 7, 0), ("rougeLsum", 7, 0)]
    frame = _frame(engine)
    assert len(frame) == 7 * 6 and frame.groupby("metric").size().eq(7).all()
    reference_scorer = rouge_scorer.RougeScorer(["rougeL", "rougeLsum"], use_stemmer=True)
    for _, group in frame.groupby("item_id"):
        output, reference = PAIRS[int(group["instance_id"].iloc[0][1:])]
        expected = reference_scorer.score(reference, output)
        got = dict(zip(group["metric"], group["value"], strict=True))
        assert got["rougeL_f"] == expected["rougeL"].fmeasure
        assert got["rougeL_p"] == expected["rougeL"].precision
        assert got["rougeLsum_r"] == expected["rougeLsum"].recall
    assert set(frame["family"]) == {"rougeL", "rougeLsum"}
    assert all(s["use_stemmer"] is True for s in frame["settings"])


def test_items_without_a_reference_are_skipped_and_counted(engine):
    _seed(engine, pairs=[], without_reference=3)
    report = compute_metrics(engine, study_named(engine, "s"), ROUGE_ONLY)
    assert (report.items, report.without_reference) == (3, 3)
    assert [m.scored for m in report.metrics] == [0, 0]
    assert _count(engine) == 0


def test_a_rerun_skips_items_already_scored_with_the_same_settings(engine):
    _seed(engine)
    compute_metrics(engine, study_named(engine, "s"), ROUGE_ONLY)
    again = compute_metrics(engine, study_named(engine, "s"), ROUGE_ONLY)
    assert [(m.scored, m.already_done) for m in again.metrics] == [(0, 7), (0, 7)]
    with transaction(engine) as session:
        session.add(Item(study_id=get_study(session, "s").id, benchmark="medi_qa", instance_id="added", model="m",
                         input_text="q", output_text="new output", reference_text="new reference"))
    more = compute_metrics(engine, study_named(engine, "s"), ROUGE_ONLY)
    assert [(m.scored, m.already_done) for m in more.metrics] == [(1, 7), (1, 7)]
    assert _count(engine) == 8 * 6


def test_other_settings_are_stored_beside_the_first(engine):
    _seed(engine)
    compute_metrics(engine, study_named(engine, "s"), [RougeSpec("rougeL", use_stemmer=True)])
    second = compute_metrics(engine, study_named(engine, "s"), [RougeSpec("rougeL", use_stemmer=False)])
    assert (second.metrics[0].scored, second.metrics[0].already_done) == (7, 0)
    variants = metric_settings_frame(_frame(engine))
    assert len(variants) == 2 and set(variants["items"]) == {7}
    assert {v["use_stemmer"] for v in variants["settings"]} == {True, False}


def test_a_stopped_run_keeps_the_batches_it_finished(engine):
    _seed(engine)

    def stop_after_first_batch(progress):
        if progress.done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compute_metrics(engine, study_named(engine, "s"), [RougeSpec("rougeL")], batch_size=3,
                        progress=stop_after_first_batch)
    assert _count(engine) == 3 * 3  # one batch of three items, F, P and R each
    seen = []
    resumed = compute_metrics(engine, study_named(engine, "s"), [RougeSpec("rougeL")], batch_size=3,
                              progress=seen.append)
    assert (resumed.metrics[0].scored, resumed.metrics[0].already_done) == (4, 3)
    assert [(p.done, p.total) for p in seen] == [(0, 4), (3, 4), (4, 4)]


def test_stored_scores_survive_a_restart(tmp_path):
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    first = make_engine(url)
    upgrade_database(first)
    _seed(first)
    compute_metrics(first, study_named(first, "s"), ROUGE_ONLY)
    before = _frame(first)
    first.dispose()
    second = make_engine(url)  # a new process would build a new engine on the same file
    after = _frame(second)
    assert after[["item_id", "metric", "value", "settings_hash"]].equals(before[["item_id", "metric", "value",
                                                                                 "settings_hash"]])
    again = compute_metrics(second, study_named(second, "s"), ROUGE_ONLY)
    assert [(m.scored, m.already_done) for m in again.metrics] == [(0, 7), (0, 7)]
    second.dispose()


def test_metrics_reach_the_agreement_engine_as_raters(engine):
    _seed(engine)
    compute_metrics(engine, study_named(engine, "s"), [RougeSpec("rougeL")])
    with transaction(engine) as session:
        long = metrics_long_frame(session, get_study(session, "s"))
    assert set(long["rater_id"]) == {"rougeL_f"}  # the F-measure is the rater; P and R stay in the exports
    assert set(long["rater_kind"]) == {"metric"} and len(long) == 7


def test_only_the_latest_settings_of_a_metric_reach_the_agreement_engine(engine):
    _seed(engine)
    compute_metrics(engine, study_named(engine, "s"), [RougeSpec("rougeL", use_stemmer=True)])
    compute_metrics(engine, study_named(engine, "s"), [RougeSpec("rougeL", use_stemmer=False)])
    with transaction(engine) as session:
        long = metrics_long_frame(session, get_study(session, "s"))
    assert len(long) == 7 and not long.duplicated(["item_id", "rater_id"]).any()


@pytest.fixture(scope="module")
def bert_spec():
    return bertscore_spec()


def _package(spec, cands, refs, **kwargs):
    p, r, f = bert_score.score(cands, refs, model_type=spec.path, num_layers=6, device="cpu", nthreads=0, **kwargs)
    return f.tolist(), p.tolist(), r.tolist()


@pytest.mark.parametrize("idf", [False, True], ids=["plain", "idf"])
def test_stored_bertscore_equals_bert_score_over_the_study(sqlite_engine, idf):
    # Outputs that are not empty: bert-score 0.3.13 cannot encode an empty text under transformers 5.
    pairs = [(o or "Nothing.", r) for o, r in PAIRS]
    _seed(sqlite_engine, pairs=pairs)
    report = compute_metrics(sqlite_engine, study_named(sqlite_engine, "s"), [bertscore_spec(idf=idf)], batch_size=3)
    assert (report.metrics[0].scored, report.device) == (7, "cpu")
    frame = _frame(sqlite_engine).sort_values(["metric", "item_id"])
    f1, p, r = _package(bertscore_spec(), [o for o, _ in pairs], [r for _, r in pairs], idf=idf)
    # Batches of three pad texts to other lengths than one call over all seven; float32 sums may then
    # differ in the last bits, so the comparison allows 1e-6.
    for metric, expected in (("bertscore_f1", f1), ("bertscore_p", p), ("bertscore_r", r)):
        got = frame[frame["metric"] == metric]["value"].tolist()
        assert got == pytest.approx(expected, abs=1e-6)
    settings = frame["settings"].iloc[0]
    assert (settings["num_layers"], settings["idf"]) == (6, idf)
    assert ("idf_corpus_sha256" in settings) is idf


def test_both_metrics_by_default_and_bertscore_not_reloaded_when_done(sqlite_engine, monkeypatch):
    _seed(sqlite_engine, pairs=[(o or "Nothing.", r) for o, r in PAIRS])
    first = compute_metrics(sqlite_engine, study_named(sqlite_engine, "s"), metric_specs())
    assert [m.family for m in first.metrics] == ["rougeL", "rougeLsum", "bertscore"]
    import medhelm_core.metrics.bertscore as module

    monkeypatch.setattr(module, "BertScoreModel", None)  # a re-run with nothing to do must not load a model
    again = compute_metrics(sqlite_engine, study_named(sqlite_engine, "s"), metric_specs())
    assert [m.already_done for m in again.metrics] == [7, 7, 7] and again.device is None
