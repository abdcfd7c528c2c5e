"""ROUGE-L and ROUGE-Lsum equal Google's rouge-score on any text: random, adversarial and very long."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from medhelm_core.metrics import RougeScorer, rouge_l, rouge_lsum

ADVERSARIAL = [
    "",
    " ",
    "\n",
    "\n\n\n",
    "!!! ... --- ???",
    "((()))[]{}<>",
    "日本語のテキストだけ",
    "Приём у врача: температура 38,5",
    "café naïve résumé coöperate",
    "İstanbul ǅ ß ﬁnal Ω",
    "１２３ full-width ４５６ and ٣ arabic digit",
    "emoji 🤒 fever 🌡️ 39C",
    "zero\u200bwidth\u00a0nbsp\ttab\r\ncrlf",
    "follow-up in 2-3 weeks; 5mg/day x10 days",
    "a a a a a a a a",
    "the the the patient the",
    "Running runs ran runner easily fairly generously",
    "caresses ponies ties caress cats feed agreed disabled matting mating meeting milling messing meetings",
    "A\nB\nC\nA B C\n",
    "\n\nno fever.\n\n\ncough for three days\n",
    "x" * 500,
    "0 00 000 0",
]

WORDS = ("the a patient fever cough pain of and running runs ran daily twice mg ibuprofen 5 10 x "
         "denies reports chest shortness breath history").split()
NOISE = ["\n", "\n\n", "!!", ".", ",", "é", "日本", "  ", "\t", "-", "'s", "N/A", "🤒"]


def _random_text(rng: random.Random, n_tokens: int, vocab: list[str]) -> str:
    out = []
    for _ in range(n_tokens):
        roll = rng.random()
        out.append(rng.choice(vocab) if roll < 0.8 else rng.choice(NOISE))
    return " ".join(out)


def _assert_same(ours, theirs) -> None:
    # The same integer counts and the same float operations: equal to the last bit, hence to 1e-9.
    assert (ours.precision, ours.recall, ours.fmeasure) == (theirs.precision, theirs.recall, theirs.fmeasure)
    assert abs(ours.fmeasure - theirs.fmeasure) <= 1e-9


@pytest.fixture(scope="module", params=[True, False], ids=["stemmer", "no-stemmer"])
def scorers(request):
    stem = request.param
    return RougeScorer(use_stemmer=stem), rouge_scorer.RougeScorer(["rougeL", "rougeLsum"], use_stemmer=stem)


@pytest.mark.parametrize("reference", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_texts_score_as_rouge_score_does(scorers, reference):
    ours, theirs = scorers
    for prediction in ADVERSARIAL:
        expected = theirs.score(reference, prediction)
        _assert_same(ours.rouge_l(reference, prediction), expected["rougeL"])
        _assert_same(ours.rouge_lsum(reference, prediction), expected["rougeLsum"])


def test_random_texts_with_many_ties_score_as_rouge_score_does(scorers):
    # A small vocabulary makes many longest common subsequences, so ROUGE-Lsum's union depends on reading
    # out the same one as rouge-score; newlines make multi-sentence summaries.
    ours, theirs = scorers
    rng = random.Random(20261202)
    for _ in range(400):
        vocab = WORDS[: rng.choice([3, 6, len(WORDS)])]
        reference = _random_text(rng, rng.randint(0, 80), vocab)
        prediction = _random_text(rng, rng.randint(0, 80), vocab)
        expected = theirs.score(reference, prediction)
        _assert_same(ours.rouge_l(reference, prediction), expected["rougeL"])
        _assert_same(ours.rouge_lsum(reference, prediction), expected["rougeLsum"])


def test_a_5000_token_clinical_note_scores_as_rouge_score_does(scorers):
    ours, theirs = scorers
    rng = random.Random(5000)
    vocab = WORDS + [f"term{i}" for i in range(300)]
    note = "\n".join(_random_text(rng, 25, vocab) for _ in range(200))  # about 5,000 tokens in 200 lines
    assert len(ours.tokenize(note)) > 4000
    summary = "\n".join(_random_text(rng, 20, vocab) for _ in range(25))
    one_line = " ".join(_random_text(rng, 20, vocab) for _ in range(25))
    for prediction in (summary, one_line):
        expected = theirs.score(note, prediction)
        _assert_same(ours.rouge_l(note, prediction), expected["rougeL"])
        _assert_same(ours.rouge_lsum(note, prediction), expected["rougeLsum"])


def test_long_texts_on_both_sides_score_as_rouge_score_does():
    rng = random.Random(7)
    vocab = WORDS + [f"term{i}" for i in range(100)]
    reference = " ".join(_random_text(rng, 1200, vocab).split("\n"))
    prediction = " ".join(_random_text(rng, 1200, vocab).split("\n"))
    expected = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(reference, prediction)
    _assert_same(rouge_l(reference, prediction), expected["rougeL"])


def test_several_references_take_the_best_as_rouge_score_does():
    references = ["no fever today", "the patient has a fever and a cough", "fever"]
    prediction = "patient has fever and cough"
    expected = rouge_scorer.RougeScorer(["rougeL", "rougeLsum"], use_stemmer=True).score_multi(references, prediction)
    _assert_same(rouge_l(references, prediction), expected["rougeL"])
    _assert_same(rouge_lsum(references, prediction), expected["rougeLsum"])


def test_the_stemmer_setting_is_rouge_scores():
    assert rouge_l("patients running", "patient runs", use_stemmer=True).fmeasure == 1.0
    assert rouge_l("patients running", "patient runs", use_stemmer=False).fmeasure == 0.0


def test_non_latin_text_scores_zero_as_in_rouge_score():
    assert rouge_l("発熱と咳", "発熱と咳").fmeasure == 0.0


def test_rouge_lsum_in_small_memory_chunks_scores_the_same(monkeypatch):
    # Long texts are processed in chunks of reference sentences to bound memory; a tiny budget forces one
    # reference sentence per table and must not change a score.
    import medhelm_core.metrics.union_lcs as module

    monkeypatch.setattr(module, "_TABLE_WORDS", 1)
    rng = random.Random(11)
    ours = RougeScorer(use_stemmer=False)
    theirs = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=False)
    for _ in range(150):
        reference = "\n".join(_random_text(rng, rng.randint(0, 15), WORDS[:5]) for _ in range(rng.randint(1, 6)))
        prediction = "\n".join(_random_text(rng, rng.randint(0, 15), WORDS[:5]) for _ in range(rng.randint(1, 6)))
        _assert_same(ours.rouge_lsum(reference, prediction), theirs.score(reference, prediction)["rougeLsum"])


# Few words, two of them one stem: many ties. Lines of up to 140 words span two and three 64-bit words.
lines_of_words = st.lists(st.lists(st.sampled_from(["fever", "fevers", "cough", "the", "pain."]), max_size=140),
                          min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(reference=lines_of_words, prediction=lines_of_words, separator=st.sampled_from(["\n", "\n\n", " \r\n"]))
def test_rouge_lsum_equals_rouge_score_on_any_lines_with_ties(reference, prediction, separator):
    theirs = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=True)
    reference, prediction = (separator.join(" ".join(line) for line in text) for text in (reference, prediction))
    _assert_same(rouge_lsum(reference, prediction), theirs.score(reference, prediction)["rougeLsum"])
