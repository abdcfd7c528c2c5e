"""ROUGE-Lsum's union LCS, read out exactly as rouge-score reads it, with bit-parallel integer arithmetic.

rouge-score fills an LCS table for every (reference sentence, candidate sentence) pair and walks it back
from the bottom-right corner: on a match it goes diagonally, else left when ``T[i][j-1] > T[i-1][j]``,
else up. Which longest subsequence that walk reads out decides the union, so the same walk must be taken.

Two facts make that walk cheap without any table:

- Without a match at ``(i, j)``, ``T[i][j] = max(T[i][j-1], T[i-1][j])``, so "left if ``T[i][j-1] >
  T[i-1][j]``" is the same as "left if the column drops from row i to row i-1, else up". Within a column
  the walk therefore climbs to the nearest row at or above it that matches or where the column drops,
  then goes diagonally (a match) or left (a drop).
- A column of the table is one integer with a bit per reference row (Hyyro's bit-parallel LCS: a 0 bit
  where the column drops), and "the nearest such row above, for every walker at once" is one addition on
  the bit-reversed integer: its carry runs up through the rows where the walk keeps climbing.

All reference sentences sit in one integer, each after a guard bit that stops carries between them, and
that block is repeated once per candidate sentence of a group (candidate sentences right-aligned), so one
column step serves every (reference sentence, candidate sentence) pair of the group: a handful of Python
integer operations per column instead of a Python loop over every cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np

__all__ = ["summary_hits", "union_lcs_mask"]

#: Most table cells (reference tokens x candidate columns) one group of candidate sentences holds at once.
_TABLE_CELLS = 1 << 24

# Reverses the bits of each byte: with the byte order reversed too, it reverses a whole integer.
_REVERSE = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))


class _Block:
    """One copy of the reference sentences as bits: sentence k's rows after a guard bit, in order."""

    def __init__(self, tokens: np.ndarray, lengths: np.ndarray, vocabulary: int) -> None:
        width = int(lengths.sum()) + len(lengths)
        self.width = width
        self.nbytes = (width + 7) // 8
        guards = np.concatenate(([0], np.cumsum(lengths + 1)[:-1]))
        is_row = np.zeros(self.nbytes * 8, dtype=bool)
        is_row[:width] = True
        is_row[guards] = False
        #: the bit of each reference token, in reference order
        self.row_bits = np.flatnonzero(is_row)
        self.rows = _as_int(is_row)
        self.guards = _as_int(_mask(guards, self.nbytes))
        self.last_rows = _as_int(_mask(guards + lengths, self.nbytes))
        # Each token's match bits as little-endian bytes, one row per token id (and a last row of zeros):
        # rows picked per column and read as one integer give that column's match bits in every copy.
        present = np.flatnonzero(np.bincount(tokens, minlength=vocabulary))
        #: each token id's row in ``match``: a token no reference holds gets the last row, all zeros
        self.row_of = np.full(vocabulary, len(present), dtype=np.int64)
        self.row_of[present] = np.arange(len(present))
        matrix = np.zeros((len(present) + 1, self.nbytes * 8), dtype=bool)
        matrix[self.row_of[tokens], self.row_bits] = True
        self.match = np.packbits(matrix, axis=1, bitorder="little")
        # The same bits reversed within each byte: read big-endian, they are the bit-reversed integer.
        self.match_reversed = np.frombuffer(self.match.tobytes().translate(_REVERSE), dtype=np.uint8).reshape(
            self.match.shape)


def _mask(positions: np.ndarray, nbytes: int) -> np.ndarray:
    mask = np.zeros(nbytes * 8, dtype=bool)
    mask[positions] = True
    return mask


def _as_int(mask: np.ndarray) -> int:
    return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")


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
    return _union_mask(*_flat(refs), [c for c in cands if len(c)])


def summary_hits(refs: Sequence[Sequence[int]], cands: Sequence[Sequence[int]]) -> int:
    """rouge-score's ``_summary_level_lcs`` hit count: the union LCS of each reference sentence with every
    candidate sentence, each token counted at most as often as it occurs on both sides.

    rouge-score walks the union tokens in order, decrementing both sides' counts; a union token never
    outnumbers its reference count, so only the candidate's count binds and the total is, per token,
    ``min(times in the unions, times in the candidate)``, whatever the order.

    Examples
    --------
    >>> summary_hits([[1, 2, 3], [4, 1]], [[1, 3], [2]])  # 1 is twice in the unions, once in the candidate
    3
    """
    ref_tokens, ref_lengths = _flat(refs)
    cands = [c for c in cands if len(c)]
    cand_tokens = _flat(cands)[0]
    if not len(ref_tokens) or not len(cand_tokens):
        return 0
    vocabulary = 1 + max(int(ref_tokens.max()), int(cand_tokens.max()))
    in_candidate = np.bincount(cand_tokens, minlength=vocabulary)
    on_union = ref_tokens[_union_mask(ref_tokens, ref_lengths, cands, cand_tokens, in_candidate)]
    return int(np.minimum(np.bincount(on_union, minlength=vocabulary), in_candidate).sum())


def _flat(sentences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
    return np.fromiter(chain.from_iterable(sentences), dtype=np.int64, count=int(lengths.sum())), lengths


def _union_mask(ref_tokens: np.ndarray, ref_lengths: np.ndarray, cands: list[Sequence[int]],
                cand_tokens: np.ndarray | None = None, in_candidate: np.ndarray | None = None) -> np.ndarray:
    union = np.zeros(len(ref_tokens), dtype=bool)
    if not len(ref_tokens) or not cands:
        return union
    if in_candidate is None:
        cand_tokens = _flat(cands)[0] if cand_tokens is None else cand_tokens
        vocabulary = 1 + max(int(ref_tokens.max()), int(cand_tokens.max()))
        in_candidate = np.bincount(cand_tokens, minlength=vocabulary)
    # A reference token that no candidate sentence holds matches nothing: its row of every table equals the
    # row above, and the walk climbs straight through it, so leaving it out changes no read-out.
    kept = in_candidate[ref_tokens] > 0
    if not kept.any():
        return union
    lengths = np.bincount(np.repeat(np.arange(len(ref_lengths)), ref_lengths)[kept], minlength=len(ref_lengths))
    block = _Block(ref_tokens[kept], lengths[lengths > 0], len(in_candidate))
    bits = np.zeros(block.nbytes * 8, dtype=bool)
    for group in _groups(cands, block.width):
        bits |= _group_union(block, group)
    union[kept] = bits[block.row_bits]
    return union


def _groups(cands: list[Sequence[int]], width: int) -> list[list[Sequence[int]]]:
    """Candidate sentences of similar length in groups whose padded tables fit the cell budget, so short
    sentences are not padded to a long one's length and memory stays bounded however long the texts."""
    groups: list[list[Sequence[int]]] = []
    total = 0
    for c in sorted(cands, key=len):
        # Right-aligned in a group, every copy is as long as the group's longest (the last one added).
        padded = (len(groups[-1]) + 1) * len(c) if groups else 0
        if not groups or padded * width > _TABLE_CELLS or padded > 2 * (total + len(c)):
            groups.append([])
            total = 0
        groups[-1].append(c)
        total += len(c)
    return groups


def _group_union(block: _Block, group: list[Sequence[int]]) -> np.ndarray:
    """The union bits (one block's worth) of every reference sentence against the group's sentences."""
    copies = len(group)
    nbytes = block.nbytes * copies
    depth = max(len(c) for c in group)
    # Column j of each copy holds its candidate's token, right-aligned: leading columns match nothing,
    # which leaves the table at 0 there, as if the candidate started later.
    lengths = np.array([len(c) for c in group], dtype=np.int64)
    grid = np.full((copies, depth), len(block.match) - 1, dtype=np.int64)
    grid[np.arange(depth) >= (depth - lengths)[:, None]] = block.row_of[
        np.fromiter(chain.from_iterable(group), dtype=np.int64, count=int(lengths.sum()))]
    grid = grid.T
    forward = memoryview(block.match[grid].tobytes())
    reverse = memoryview(block.match_reversed[grid].tobytes())

    def repeat(value: int) -> bytes:
        return value.to_bytes(block.nbytes, "little") * copies

    rows = int.from_bytes(repeat(block.rows), "little")
    v = rows
    climbable = []  # per column: rows where the walk climbs on (no drop, no match), little-endian bytes
    for j in range(depth):
        m = int.from_bytes(forward[j * nbytes : (j + 1) * nbytes], "little")
        u = v & m
        v = ((v + u) | (v ^ u)) & rows  # Hyyro's step (v - u == v ^ u, as u is within v); guards stay 0
        climbable.append((v ^ (v & m)).to_bytes(nbytes, "little"))  # v & ~m, without a negative integer
    # Bit-reversed, so that climbing a column (row i to i-1) is a carry towards higher bits: reversing
    # each byte's bits and reading the bytes big-endian reverses the whole integer.
    climbable_reversed = memoryview(b"".join(climbable).translate(_REVERSE))
    guards = _reversed(repeat(block.guards))
    at = _reversed(repeat(block.last_rows))  # one walker per (reference, candidate) pair, at its last row
    union = 0
    for j in range(depth - 1, -1, -1):
        climb = int.from_bytes(climbable_reversed[j * nbytes : (j + 1) * nbytes], "big")
        ended = climb + at
        # Each walker's nearest row at or above it that matches or drops, or its guard (ended & ~climb).
        stop = ended ^ (ended & climb)
        hit = stop & int.from_bytes(reverse[j * nbytes : (j + 1) * nbytes], "big")
        union |= hit
        at = stop + hit  # a match goes diagonally (one row up), a drop goes left (the same row)
        done = at & guards
        if done:
            at ^= done
            if not at:
                break
    raw = np.frombuffer(union.to_bytes(nbytes, "big").translate(_REVERSE), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little").reshape(copies, block.nbytes * 8).any(axis=0)


def _reversed(little_endian: bytes) -> int:
    """The integer whose little-endian bytes are given, with its bits reversed."""
    return int.from_bytes(little_endian.translate(_REVERSE), "big")
