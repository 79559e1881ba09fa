"""Kernels over one traffic circle: summed demand, excess and utilization.

Eqs. (4)-(6) and (18) of the Metronome paper, in the discretized form of
docs/traffic-circle.md.  Rows are summed in row order and bins in bin order, so
every caller that needs "the" excess of a rotation vector gets the same float.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit


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


@jit
def discretize_rows(
    multiples: np.ndarray, duty_cycles: np.ndarray, bandwidths: np.ndarray, out: np.ndarray,
    midpoints: np.ndarray, mid_offsets: np.ndarray,
) -> None:
    """Fill ``out[i]`` (zeroed by the caller) with pod i's demand per bin at rotation 0.

    Pod i has ``multiples[i]`` comm units; unit u covers the arc
    ``[u N / mul, (u + d) N / mul)`` in bin units (Eqs. 1-3).  Bin k gets ``r``
    times the length of its overlap with ``[k, k + 1)`` **[decision,
    docs/traffic-circle.md]**, so a row sums to ``r d N``.
    ``midpoints[mid_offsets[i] + u]`` receives ``u N / mul + d N / (2 mul)``.
    """
    n_rows, n_bins = out.shape
    for i in range(n_rows):
        mul = multiples[i]
        unit = n_bins / mul
        comm = duty_cycles[i] * unit
        rate = bandwidths[i]
        for u in range(mul):
            start = u * unit
            stop = start + comm
            if stop > n_bins:
                stop = n_bins
            midpoints[mid_offsets[i] + u] = start + 0.5 * comm
            if stop <= start:
                continue
            k_lo = int(np.floor(start))
            k_hi = min(int(np.ceil(stop)), n_bins)
            for k in range(k_lo, k_hi):
                lo = start if start > k else float(k)
                hi = stop if stop < k + 1 else float(k + 1)
                if hi > lo:
                    out[i, k] += rate * (hi - lo)


@jit
def draw_circle(
    periods: np.ndarray, duty_cycles: np.ndarray, bandwidths: np.ndarray,
    multiples: np.ndarray, idle: np.ndarray, base_period: float, compatible: bool,
    out: np.ndarray, midpoints: np.ndarray, mid_offsets: np.ndarray,
    circle_duty: np.ndarray, limits: np.ndarray,
) -> None:
    """Each pod's row on the circle of a unified base period (docs/traffic-circle.md).

    ``circle_duty[i]``, the duty cycle drawn: with idle injected the pod's period
    grows to ``t + idle`` with its comm time unchanged, ``d t / (t + idle)``; on an
    incompatible link the pattern is truncated to one unit on ``T``,
    ``min(1, d t / T)``.  Then :func:`discretize_rows` (``out`` zeroed by the
    caller, ``mid_offsets`` the prefix sums of ``multiples``) and the allowed
    rotations ``limits[i] = ceil(N / mul_i)`` (Eq. 15).
    """
    n_bins = out.shape[1]
    for i in range(periods.shape[0]):
        if compatible:
            circle_duty[i] = duty_cycles[i] * periods[i] / (periods[i] + idle[i])
        else:
            d = duty_cycles[i] * periods[i] / base_period
            circle_duty[i] = d if d < 1.0 else 1.0
        limits[i] = (n_bins + multiples[i] - 1) // multiples[i]
    discretize_rows(multiples, circle_duty, bandwidths, out, midpoints, mid_offsets)


@jit
def strict_ranks(priorities: np.ndarray, order: np.ndarray, out: np.ndarray) -> None:
    """``out``: a distinct rank per row, larger first in :func:`reference_first`'s order
    (priority, then deploy order), so that only the reference row has the top rank.

    **[decision]** What base-period unification takes as priorities: jobs rank as
    the controller ranks them (the paper's "jobs deployed earlier have higher
    priority", §IV-A), so a later job of equal priority, which the controller
    pauses, may also have idle injected; only the reference never gets idle.
    """
    k = priorities.shape[0]
    rank = np.empty(k, dtype=np.int64)
    reference_first(priorities, order, rank)
    for pos in range(k):
        out[rank[pos]] = k - pos


@jit
def reference_first(priorities: np.ndarray, order: np.ndarray, rank: np.ndarray) -> None:
    """``rank``: the rows by descending priority, ties by ascending ``order``
    (deploy order), so ``rank[0]`` is the reference row (Eq. 16)."""
    k = priorities.shape[0]
    for a in range(k):
        rank[a] = a
    for a in range(1, k):  # insertion sort, stable
        r = rank[a]
        c = a - 1
        while c >= 0 and (priorities[rank[c]] < priorities[r]
                          or (priorities[rank[c]] == priorities[r] and order[rank[c]] > order[r])):
            rank[c + 1] = rank[c]
            c -= 1
        rank[c + 1] = r
