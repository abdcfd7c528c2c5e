"""The bit-parallel union LCS reads out exactly the positions rouge-score's own table walk reads out."""

from __future__ import annotations

import random

import pytest
from rouge_score import rouge_scorer

import medhelm_core.metrics.union_lcs as union_lcs
from medhelm_core.metrics.union_lcs import union_lcs_mask


def _rouge_score_union(refs: list[list[int]], cands: list[list[int]]) -> list[bool]:
    mask: list[bool] = []
    for ref in refs:
        on = set().union(*[rouge_scorer.lcs_ind(ref, c) for c in cands]) if cands else set()
        mask += [i in on for i in range(len(ref))]
    return mask


def _sentences(rng: random.Random, vocabulary: int, most: int, longest: int) -> list[list[int]]:
    return [[rng.randrange(vocabulary) for _ in range(rng.randint(0, longest))] for _ in range(rng.randint(1, most))]


@pytest.mark.parametrize("cells", [union_lcs._TABLE_CELLS, 40], ids=["one-group", "many-groups"])
def test_union_equals_rouge_scores_walk_with_many_ties(monkeypatch, cells):
    # Two or three distinct tokens make many longest subsequences: only the same walk gives the same union.
    monkeypatch.setattr(union_lcs, "_TABLE_CELLS", cells)
    rng = random.Random(21)
    for _ in range(500):
        vocabulary = rng.choice([2, 3, 5, 12])
        refs, cands = _sentences(rng, vocabulary, 5, 14), _sentences(rng, vocabulary, 5, 14)
        assert union_lcs_mask(refs, cands).tolist() == _rouge_score_union(refs, cands), (refs, cands)


def test_sentences_longer_than_a_machine_word_and_tokens_no_candidate_holds():
    rng = random.Random(64)
    for _ in range(20):
        refs = _sentences(rng, 6, 3, 150)
        cands = [[t for t in c if t != 5] for c in _sentences(rng, 6, 4, 150)]  # token 5 only in references
        assert union_lcs_mask(refs, cands).tolist() == _rouge_score_union(refs, cands)


def test_no_candidate_or_no_reference_gives_an_empty_union():
    assert union_lcs_mask([[1, 2]], []).tolist() == [False, False]
    assert union_lcs_mask([[1, 2], []], [[], [3]]).tolist() == [False, False]
    assert union_lcs_mask([], [[1]]).tolist() == []
