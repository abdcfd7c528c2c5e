"""ROUGE-Lsum's union LCS, read out exactly as rouge-score reads it, by a compiled bit-parallel kernel.

rouge-score fills an LCS table for every (reference sentence, candidate sentence) pair and walks it back
from the bottom-right corner: on a match it goes diagonally, else left when ``T[i][j-1] > T[i-1][j]``,
else up. Which longest subsequence that walk reads out decides the union, so the same walk must be taken.

Two facts make that walk cheap without any table:

- Without a match at ``(i, j)``, ``T[i][j] = max(T[i][j-1], T[i-1][j])``, so "left if ``T[i][j-1] >
  T[i-1][j]``" is the same as "left if the column drops from row i to row i-1, else up". Within a column
  the walk therefore climbs to the nearest row at or above it that matches or where the column drops,
  then goes diagonally (a match) or left (a drop).
- A column of the table is a bit vector with a bit per reference row (Hyyro's bit-parallel LCS: a 0 bit
  where the column drops), and "the nearest such row above, for every walker at once" is one addition on
  the bit-reversed vector: its carry runs up through the rows where the walk keeps climbing.

All reference sentences sit in one vector of 64-bit words, each after a guard bit that stops carries
between them, so each candidate sentence takes a few word operations per column for every reference
sentence at once: its columns forwards (Hyyro's step), then one walker per reference sentence backwards.

The kernel is compiled by numba and cached on disk: the first call after an install (or an edit of this
file) compiles it, about 5 s of CPU; a later process loads it in about half a second.
:mod:`~medhelm_core.metrics.rouge` imports this module on first use, as numba takes a while to import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain

import numba
import numpy as np

__all__ = ["LINE_BREAK", "summary_hits", "union_lcs_mask"]

#: The token id that separates lines in :func:`summary_hits`'s input.
LINE_BREAK = 0

#: Most 64-bit words of table columns held at once (16 MB); past it the reference sentences are taken in
#: chunks, so memory stays bounded however long the texts (one sentence pair is always taken whole).
_TABLE_WORDS = 1 << 21

_ONE = np.uint64(1)
#: (shift, mask) of each swap that reverses a 64-bit word: odd and even bits, pairs, ..., the two halves.
_SWAPS = tuple((np.uint64(shift), np.uint64(mask)) for shift, mask in (
    (1, 0x5555555555555555), (2, 0x3333333333333333), (4, 0x0F0F0F0F0F0F0F0F),
    (8, 0x00FF00FF00FF00FF), (16, 0x0000FFFF0000FFFF), (32, 0x00000000FFFFFFFF)))


def _compiled(function: Callable) -> Callable:
    """``numba.njit(cache=True)``: compiled once and kept on disk, next to this file or, where that is
    read-only, in the user's cache directory (or ``NUMBA_CACHE_DIR``). Where there is no writable place at
    all, numba refuses to cache at import; then the kernel is compiled in each process instead."""
    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available for file ..."
        return numba.njit(nogil=True)(function)


def union_lcs_mask(refs: Sequence[Sequence[int]], cands: Sequence[Sequence[int]]) -> np.ndarray:
    """Which reference tokens (all sentences end to end) lie on the LCS that rouge-score reads out against
    at least one candidate sentence: rouge-score's ``_union_lcs`` of every reference sentence, as a mask.

    Parameters
    ----------
    refs, cands : sequences of token-id sequences
        Reference and candidate sentences as small non-negative integers (one vocabulary for both).

    Examples
    --------
    >>> union_lcs_mask([[1, 2, 3], [4, 1]], [[1, 3], [2]]).tolist()
    [True, True, True, False, True]
    """
    ref_tokens, ref_lengths = _flat(refs)
    cand_tokens, cand_lengths = _flat(cands)
    if not len(ref_tokens) or not len(cand_tokens):
        return np.zeros(len(ref_tokens), dtype=bool)
    return _union_kernel(ref_tokens, ref_lengths, cand_tokens, cand_lengths, _TABLE_WORDS)


def summary_hits(reference: np.ndarray, prediction: np.ndarray) -> int:
    """rouge-score's ``_summary_level_lcs`` hit count: the union LCS of each reference line with every
    prediction line, each token counted at most as often as it occurs on both sides.

    rouge-score walks the union tokens in order, decrementing both sides' counts; a union token never
    outnumbers its reference count, so only the prediction's count binds and the total is, per token,
    ``min(times in the unions, times in the prediction)``, whatever the order.

    Parameters
    ----------
    reference, prediction : 1-D int64 arrays
        Each text's token ids (small non-negative integers, one vocabulary for both), its lines separated by
        :data:`LINE_BREAK`; empty lines are allowed.

    Examples
    --------
    >>> reference = np.array([1, 2, 3, LINE_BREAK, 4, 1])  # the lines "1 2 3" and "4 1"
    >>> summary_hits(reference, np.array([1, 3, LINE_BREAK, 2]))  # 1 is twice in the unions, once here
    3
    """
    return int(_summary_hits(reference, prediction, _TABLE_WORDS))


def _flat(sentences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
    return np.fromiter(chain.from_iterable(sentences), dtype=np.int64, count=int(lengths.sum())), lengths


@_compiled
def _summary_hits(reference: np.ndarray, prediction: np.ndarray, table_words: int) -> int:  # pragma: no cover
    """:func:`summary_hits`, compiled: the prediction's count of each token decremented as rouge-score does."""
    ref_tokens, ref_lengths = _split_lines(reference)
    cand_tokens, cand_lengths = _split_lines(prediction)
    if not len(ref_tokens) or not len(cand_tokens):
        return 0
    union = _union_kernel(ref_tokens, ref_lengths, cand_tokens, cand_lengths, table_words)
    vocabulary = 1 + max(ref_tokens.max(), cand_tokens.max())
    in_candidate = np.zeros(vocabulary, dtype=np.int64)
    for t in cand_tokens:
        in_candidate[t] += 1
    hits = 0
    for p in range(len(ref_tokens)):
        if union[p] and in_candidate[ref_tokens[p]]:
            in_candidate[ref_tokens[p]] -= 1
            hits += 1
    return hits


@_compiled
def _split_lines(text: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """A text's tokens without its line breaks, and the length of each line that has tokens."""
    tokens = np.empty(len(text), dtype=np.int64)
    lengths = np.empty(len(text), dtype=np.int64)
    n_tokens = 0
    lines = 0
    length = 0
    for t in text:
        if t != LINE_BREAK:
            tokens[n_tokens] = t
            n_tokens += 1
            length += 1
        elif length:
            lengths[lines] = length
            lines += 1
            length = 0
    if length:
        lengths[lines] = length
        lines += 1
    return tokens[:n_tokens], lengths[:lines]


@_compiled
def _union_kernel(ref_tokens: np.ndarray, ref_lengths: np.ndarray, cand_tokens: np.ndarray,
                  cand_lengths: np.ndarray, table_words: int) -> np.ndarray:  # pragma: no cover - compiled
    """The union mask over ``ref_tokens``: every candidate sentence against every reference sentence.

    Reference sentence k's guard is bit ``starts[k] - 1`` and its rows the ``lengths[k]`` bits after it, of
    a vector of ``n_words`` words; the walk uses the same vector bit-reversed, as ``rev_*`` arrays.
    """
    vocabulary = 1 + max(ref_tokens.max(), cand_tokens.max())
    in_candidate = np.zeros(vocabulary, dtype=np.bool_)
    for t in cand_tokens:
        in_candidate[t] = True
    # A reference token that no candidate sentence holds matches nothing: its row of every table equals the
    # row above, and the walk climbs straight through it, so leaving it out (and off the union) changes no
    # read-out. ``bits`` holds each reference token's row bit, -1 for those left out.
    n_refs = len(ref_lengths)
    starts = np.empty(n_refs, dtype=np.int64)
    lengths = np.zeros(n_refs, dtype=np.int64)
    bits = np.full(len(ref_tokens), -1, dtype=np.int64)
    bit = 0
    p = 0
    for k in range(n_refs):
        starts[k] = bit + 1
        for _ in range(ref_lengths[k]):
            if in_candidate[ref_tokens[p]]:
                bits[p] = starts[k] + lengths[k]
                lengths[k] += 1
            p += 1
        bit += 1 + lengths[k]
    n_words = (bit + 63) >> 6
    rows = np.zeros(n_words, dtype=np.uint64)
    rev_guards = np.zeros(n_words, dtype=np.uint64)
    for k in range(n_refs):
        _set_bit(rev_guards, n_words * 64 - starts[k])
    # Match bits of each distinct reference token left in, and a last row of zeros for the candidate tokens
    # no reference holds; both ways round.
    row_of = np.full(vocabulary, -1, dtype=np.int64)
    distinct = 0
    for p in range(len(ref_tokens)):
        if bits[p] >= 0 and row_of[ref_tokens[p]] < 0:
            row_of[ref_tokens[p]] = distinct
            distinct += 1
    for t in range(vocabulary):
        if row_of[t] < 0:
            row_of[t] = distinct
    match = np.zeros((distinct + 1, n_words), dtype=np.uint64)
    for p in range(len(ref_tokens)):
        if bits[p] >= 0:
            _set_bit(rows, bits[p])
            _set_bit(match[row_of[ref_tokens[p]]], bits[p])
    rev_match = np.empty((distinct + 1, n_words), dtype=np.uint64)
    for t in range(distinct + 1):
        for w in range(n_words):
            rev_match[t, n_words - 1 - w] = _reverse(match[t, w])

    rev_union = np.zeros(n_words, dtype=np.uint64)
    longest_words = ((lengths.max() + 1 + 63) >> 6) + 1  # words one sentence can straddle
    most = cand_lengths.max()
    columns = np.empty(max(min(table_words, most * n_words), most * longest_words), dtype=np.uint64)
    cand_first = 0
    for n in cand_lengths:
        cand = cand_tokens[cand_first : cand_first + n]
        cand_first += n
        if n == 0:
            continue
        # Reference sentences k0..k1-1 at once, words w0..w1-1: as many as fit the table, at least one.
        k0 = 0
        while k0 < n_refs:
            w0 = (starts[k0] - 1) >> 6
            k1 = k0 + 1
            while k1 < n_refs and n * (((starts[k1] + lengths[k1] - 1) >> 6) + 1 - w0) <= table_words:
                k1 += 1
            w1 = ((starts[k1 - 1] + lengths[k1 - 1] - 1) >> 6) + 1
            _fill_climbable(columns, rows, match, row_of, cand, w0, w1)
            _walk(columns, rev_match, row_of, rev_guards, starts[k0:k1], lengths[k0:k1], cand, w0, w1, rev_union)
            k0 = k1
    union = np.empty(len(ref_tokens), dtype=np.bool_)
    for p in range(len(ref_tokens)):
        union[p] = bits[p] >= 0 and _get_bit(rev_union, n_words * 64 - 1 - bits[p])
    return union


@_compiled
def _fill_climbable(columns: np.ndarray, rows: np.ndarray, match: np.ndarray, row_of: np.ndarray,
                    cand: np.ndarray, w0: int, w1: int) -> None:  # pragma: no cover - compiled
    """For each candidate token j, the rows of words w0..w1-1 where the walk climbs on in column j (no drop,
    no match), bit-reversed, at ``columns[j * width:][:width]``.

    Hyyro's step ``v' = (v + (v & m)) | (v & ~m)`` makes each column from the one before; its mask keeps
    guard bits at 0, so no carry passes from one sentence to the next.
    """
    width = w1 - w0
    v = rows[w0:w1].copy()
    for j in range(len(cand)):
        m = match[row_of[cand[j]]]
        carry = np.uint64(0)
        for w in range(width):
            x = v[w]
            not_m = ~m[w0 + w]
            t = x + (x & m[w0 + w])
            s = t + carry
            carry = np.uint64((t < x) | (s < t))
            v[w] = (s | (x & not_m)) & rows[w0 + w]
            columns[j * width + width - 1 - w] = _reverse(v[w] & not_m)


@_compiled
def _walk(columns: np.ndarray, rev_match: np.ndarray, row_of: np.ndarray, rev_guards: np.ndarray,
          starts: np.ndarray, lengths: np.ndarray, cand: np.ndarray, w0: int, w1: int,
          rev_union: np.ndarray) -> None:  # pragma: no cover - compiled
    """rouge-score's ``_backtrack_norec`` for reference sentences (their ``starts`` and ``lengths``) against
    one candidate sentence whose climbable columns are filled, one walker per sentence, all at once.

    In the bit-reversed vector climbing a column is a carry: ``climb + at`` carries each walker up through
    the rows it climbs, to the nearest row that matches or drops (or to its guard, where its walk ends). A
    match then moves it one row up (diagonally), a drop leaves it on its row (one column left).
    """
    width = w1 - w0
    r0 = len(rev_union) - w1  # the words' first index in the reversed vector
    at = np.zeros(width, dtype=np.uint64)
    for k in range(len(starts)):
        if lengths[k]:
            _set_bit(at, w1 * 64 - starts[k] - lengths[k])
    for j in range(len(cand) - 1, -1, -1):
        m = rev_match[row_of[cand[j]]]
        carry_up = np.uint64(0)
        carry_diagonal = np.uint64(0)
        walking = np.uint64(0)
        for w in range(width):
            climb = columns[j * width + w]
            t = climb + at[w]
            ended = t + carry_up
            carry_up = np.uint64((t < climb) | (ended < t))
            stop = ended & ~climb
            hit = stop & m[r0 + w]
            rev_union[r0 + w] |= hit
            t = stop + hit
            moved = t + carry_diagonal
            carry_diagonal = np.uint64((t < stop) | (moved < t))
            at[w] = moved & ~rev_guards[r0 + w]  # a walker on its guard has climbed past row 1: done
            walking |= at[w]
        if not walking:
            return


@_compiled
def _set_bit(words: np.ndarray, b: int) -> None:  # pragma: no cover - compiled
    words[b >> 6] |= _ONE << np.uint64(b & 63)


@_compiled
def _get_bit(words: np.ndarray, b: int) -> bool:  # pragma: no cover - compiled
    return bool((words[b >> 6] >> np.uint64(b & 63)) & _ONE)


@_compiled
def _reverse(x: np.uint64) -> np.uint64:  # pragma: no cover - compiled
    """The 64 bits of x in reverse order: swap halves, then quarters within them, down to single bits."""
    for shift, mask in _SWAPS:
        x = ((x >> shift) & mask) | ((x & mask) << shift)
    return x
