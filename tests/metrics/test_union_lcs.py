"""The compiled union LCS reads out exactly the positions rouge-score's own table walk reads out."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

import medhelm_core.metrics.rouge as rouge
import medhelm_core.metrics.union_lcs as union_lcs
from medhelm_core.metrics.union_lcs import LINE_BREAK, summary_hits, union_lcs_mask


def _rouge_score_union(refs: list[list[int]], cands: list[list[int]]) -> list[bool]:
    mask: list[bool] = []
    for ref in refs:
        on = set().union(*[rouge_scorer.lcs_ind(ref, c) for c in cands]) if cands else set()
        mask += [i in on for i in range(len(ref))]
    return mask


def _sentences(rng: random.Random, vocabulary: int, most: int, longest: int) -> list[list[int]]:
    return [[rng.randrange(vocabulary) for _ in range(rng.randint(0, longest))] for _ in range(rng.randint(1, most))]


def _rouge_score_hits(refs: list[list[int]], cands: list[list[int]]) -> int:
    return round(rouge_scorer._summary_level_lcs(refs, cands).recall * sum(map(len, refs)))


# Reference sentences one table at a time: all at once, a few (chunks that share a boundary word), one.
TABLES = [union_lcs._TABLE_WORDS, 40, 1]
TABLE_IDS = ["all-sentences", "a-few-sentences", "one-sentence"]


@pytest.mark.parametrize("words", TABLES, ids=TABLE_IDS)
def test_union_equals_rouge_scores_walk_with_many_ties(monkeypatch, words):
    # Two or three distinct tokens make many longest subsequences: only the same walk gives the same union.
    monkeypatch.setattr(union_lcs, "_TABLE_WORDS", words)
    rng = random.Random(21)
    for _ in range(500):
        vocabulary = rng.choice([2, 3, 5, 12])
        # Up to 12 reference sentences: guards and chunk boundaries fall on every bit of a 64-bit word.
        refs, cands = _sentences(rng, vocabulary, 12, 14), _sentences(rng, vocabulary, 5, 14)
        assert union_lcs_mask(refs, cands).tolist() == _rouge_score_union(refs, cands), (refs, cands)


def test_sentences_longer_than_a_machine_word_and_tokens_no_candidate_holds():
    rng = random.Random(64)
    for _ in range(20):
        refs = _sentences(rng, 6, 3, 150)
        cands = [[t for t in c if t != 5] for c in _sentences(rng, 6, 4, 150)]  # token 5 only in references
        assert union_lcs_mask(refs, cands).tolist() == _rouge_score_union(refs, cands)


token_lines = st.lists(st.lists(st.integers(1, 4), max_size=140), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(refs=token_lines, cands=token_lines, words=st.sampled_from(TABLES))
def test_union_and_hits_equal_rouge_scores_on_any_lines(refs, cands, words):
    # Four distinct tokens, lines of up to 140 (past one and two 64-bit words) and empty lines: ties
    # everywhere, carries across words, walkers that end at a guard and walkers still walking at column 0.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(union_lcs, "_TABLE_WORDS", words)
        assert union_lcs_mask(refs, cands).tolist() == _rouge_score_union(refs, cands)
        reference = np.array([t for line in refs for t in [*line, LINE_BREAK]], dtype=np.int64)
        prediction = np.array([t for line in cands for t in [LINE_BREAK, *line]], dtype=np.int64)
        assert summary_hits(reference, prediction) == _rouge_score_hits(refs, cands)


def test_rouge_and_the_kernel_agree_on_the_line_break_id():
    assert rouge._LINE_BREAK_ID == LINE_BREAK


def test_no_candidate_or_no_reference_gives_an_empty_union():
    assert union_lcs_mask([[1, 2]], []).tolist() == [False, False]
    assert union_lcs_mask([[1, 2], []], [[], [3]]).tolist() == [False, False]
    assert union_lcs_mask([], [[1]]).tolist() == []
