"""Partial sums of one link's traffic circle, shared by both phases of the rotation
search (:mod:`.rotation_search`, :mod:`.lowest_excess`).

A *prefix* is the summed demand ``P`` of the rows placed so far; ``f(x) = max(0, x - B)``
is a bin's excess (Eq. 18).  Adding a row never lowers a bin's excess, so every
marginal term below is >= 0 and a running sum only grows.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit, jit_inline


@jit_inline
def added(a: float, y: float, capacity: float) -> float:
    """``f(a + y) - f(a)``: the excess demand ``y`` adds to a bin already holding ``a``."""
    v = a + y - capacity
    w = a - capacity
    return (v if v > 0.0 else 0.0) - (w if w > 0.0 else 0.0)


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
    """``out[b] = prev[b] + row[(b - shift) mod N]`` (numpy ``roll``), in two runs of
    ``b`` so that the loop tests no wrap (``0 <= shift < N``)."""
    n_bins = prev.shape[0]
    for b in range(shift):
        out[b] = prev[b] + row[b - shift + n_bins]
    for b in range(shift, n_bins):
        out[b] = prev[b] + row[b - shift]


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


#: Unit roundoff of a float64 sum, doubled: the rounding allowances below use it.
ROUNDOFF = 2.3e-16


@jit
def row_runs(
    demand: np.ndarray, min_run_bins: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
           np.ndarray]:
    """Each row as runs of one repeated value and single bins, for
    :func:`rotation_increments`.

    A comm unit on the circle is a run of bins at the pod's full rate with a partial
    bin at its ends (Eqs. 1-3).  Row ``r``'s *window value* ``value[r]`` is the value of
    its longest run of equal non-zero bins if that run has at least ``min_run_bins``
    bins, else 0; the maximal runs holding exactly that value are its windows
    (``win_start``, ``win_len``, rows delimited by ``win_ptr``) and its other non-zero
    bins its singles (``one_idx``, ``one_val``, by ``one_ptr``).

    Returns ``(value, win_ptr, win_start, win_len, one_ptr, one_idx, one_val)``.
    """
    k, n_bins = demand.shape
    value = np.zeros(k)
    win_ptr = np.zeros(k + 1, dtype=np.int64)
    one_ptr = np.zeros(k + 1, dtype=np.int64)
    win_start = np.empty(k * n_bins, dtype=np.int64)
    win_len = np.empty(k * n_bins, dtype=np.int64)
    one_idx = np.empty(k * n_bins, dtype=np.int64)
    one_val = np.empty(k * n_bins)
    for r in range(k):
        row = demand[r]
        longest = 0
        c = 0.0
        b = 0
        while b < n_bins:
            start = b
            while b + 1 < n_bins and row[b + 1] == row[start]:
                b += 1
            b += 1
            if row[start] > 0.0 and b - start > longest:
                longest = b - start
                c = row[start]
        if longest < min_run_bins:
            c = 0.0
        value[r] = c
        n_win = win_ptr[r]
        n_one = one_ptr[r]
        b = 0
        while b < n_bins:
            if c > 0.0 and row[b] == c:
                start = b
                while b < n_bins and row[b] == c:
                    b += 1
                win_start[n_win] = start
                win_len[n_win] = b - start
                n_win += 1
                continue
            if row[b] > 0.0:
                one_idx[n_one] = b
                one_val[n_one] = row[b]
                n_one += 1
            b += 1
        win_ptr[r + 1] = n_win
        one_ptr[r + 1] = n_one
    return value, win_ptr, win_start, win_len, one_ptr, one_idx, one_val


@jit_inline
def window_prefix(prefix_row: np.ndarray, value: float, capacity: float,
                  cum: np.ndarray) -> None:
    """``cum[i] = sum_{b < i} (f(P[b] + value) - f(P[b]))``: what ``value`` adds to each
    bin, summed (``f(x) = max(0, x - B)``), and carried once more round the circle,
    ``cum[N + i] = cum[N] + cum[i]`` (``cum`` holds ``2 N + 1``): a turned window is
    one difference."""
    n_bins = prefix_row.shape[0]
    acc = 0.0
    cum[0] = 0.0
    for b in range(n_bins):
        acc += added(prefix_row[b], value, capacity)
        cum[b + 1] = acc
    for i in range(1, n_bins + 1):
        cum[n_bins + i] = acc + cum[i]


@jit_inline
def window_sum(cum: np.ndarray, start: int, length: int, shift: int) -> float:
    """The window ``[start, start + length)`` turned by ``shift`` (``start``,
    ``shift`` in ``[0, N)``), summed from :func:`window_prefix`'s ``cum``: one
    difference, the circle being carried round once more."""
    n_bins = (cum.shape[0] - 1) // 2
    st = start + shift
    st -= n_bins if st >= n_bins else 0
    return cum[st + length] - cum[st]


@jit
def rotation_increments(
    prefix_row: np.ndarray, capacity: float, r: int, limit: int, value: np.ndarray,
    win_ptr: np.ndarray, win_start: np.ndarray, win_len: np.ndarray, one_ptr: np.ndarray,
    one_idx: np.ndarray, one_val: np.ndarray, cum: np.ndarray, allowance: float,
    out: np.ndarray,
) -> float:
    """``out[s]`` for every rotation ``s < limit``: the excess row ``r`` adds to the
    prefix at rotation ``s``, less ``allowance``; returns the smallest.  ``cum``:
    scratch of ``2 N + 1``.

    A pass over the row's non-zero bins per rotation costs ``limit`` times the
    row's width; here the row's windows (:func:`row_runs`) cost two look-ups each in
    one prefix sum of what the window value adds to every bin (:func:`window_prefix`,
    carried once more round the circle), and only the single bins are added one by
    one.
    Each window and single bin is added to every rotation in one loop over ``s``, in
    the same order for each rotation as a loop over the row's parts would.  The sums
    run in another
    order than :func:`rotation_excess`'s, so the values differ from it by rounding;
    with ``allowance`` at least that much (:func:`increments_allowance`) each is a
    lower bound of the increment.
    """
    n_bins = prefix_row.shape[0]
    for s in range(limit):
        out[s] = 0.0
    if win_ptr[r + 1] > win_ptr[r]:
        window_prefix(prefix_row, value[r], capacity, cum)
        for w in range(win_ptr[r], win_ptr[r + 1]):
            for s in range(limit):
                out[s] += window_sum(cum, win_start[w], win_len[w], s)
    for t in range(one_ptr[r], one_ptr[r + 1]):
        for s in range(limit):
            b = one_idx[t] + s
            b -= n_bins if b >= n_bins else 0
            out[s] += added(prefix_row[b], one_val[t], capacity)
    best = np.inf
    for s in range(limit):
        out[s] -= allowance
        if out[s] < best:
            best = out[s]
    return best


@jit
def increments_allowance(demand: np.ndarray, total: float, capacity: float) -> float:
    """A bound on how far :func:`rotation_increments`'s sums may round away from the
    exact increment, for prefixes of the rows of ``demand`` (``total``: their summed
    demand).

    Each term ``f(P + y) - f(P)`` errs by at most 4 roundoffs of ``P + y + B <=
    total + B``; a prefix sum adds at most N of them, each at most the row's peak, so
    it errs by N times that plus N roundoffs of its value, at most N times the peak;
    a window differs two of them, one of which may be carried round the circle
    (``cum[N] + cum[i]``: the errors of two and one roundoff more), and the single
    bins add their own terms.
    """
    n_bins = demand.shape[1]
    peak = 0.0
    for v in demand.ravel():
        if v > peak:
            peak = v
    return 8.0 * ROUNDOFF * n_bins * (n_bins * peak + total + capacity)
