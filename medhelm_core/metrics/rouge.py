"""ROUGE-L and ROUGE-Lsum, equal to Google's rouge-score package, fast enough for long clinical notes.

rouge-score's own tokenizer is reused, so its rules hold exactly (lower-case, only ``[a-z0-9]`` tokens, so
non-Latin text scores 0; Porter stemming of words longer than three characters when asked). Only the
longest common subsequence is replaced: rouge-score fills an n x m table in pure Python, which takes about
a second for one pair of 1,500-token notes. Here the LCS length comes from rapidfuzz's bit-parallel
``LCSseq`` on token ids, and ROUGE-Lsum's union LCS from a numpy table read out with rouge-score's own
tie-breaking (the union depends on which of several longest subsequences is read out, so the read-out
must be the same one, not just any LCS).

rouge-score and nltk are imported on first use: nltk alone takes seconds to import.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["RougeScore", "RougeScorer", "rouge_l", "rouge_lsum"]


@dataclass(frozen=True)
class RougeScore:
    """Precision, recall and F-measure of one prediction against its reference, each in [0, 1]."""

    precision: float
    recall: float
    fmeasure: float


_ZERO = RougeScore(0.0, 0.0, 0.0)


def _fmeasure(precision: float, recall: float) -> float:
    # Same operations in the same order as rouge_score.scoring.fmeasure, so the floats are identical.
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


class _MemoStemmer:
    """nltk's Porter stemmer (the one rouge-score uses) with a cache: notes repeat their words, and
    stemming each occurrence again is most of rouge-score's tokenising time. ``stem`` is a pure function
    of the word, so the cache cannot change a token."""

    def __init__(self) -> None:
        from nltk.stem import porter

        self.stem = lru_cache(maxsize=1 << 18)(porter.PorterStemmer().stem)


class RougeScorer:
    """ROUGE-L and ROUGE-Lsum with rouge-score's tokenizer; one instance can score many pairs.

    Parameters
    ----------
    use_stemmer : bool
        Porter-stem tokens as ``rouge_scorer.RougeScorer(..., use_stemmer=True)`` does. HELM scores with
        the stemmer on, so that is the default.

    Examples
    --------
    >>> scorer = RougeScorer(use_stemmer=True)
    >>> round(scorer.rouge_l("The quick brown fox jumps", "the quick fox jumped").fmeasure, 4)
    0.8889
    """

    def __init__(self, use_stemmer: bool = True) -> None:
        from rouge_score import tokenize

        self.use_stemmer = use_stemmer
        self._tokenize = tokenize.tokenize
        self._stemmer = _MemoStemmer() if use_stemmer else None

    def tokenize(self, text: str) -> list[str]:
        """rouge-score's tokens of ``text`` (its ``tokenize.tokenize`` with the same stemmer setting)."""
        return self._tokenize(text, self._stemmer)

    def rouge_l(self, reference: str | Sequence[str], prediction: str) -> RougeScore:
        """ROUGE-L of ``prediction`` against ``reference``; with several references, the one of highest F
        (first on a tie), as rouge-score's ``score_multi`` and HELM do."""
        if not isinstance(reference, str):
            return _best(self.rouge_l(r, prediction) for r in reference)
        target = self.tokenize(reference)
        predicted = self.tokenize(prediction)
        if not target or not predicted:
            return _ZERO
        a, b = _token_ids(target, predicted)
        lcs = _lcs_length(a, b)
        precision = lcs / len(predicted)
        recall = lcs / len(target)
        return RougeScore(precision, recall, _fmeasure(precision, recall))

    def rouge_lsum(self, reference: str | Sequence[str], prediction: str) -> RougeScore:
        """ROUGE-Lsum: summary-level LCS over sentences split at newlines, as rouge-score does when
        ``split_summaries`` is off (its default; so no nltk sentence data is needed)."""
        if not isinstance(reference, str):
            return _best(self.rouge_lsum(r, prediction) for r in reference)
        ref_sents = [self.tokenize(s) for s in _sentences(reference)]
        can_sents = [self.tokenize(s) for s in _sentences(prediction)]
        if not ref_sents or not can_sents:
            return _ZERO
        m = sum(map(len, ref_sents))
        n = sum(map(len, can_sents))
        if not n or not m:
            return _ZERO
        hits = _summary_hits(ref_sents, can_sents)
        recall = hits / m
        precision = hits / n
        return RougeScore(precision, recall, _fmeasure(precision, recall))


def rouge_l(reference: str | Sequence[str], prediction: str, *, use_stemmer: bool = True) -> RougeScore:
    """ROUGE-L of one pair, equal to ``rouge_scorer.RougeScorer(['rougeL'], use_stemmer=...)``.

    Examples
    --------
    >>> rouge_l("Take ibuprofen twice daily", "take ibuprofen daily", use_stemmer=False).recall
    0.75
    """
    return _scorer(use_stemmer).rouge_l(reference, prediction)


def rouge_lsum(reference: str | Sequence[str], prediction: str, *, use_stemmer: bool = True) -> RougeScore:
    """ROUGE-Lsum of one pair, equal to ``rouge_scorer.RougeScorer(['rougeLsum'], use_stemmer=...)``.

    Examples
    --------
    >>> rouge_lsum("No fever.\\nCough for 3 days.", "Cough for three days.\\nNo fever.", use_stemmer=False).recall
    0.8333333333333334
    """
    return _scorer(use_stemmer).rouge_lsum(reference, prediction)


@lru_cache(maxsize=2)
def _scorer(use_stemmer: bool) -> RougeScorer:
    return RougeScorer(use_stemmer)


def _best(scores: Iterable[RougeScore]) -> RougeScore:
    scores = list(scores)
    if not scores:
        raise ValueError("no references to score against")
    return scores[int(np.argmax([s.fmeasure for s in scores]))]


def _sentences(text: str) -> list[str]:
    return [s for s in text.split("\n") if len(s)]


def _token_ids(*token_lists: list[str]) -> list[list[int]]:
    """Tokens as small integers, one shared vocabulary: exact matching with no hash collisions."""
    vocab: dict[str, int] = {}
    return [[vocab.setdefault(t, len(vocab)) for t in tokens] for tokens in token_lists]


def _lcs_length(a: list[int], b: list[int]) -> int:
    from rapidfuzz.distance import LCSseq

    return int(LCSseq.similarity(a, b))


def _summary_hits(ref_sents: list[list[str]], can_sents: list[list[str]]) -> int:
    """rouge-score's ``_summary_level_lcs`` hit count: the union LCS of each reference sentence with every
    candidate sentence, each token counted at most as often as it occurs on both sides."""
    if len(ref_sents) == 1 and len(can_sents) == 1:
        # One sentence each: the union is one LCS, and its tokens never exceed their counts.
        a, b = _token_ids(ref_sents[0], can_sents[0])
        return _lcs_length(a, b)
    ids = _token_ids(*ref_sents, *can_sents)
    unions = _union_lcs_masks(ids[: len(ref_sents)], [s for s in ids[len(ref_sents):] if s])
    counts_r = Counter(t for s in ref_sents for t in s)
    counts_c = Counter(t for s in can_sents for t in s)
    hits = 0
    # In sentence order, as rouge-score counts: the caps on repeated tokens make the order matter.
    for tokens, union in zip(ref_sents, unions, strict=True):
        for pos in np.flatnonzero(union):
            t = tokens[pos]
            if counts_c[t] > 0 and counts_r[t] > 0:
                hits += 1
                counts_c[t] -= 1
                counts_r[t] -= 1
    return hits


#: Most LCS cells held at once (int16 or int32 each) while reference sentences are processed together.
_TABLE_CELLS = 1 << 23


def _union_lcs_masks(refs: list[list[int]], cands: list[list[int]]) -> list[np.ndarray]:
    """For each reference sentence, which of its positions lie on the LCS that rouge-score reads out
    against any candidate sentence (the union LCS), as a boolean mask.

    All candidate sentences are laid side by side in one row of columns, each segment starting with its
    own zero column, and reference sentences of similar length are stacked, so one numpy row update
    serves every (reference, candidate) pair of a chunk. A row of the LCS table is
    ``T[i][j] = max(T[i-1][j], max over k <= j where r[i-1] == c[k-1] of T[i-1][k-1] + 1)``,
    a running maximum, reset at each segment by lifting segment s by ``s * (len(r) + 1)``.
    """
    masks = [np.zeros(len(r), dtype=bool) for r in refs]
    order = sorted((k for k in range(len(refs)) if refs[k]), key=lambda k: len(refs[k]))
    if not cands or not order:
        return masks
    for group in _column_groups(cands, len(refs[order[-1]])):
        lengths = np.array([len(c) for c in group], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1]))
        width = int(starts[-1] + lengths[-1]) + 1
        cols = np.full(width, -1, dtype=np.int64)
        token_cols = np.ones(width, dtype=bool)
        token_cols[starts] = False
        cols[token_cols] = np.concatenate([np.asarray(c, dtype=np.int64) for c in group])
        segment = np.repeat(np.arange(len(group), dtype=np.int64), lengths + 1)
        pending = list(order)
        while pending:
            # The longest sentences first, as many per chunk as the cell budget allows (at least one).
            chunk = [pending.pop()]
            while pending and (len(chunk) + 1) * (len(refs[chunk[0]]) + 1) * width <= _TABLE_CELLS:
                chunk.append(pending.pop())
            _read_out_chunk([refs[k] for k in chunk], [masks[k] for k in chunk], cols, segment, starts, lengths)
    return masks


def _column_groups(cands: list[list[int]], longest: int) -> list[list[list[int]]]:
    """Candidate sentences in groups whose table against the longest reference sentence fits the cell
    budget (a group holds at least one sentence), so memory stays bounded however long the texts are."""
    groups: list[list[list[int]]] = [[]]
    width = 1
    for c in cands:
        if groups[-1] and (longest + 1) * (width + len(c) + 1) > _TABLE_CELLS:
            groups.append([])
            width = 1
        groups[-1].append(c)
        width += len(c) + 1
    return groups


def _read_out_chunk(refs: list[list[int]], masks: list[np.ndarray], cols: np.ndarray, segment: np.ndarray,
                    starts: np.ndarray, lengths: np.ndarray) -> None:
    """Fill the stacked LCS tables of ``refs`` (longest first) and walk them back, marking ``masks``."""
    depth = len(refs[0])
    width = len(cols)
    r = np.full((len(refs), depth), -2, dtype=np.int64)  # -2 pads: never equal to a token or a zero column
    for k, ref in enumerate(refs):
        r[k, : len(ref)] = ref
    big = len(lengths) * (depth + 1) + depth >= 2**31
    lift = (segment * (depth + 1)).astype(np.int64 if big else np.int32)
    table = np.zeros((len(refs), depth + 1, width), dtype=np.int16 if depth < 2**15 - 1 else np.int32)
    gain = np.zeros((len(refs), width), dtype=lift.dtype)
    spans = [1 << p for p in range(int(lengths.max()).bit_length())]
    for i in range(1, depth + 1):
        prev = table[:, i - 1]
        # gain = T[i-1][j-1] + 1 where r[i-1] matches column j, else 0; column 0 is a zero column.
        np.add(prev[:, :-1], 1, out=gain[:, 1:])
        gain *= cols == r[:, i - 1 : i]
        gain += lift
        # Running maximum by doubling (a few fast vectorised maxima beat one sequential accumulate);
        # reaching back into an earlier segment is harmless, its lifted values are all smaller.
        for span in spans:
            np.maximum(gain[:, span:], gain[:, :-span].copy(), out=gain[:, span:])
        gain -= lift
        np.maximum(prev, gain, out=table[:, i])

    # Walk back from every (reference, candidate) pair at once with rouge-score's rule: on a match go
    # diagonally, else left if T[i][j-1] > T[i-1][j], else up. Pads keep a row flat, so a walk starts at
    # its own sentence's last row.
    ref_len = np.array([len(ref) for ref in refs], dtype=np.int64)
    k = np.repeat(np.arange(len(refs), dtype=np.int64), len(lengths))
    lo = np.tile(starts, len(refs))
    i = ref_len[k]
    j = lo + np.tile(lengths, len(refs))
    union = np.zeros((len(refs), depth), dtype=bool)
    live = table[k, i, j] > 0
    k, i, j, lo = k[live], i[live], j[live], lo[live]
    while len(k):
        match = cols[j] == r[k, i - 1]
        union[k[match], i[match] - 1] = True
        left = table[k, i, j - 1] > table[k, i - 1, j]
        i = i - (match | ~left)
        j = j - (match | left)
        # Once T[i][j] is 0 no match is left on this path, so the walk can stop early.
        keep = (i > 0) & (j > lo)
        keep[keep] = table[k[keep], i[keep], j[keep]] > 0
        k, i, j, lo = k[keep], i[keep], j[keep], lo[keep]
    for row, mask in enumerate(masks):
        mask |= union[row, : len(mask)]
