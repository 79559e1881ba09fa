"""Kernels over one traffic circle: summed demand, excess and utilization.

Eqs. (4)-(6) and (18) of the Metronome paper, in the discretized form of
spec/metronome.md §2-3.  Rows are summed in row order and bins in bin order, so
every caller that needs "the" excess of a rotation vector gets the same float.
"""

from __future__ import annotations

import numpy as np

from .._config import jit


@jit
def rotated_sum(demand: np.ndarray, rotations: np.ndarray, out: np.ndarray) -> None:
    """``out[b] = sum_i demand[i, (b - rotations[i]) mod N]`` (Eq. 4, numpy ``roll``)."""
    k, n_bins = demand.shape
    for b in range(n_bins):
        out[b] = 0.0
    for i in range(k):
        s = rotations[i] % n_bins
        for b in range(n_bins):
            src = b - s
            if src < 0:
                src += n_bins
            out[b] += demand[i, src]


@jit
def excess_and_carried(
    demand: np.ndarray, rotations: np.ndarray, capacity: float
) -> tuple[float, float]:
    """Return ``(sum_b max(0, S[b] - B), sum_b min(S[b], B))`` for one rotation vector."""
    n_bins = demand.shape[1]
    total = np.empty(n_bins)
    rotated_sum(demand, rotations, total)
    excess = 0.0
    carried = 0.0
    for b in range(n_bins):
        if total[b] > capacity:
            excess += total[b] - capacity
            carried += capacity
        else:
            carried += total[b]
    return excess, carried
