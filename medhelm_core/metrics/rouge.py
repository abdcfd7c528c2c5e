"""ROUGE-L and ROUGE-Lsum, equal to Google's rouge-score package, fast enough for long clinical notes.

rouge-score's tokenizer rules hold exactly (lower-case, only ``[a-z0-9]`` tokens, so non-Latin text
scores 0; nltk's Porter stemming of words longer than three characters when asked): the tokens are
rouge-score's, found in one regular-expression pass with each distinct word stemmed once per scorer.
Only the longest common subsequence is replaced: rouge-score fills an n x m table in pure Python, which
takes about a second for one pair of 1,500-token notes. Here ROUGE-L's LCS length comes from rapidfuzz's
bit-parallel ``LCSseq`` on token ids, and ROUGE-Lsum's union LCS from the compiled bit-parallel walk of
:mod:`~medhelm_core.metrics.union_lcs`, which reads out the same subsequence as rouge-score (the union
depends on which of several longest subsequences is read out, so it must be the same one, not just any).

nltk and that walk (numba) are imported on first use: they take seconds to import.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
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

# rouge-score replaces every run of other characters by a space and splits at spaces, so its words are
# exactly the runs of [a-z0-9] in the lower-cased text; a stem must still be one such run to be kept.
_WORD = re.compile(r"[a-z0-9]+")
# A word never spans a line break, so one pass finds the words of every line and the breaks between them.
_WORD_OR_LINE_BREAK = re.compile(r"[a-z0-9]+|\n")
_LINE_BREAK = "\n"
_LINE_BREAK_ID = 0  # union_lcs.LINE_BREAK, which would import numba
_VALID_TOKEN = re.compile(r"^[a-z0-9]+$")  # rouge_score.tokenize.VALID_TOKEN_RE
#: Distinct words whose stems a scorer keeps (about 100 MB at most); past it the cache starts again.
_MAX_STEMS = 1 << 20


def _fmeasure(precision: float, recall: float) -> float:
    # Same operations in the same order as rouge_score.scoring.fmeasure, so the floats are identical.
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def _score(hits: int, target_tokens: int, predicted_tokens: int) -> RougeScore:
    precision = hits / predicted_tokens
    recall = hits / target_tokens
    return RougeScore(precision, recall, _fmeasure(precision, recall))


def _porter_stem() -> Callable[[str], str]:
    from nltk.stem import porter  # rouge_score.tokenizers.DefaultTokenizer's stemmer

    return porter.PorterStemmer().stem


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
    >>> sorted(scorer.score("No fever.\\nCough.", "Cough.\\nNo fever."))
    ['rougeL', 'rougeLsum']
    """

    def __init__(self, use_stemmer: bool = True) -> None:
        self.use_stemmer = use_stemmer
        self._stem = _porter_stem() if use_stemmer else None
        # Notes repeat their words: stemming each distinct word once is most of the tokenizing time saved.
        # ``stem`` is a pure function of the word, so the cache cannot change a token.
        self._stems: dict[str, str | None] = {_LINE_BREAK: _LINE_BREAK}

    def tokenize(self, text: str) -> list[str]:
        """rouge-score's tokens of ``text`` (its ``tokenize.tokenize`` with the same stemmer setting)."""
        return self._tokens(_WORD.findall(text.lower()))

    def _lines(self, text: str) -> list[str]:
        """rouge-score's tokens of each line, with ``"\\n"`` between lines, as rouge-score splits a summary
        when ``split_summaries`` is off (its default; so no nltk sentence data is needed)."""
        return self._tokens(_WORD_OR_LINE_BREAK.findall(text.lower()))

    def _tokens(self, words: list[str]) -> list[str]:
        if self._stem is None:
            return words
        stems = self._stems
        try:
            tokens = [stems[w] for w in words]
        except KeyError:
            if len(stems) > _MAX_STEMS:
                stems.clear()
                stems[_LINE_BREAK] = _LINE_BREAK
            for word in set(words).difference(stems):
                stem = self._stem(word) if len(word) > 3 else word
                stems[word] = stem if _VALID_TOKEN.match(stem) else None
            tokens = [stems[w] for w in words]
        if None in tokens:  # a stem rouge-score's final check drops (never seen, but its rule)
            return [t for t in tokens if t is not None]
        return tokens  # type: ignore[return-value]

    def rouge_l(self, reference: str | Sequence[str], prediction: str) -> RougeScore:
        """ROUGE-L of ``prediction`` against ``reference``; with several references, the one of highest F
        (first on a tie), as rouge-score's ``score_multi`` and HELM do."""
        if not isinstance(reference, str):
            return _best(self.rouge_l(r, prediction) for r in reference)
        return _rouge_l(*_token_ids(self.tokenize(reference), self.tokenize(prediction)))

    def rouge_lsum(self, reference: str | Sequence[str], prediction: str) -> RougeScore:
        """ROUGE-Lsum: summary-level LCS over sentences split at newlines, as rouge-score does when
        ``split_summaries`` is off (its default)."""
        if not isinstance(reference, str):
            return _best(self.rouge_lsum(r, prediction) for r in reference)
        return _rouge_lsum(*_token_ids(self._lines(reference), self._lines(prediction)))

    def score(self, reference: str | Sequence[str], prediction: str) -> dict[str, RougeScore]:
        """ROUGE-L and ROUGE-Lsum together (``{'rougeL': ..., 'rougeLsum': ...}``), each text tokenized
        once for both: a text's tokens are its lines' tokens end to end, since a line break separates tokens."""
        if not isinstance(reference, str):
            each = [self.score(r, prediction) for r in reference]
            return {name: _best(s[name] for s in each) for name in ("rougeL", "rougeLsum")}
        target, predicted = _token_ids(self._lines(reference), self._lines(prediction))
        words = (
            [t for t in target if t != _LINE_BREAK_ID],
            [t for t in predicted if t != _LINE_BREAK_ID],
        )
        return {"rougeL": _rouge_l(*words), "rougeLsum": _rouge_lsum(target, predicted)}


def _rouge_l(target: list[int], predicted: list[int]) -> RougeScore:
    if not target or not predicted:
        return _ZERO
    return _score(_lcs_length(target, predicted), len(target), len(predicted))


def _rouge_lsum(target: list[int], predicted: list[int]) -> RougeScore:
    """ROUGE-Lsum of token ids with ``_LINE_BREAK_ID`` between lines."""
    m = len(target) - target.count(_LINE_BREAK_ID)
    n = len(predicted) - predicted.count(_LINE_BREAK_ID)
    if not m or not n:
        return _ZERO
    if m == len(target) and n == len(predicted):
        # One line each: the union is one LCS, and its tokens never exceed their counts.
        return _score(_lcs_length(target, predicted), m, n)
    from medhelm_core.metrics.union_lcs import summary_hits

    hits = summary_hits(np.fromiter(target, np.int64, len(target)), np.fromiter(predicted, np.int64, len(predicted)))
    return _score(hits, m, n)


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


def _token_ids(*token_lists: Sequence[str]) -> list[list[int]]:
    """Tokens as small integers, one shared vocabulary: exact matching with no hash collisions. A line
    break is ``_LINE_BREAK_ID``, the id :func:`~medhelm_core.metrics.union_lcs.summary_hits` splits at."""
    vocab = {_LINE_BREAK: _LINE_BREAK_ID}
    return [[vocab.setdefault(t, len(vocab)) for t in tokens] for tokens in token_lists]


def _lcs_length(a: list[int], b: list[int]) -> int:
    from rapidfuzz.distance import LCSseq

    return int(LCSseq.similarity(a, b))
