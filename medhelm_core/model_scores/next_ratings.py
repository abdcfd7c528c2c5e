"""Where to rate next: how many of the next clinician ratings each model and benchmark should get.

Each rating goes, one at a time, to the cell (model x benchmark) whose clinician-anchored interval would
then still be the widest, projecting that a cell's half-width shrinks as 1/sqrt(rated items). A cell with
fewer than two rated items has no interval yet: it comes first, until it has two. Within a cell the items
are then drawn at random (:mod:`medhelm_core.rating.where_uncertain`), so the rated items stay a random sample
of each cell and the clinician-anchored estimates stay valid; the cells' different rates are what the
stratified estimate (:mod:`medhelm_core.model_scores.anchored`) weighs back.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import pandas as pd

from medhelm_core.errors import ValidationError

CELL_COLUMNS = ["model", "benchmark", "half_width", "n_rated", "n_available"]
#: a cell needs this many rated items before it has an interval of its own
MIN_RATED = 2


def allocate_ratings(cells: pd.DataFrame, n_ratings: int) -> pd.DataFrame:
    """Share ``n_ratings`` new ratings among cells, widest projected interval first.

    Parameters
    ----------
    cells : pandas.DataFrame
        One row per model and benchmark: ``model``, ``benchmark``, ``half_width`` (of its clinician-anchored
        95% interval on the composite; NaN when it has none yet), ``n_rated`` and ``n_available`` (unrated items
        that can still be drawn).
    n_ratings : int
        How many new ratings to place.

    Returns
    -------
    pandas.DataFrame
        ``cells`` with ``n_next`` (ratings given to the cell) and ``projected_half_width`` (what its half-width
        is projected to be after them), in the order given. Fewer than ``n_ratings`` are placed when the cells
        run out of items.

    Examples
    --------
    >>> cells = pd.DataFrame({"model": ["m1", "m1", "m2"], "benchmark": ["b1", "b2", "b1"],
    ...                       "half_width": [0.8, 0.4, float("nan")], "n_rated": [4, 4, 0],
    ...                       "n_available": [10, 10, 1]})
    >>> allocate_ratings(cells, 5)[["model", "benchmark", "n_next"]]
      model benchmark  n_next
    0    m1        b1       4
    1    m1        b2       0
    2    m2        b1       1
    """
    missing = [c for c in CELL_COLUMNS if c not in cells.columns]
    if missing:
        raise ValidationError(f"the cells table lacks column(s) {', '.join(missing)}")
    if int(n_ratings) < 1:
        raise ValidationError(f"ask for at least one rating, got {n_ratings}")
    known = cells["half_width"][np.isfinite(cells["half_width"].astype(float))]
    # a cell without an interval is given the widest one seen (1 point on the scale when none is known yet),
    # as if it rested on a single item
    unknown_width = float(known.max()) if not known.empty else 1.0
    rated = cells["n_rated"].to_numpy(dtype=int)
    room = cells["n_available"].to_numpy(dtype=int)
    widths = cells["half_width"].to_numpy(dtype=float)
    given = np.zeros(len(cells), dtype=int)

    def projected(i: int, extra: int) -> float:
        n = rated[i] + extra
        if np.isfinite(widths[i]) and rated[i] >= MIN_RATED:
            return widths[i] * math.sqrt(rated[i] / n)
        if n < MIN_RATED:
            return math.inf
        return unknown_width * math.sqrt(1 / n)

    # max-heap on the projected half-width before the next rating; ties go to the earlier cell
    heap = [(-projected(i, 0), i) for i in range(len(cells)) if room[i] > 0]
    heapq.heapify(heap)
    placed = 0
    while heap and placed < int(n_ratings):
        _, i = heapq.heappop(heap)
        given[i] += 1
        placed += 1
        if given[i] < room[i]:
            heapq.heappush(heap, (-projected(i, given[i]), i))
    after = [projected(i, given[i]) if rated[i] + given[i] >= MIN_RATED else np.nan for i in range(len(cells))]
    return cells.assign(n_next=given, projected_half_width=after)
