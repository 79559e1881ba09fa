"""Partial sums of one link's traffic circle, shared by both phases of the rotation
search (:mod:`.rotation_search`, :mod:`.lowest_excess`).

A *prefix* is the summed demand ``P`` of the rows placed so far; ``f(x) = max(0, x - B)``
is a bin's excess (Eq. 18).  Adding a row never lowers a bin's excess, so every
marginal term below is >= 0 and a running sum only grows.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit_inline


@jit_inline
def excess_slack(prefix_row: np.ndarray, capacity: float) -> tuple[float, float]:
    """``(sum_b max(0, P[b] - B), sum_b max(0, B - P[b]))``."""
    excess = 0.0
    slack = 0.0
    for b in range(prefix_row.shape[0]):
        v = prefix_row[b]
        if v > capacity:
            excess += v - capacity
        else:
            slack += capacity - v
    return excess, slack


@jit_inline
def add_rotated(prev: np.ndarray, row: np.ndarray, shift: int, out: np.ndarray) -> None:
    """``out[b] = prev[b] + row[(b - shift) mod N]`` (numpy ``roll``)."""
    n_bins = prev.shape[0]
    for b in range(n_bins):
        src = b - shift
        if src < 0:
            src += n_bins
        out[b] = prev[b] + row[src]


@jit_inline
def over_capacity(prefix_row: np.ndarray, capacity: float, over: np.ndarray) -> float:
    """``over[b] = max(0, P[b] - B)``; returns the prefix's excess ``sum_b over[b]``."""
    base = 0.0
    for b in range(prefix_row.shape[0]):
        v = prefix_row[b] - capacity
        over[b] = v if v > 0.0 else 0.0
        base += over[b]
    return base


@jit_inline
def rotation_excess(
    prefix_row: np.ndarray, over: np.ndarray, base: float, supp_idx: np.ndarray,
    supp_val: np.ndarray, shift: int, capacity: float, stop_at: float,
) -> float:
    """``base`` plus the excess one row adds to the prefix at rotation ``shift``,
    summed over the row's non-zero bins only (``supp_idx``, ``supp_val``).

    ``over`` is the prefix's :func:`over_capacity`.  Every marginal term is >= 0
    (float addition and max are monotone), so the running sum only grows: it
    stops as soon as it reaches ``stop_at`` and returns a value >= ``stop_at``,
    which the caller reads as "not good enough".
    """
    n_bins = prefix_row.shape[0]
    e = base
    for t in range(supp_idx.shape[0]):
        b = supp_idx[t] + shift
        if b >= n_bins:
            b -= n_bins
        v = prefix_row[b] + supp_val[t] - capacity
        e += (v if v > 0.0 else 0.0) - over[b]
        if e >= stop_at:
            return e
    return e
