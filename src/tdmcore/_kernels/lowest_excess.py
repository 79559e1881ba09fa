"""Phase B of the rotation search: the highest score when no vector is perfect.

The brute force scans every rotation vector in enumeration order (lexicographic,
last row fastest) and keeps a vector when its excess is below the kept one's by
more than the tie tolerance (docs/traffic-circle.md).  :func:`lowest_excess` walks
the same order depth first, so its incumbent evolves exactly as the scan's, and
skips a prefix, a child rotation or a last-row rotation only when a lower bound on
its excess already reaches ``best - tol``: nothing there could replace the
incumbent.

The bounds come from the convexity of a bin's excess ``f(x) = max(0, x - B)``.
With ``g_y(a) = f(a + y) - f(a)``, the excess demand ``y`` adds to a bin holding
``a``, ``g_y`` grows with ``a`` and with slope at most 1.  Hence

* the excess a row adds to a prefix ``P`` at rotation ``s``, ``inc(P, s)``, only
  grows as rows join ``P``: it bounds that row under every completion of ``P``;
* rows added together add at least the sum of what each adds alone, so
  ``exc(P) + sum_r min_s inc_r(P, s)`` bounds every completion of ``P``;
* once row ``x`` joins ``P``, ``g(P + x) = g(P) + g(x) - g(0)`` on every bin where
  ``P`` or ``x`` is zero: the increment against ``P + x`` is the one against ``P``,
  plus the one against ``x`` alone (a table per pair of rows and relative shift),
  minus the row's own excess, plus a correction on the few bins where ``P`` and
  ``x`` overlap (:func:`_joint_increment`).  That is exact in exact arithmetic,
  for ``O(1 + overlap)`` per rotation instead of a pass over the row: it bounds
  the last two rows together before the child prefix is built.

A prefix the walk enters gets every remaining row's increment at every rotation,
through prefix sums over the row's runs of equal demand
(:func:`~.partial_sums.rotation_increments`: ``O(N + L runs)`` per row instead of
``O(L width)``).  Where the joint increments of the last row against a child cost
more than those prefix sums would, as on crowded links where each child leaves
dozens of candidate rotations, the scan of the child's candidates goes through the
prefix sums instead (:func:`_window_min`), for the children of that prefix.

**A good incumbent first** (:func:`lowest_excess`).  The scan's incumbent starts at
infinity, so an ordered walk prunes little until it has met a good vector; on the
heavily contended links about two thirds of the children came before the last
improvement.  The walk starts instead just above the excess of a vector found by
coordinate descent (:func:`_descent`), and a check on the first vector it keeps
(:func:`_certified`) proves that the sequential scan keeps the same vectors from
there on; when it cannot, the walk runs again from infinity.

**Bounds carried between children.**  The last row's scan of a pruned child yields
a lower bound on the child's whole subtree (the least of its candidates' bounds).
``f`` is monotone with slope at most 1, so turning one row by ``d`` bins lowers any
excess by at most that row's *drop* ``sum_b max(0, x[b] - x[b - d])``
(:func:`_drops`): a child's bound, less the drop, bounds the same child of a
sibling prefix (row ``top - 1`` turned) and the next child of the same prefix (row
``top`` turned by one bin), which are pruned without a scan when that still clears
the incumbent.  The scan reaches one row-turn's drop beyond what pruning the child
itself needs (prefix sums only), so that its bound carries.

Every bound is compared with a safety margin for rounding, so a skipped part can
never hold a vector the scan would have kept; the prefix sums, rounded in another
order, are lowered by a bound on that rounding first
(:func:`~.partial_sums.increments_allowance`).
"""

from __future__ import annotations

import numpy as np
from numba import carray, config, types

from ._jit import jit, jit_inline
from ._unit import CUnit
from .partial_sums import (
    add_rotated,
    added,
    excess_slack,
    increments_allowance,
    over_capacity,
    rotation_excess,
    rotation_increments,
    row_runs,
    window_prefix,
    window_sum,
)

#: a row's window value needs a run of at least this many bins (row_runs)
MIN_RUN_BINS = 4
#: children of one prefix seen before the last row's scan may change method
ADAPT_AFTER = 4.0
#: what the prefix sums of _window_min cost per child, in bins of joint increments
#: per bin of the circle (measured: about 2)
WINDOW_COST = 2.0
#: passes of coordinate descent for phase B's first incumbent (lowest_excess)
DESCENT_ROUNDS = 4
#: how far beyond what pruning a child needs its last-row scan by prefix sums reaches,
#: in drops of one turn of row top - 1 (so that its bound carries to the sibling)
REACH = 1.0


@jit_inline
def _order_below(keys: np.ndarray, n: int, cutoff: float, order: np.ndarray) -> int:
    """The indices ``0..n-1`` in an order that any scan by increasing key which stops
    at the first key ``>= cut``, for a ``cut <= cutoff``, cannot tell from sorted:
    those with a key below ``cutoff``, sorted (Shell sort), then the one with the
    smallest key of the others.  ``order[0]`` is always an index of the smallest key.
    Returns how many keys lie below ``cutoff``.
    """
    m = 0
    rest = -1
    for i in range(n):
        if keys[i] < cutoff:
            order[m] = i
            m += 1
        elif rest < 0 or keys[i] < keys[rest]:
            rest = i
    _sort_indices(keys, m, order)
    if rest >= 0:
        order[m] = rest
    return m


@jit_inline
def _sort_indices(keys: np.ndarray, n: int, order: np.ndarray) -> None:
    """``order[:n]``, indices, sorted by ``keys`` ascending (Shell sort, in place)."""
    gap = 1
    while gap < n // 3:
        gap = 3 * gap + 1
    while gap > 0:
        for i in range(gap, n):
            item = order[i]
            key = keys[item]
            j = i
            while j >= gap and keys[order[j - gap]] > key:
                order[j] = order[j - gap]
                j -= gap
            order[j] = item
        gap //= 3


@jit_inline
def _overlap(
    prefix_row: np.ndarray, idx: np.ndarray, val: np.ndarray, shift: int,
    ov_bin: np.ndarray, ov_val: np.ndarray, ov_state: np.ndarray, y_peak: float,
    capacity: float,
) -> None:
    """The bins where both the prefix and a row (support ``idx``, ``val``) rotated by
    ``shift`` are non-zero (``ov_bin``), with the row's demand there (``ov_val``).

    Sets ``ov_state[:3] = [1, count, slope]``, where ``slope`` bounds the overlap
    correction of :func:`_joint_increment` from below (negated), for any later row
    whose demand is at most ``y_peak``: per bin the correction is ``g(P + x) - g(P)
    - g(x) + g(0)`` with ``g = g_y``, and ``g(P + x) >= g(P)``, so it is at least
    ``-(g(x) - g(0)) = -h_y(x)``, ``h_y(x) = f(x + y) - f(x) - f(y)``, which grows
    with ``y`` (slope ``1[x + y > B] - 1[y > B] >= 0``): at least ``-h(x)`` with
    ``h = h_{y_peak}``, and symmetrically ``-h(P)``.  So ``slope = sum min(h(P_b),
    h(x_b))`` (at most ``sum min(P_b, x_b)``, since ``h(a) <= a``).
    """
    n_bins = prefix_row.shape[0]
    n = 0
    slope = 0.0
    f_peak = y_peak - capacity if y_peak > capacity else 0.0
    for t in range(idx.shape[0]):
        b = idx[t] + shift
        if b >= n_bins:
            b -= n_bins
        p_b = prefix_row[b]
        if p_b > 0.0:
            x_b = val[t]
            ov_bin[n] = b
            ov_val[n] = x_b
            n += 1
            a = p_b if p_b < x_b else x_b  # h grows with its argument too
            h = added(a, y_peak, capacity) - f_peak
            slope += h if h > 0.0 else 0.0
    ov_state[0] = 1.0
    ov_state[1] = n
    ov_state[2] = slope


@jit_inline
def _joint_increment(
    v: float, w: float, alone: float, row: np.ndarray, shift: int, prefix_row: np.ndarray,
    ov_bin: np.ndarray, ov_val: np.ndarray, n_overlap: int, capacity: float,
) -> float:
    """A lower bound on the excess a row adds, at rotation ``shift``, to a prefix ``P``
    (sum ``prefix_row``) extended by one more row ``x``.

    ``v`` and ``w`` bound it on their own: what the row adds to ``P`` alone and to
    ``x`` alone.  Where ``P`` or ``x`` is zero, ``g(P + x) = g(P) + g(x) - g(0)``, so
    the increment is ``v + w - alone`` (``alone`` = the row's own excess, the sum of
    ``g(0)``) plus the exact correction on the bins where both are non-zero
    (``ov_*[:n_overlap]``, from :func:`_overlap`) and the row is too.  In exact
    arithmetic that is the increment itself (a lower bound when ``v`` is one); the
    largest of the three is returned.
    """
    n_bins = row.shape[0]
    u = v + w - alone
    for o in range(n_overlap):
        b = ov_bin[o]
        src = b - shift
        if src < 0:
            src += n_bins
        y = row[src]
        if y > 0.0:
            p_b = prefix_row[b]
            x_b = ov_val[o]
            u += (added(p_b + x_b, y, capacity) - added(p_b, y, capacity)
                  - added(x_b, y, capacity) + added(0.0, y, capacity))
    if w > v:
        v = w
    return u if u > v else v


@jit
def _prefix_increments(
    level: int, prefix_row: np.ndarray, capacity: float, limits: np.ndarray,
    sorted_count: np.ndarray, twin_slack: np.ndarray, value: np.ndarray,
    win_ptr: np.ndarray, win_start: np.ndarray, win_len: np.ndarray, one_ptr: np.ndarray,
    one_idx: np.ndarray, one_val: np.ndarray, cum: np.ndarray, allowance: float,
    incs: np.ndarray, order: np.ndarray, below: np.ndarray, need: float, reach: float,
) -> float:
    """``incs[level, r]`` (what each row ``r > level`` adds at every rotation to the
    prefix), ``order[level, r]`` (its first ``sorted_count[r]`` rotations by it,
    :func:`_order_below`) and ``below[level, r]`` (how many of them are sorted);
    returns ``sum_r min_s incs[level, r]`` less ``twin_slack``.

    ``need``: the most the rows after ``level`` must add for a completion to beat
    the incumbent (the walk's threshold, less the prefix's excess, plus the
    margin); it only falls as the walk goes on.  The children's scans of row ``r``
    (:func:`_joint_min`, :func:`_window_min`) stop at the first increment at or
    above what their child needs of row ``r``: at most ``need`` less the least that
    row ``level + 1`` and the rows between add, plus ``reach`` for the last row's
    prefix-sum scan when the children are of row ``top``.  So only increments
    below that are sorted, and of row ``level + 1``, which no child scans, only the
    smallest is found.
    """
    k = limits.shape[0]
    for r in range(level + 1, k):
        rotation_increments(prefix_row, capacity, r, limits[r], value, win_ptr, win_start,
                            win_len, one_ptr, one_idx, one_val, cum, allowance, incs[level, r])
    tail = 0.0
    cutoff = -np.inf  # row level + 1: only its smallest increment is read
    for r in range(level + 1, k):
        below[level, r] = _order_below(incs[level, r], sorted_count[r], cutoff,
                                       order[level, r])
        least = incs[level, r, order[level, r, 0]] - twin_slack[r]
        tail += least
        if r == level + 1:
            cutoff = need - least
        else:
            cutoff -= least
        if r + 1 == k - 1 and level + 1 == k - 2:
            cutoff += reach
    return tail


@jit_inline
def _joint_min(
    level: int, shift: int, parent: int, r: int, demand: np.ndarray, supp_ptr: np.ndarray,
    supp_idx: np.ndarray, supp_val: np.ndarray, limits: np.ndarray, incs: np.ndarray,
    order: np.ndarray, pair: np.ndarray, alone: np.ndarray, prefix_row: np.ndarray,
    ov_bin: np.ndarray, ov_val: np.ndarray, ov_state: np.ndarray, capacity: float,
    need: float, any_below: bool, sorted_count: int, twin_slack: float, y_peak: float,
) -> float:
    """``min_s`` of :func:`_joint_increment` for row ``r`` once row ``level`` joins the
    prefix ``parent`` at rotation ``shift``: a lower bound on the excess row ``r``
    adds to every completion.

    Rotations are visited by increasing ``incs[parent, r]``, a lower bound of each
    value, so the scan stops once that reaches the minimum found or ``need``: a
    result ``>= need`` only says the true minimum is ``>= need`` too.  With
    ``any_below`` it stops at the first value below ``need`` (the caller then only
    learns that it cannot prune) but not at the minimum found, and a result ``>=
    need`` is a lower bound of the minimum: the least of every visited rotation's
    value or of the cheaper bound that ruled it out, and of the value the scan
    stopped at (it bounds the rotations not visited).  The overlap (:func:`_overlap`) is found on
    first use, and the exact joint value computed only where the cheaper bounds
    leave a chance, and its work (bins) added to ``ov_state[3]``.  Only the first
    ``sorted_count`` rotations are visited: the
    others repeat them up to ``twin_slack`` (the symmetry of :func:`lowest_excess`,
    when row ``r`` is the last and the only one it moves), by which the minimum is
    lowered.
    """
    n_bins = prefix_row.shape[0]
    row = demand[r]
    best = np.inf
    cut = need
    for t in range(sorted_count):
        s = order[parent, r, t]
        v = incs[parent, r, s]
        if v >= cut:
            if any_below and v < best:
                best = v
            break
        d = s - shift
        if d < 0:
            d += n_bins
        w = pair[level, r, d]
        if w >= cut:
            if any_below and w < best:
                best = w
            continue
        if ov_state[0] == 0.0:
            _overlap(prefix_row, supp_idx[supp_ptr[level]:supp_ptr[level + 1]],
                     supp_val[supp_ptr[level]:supp_ptr[level + 1]], shift, ov_bin, ov_val,
                     ov_state, y_peak, capacity)
        u = v + w - alone[r] - ov_state[2]
        if u >= cut:
            if any_below and u < best:
                best = u
            continue
        ov_state[3] += 2.0 + ov_state[1]  # the work of a joint increment, in bins
        j = _joint_increment(v, w, alone[r], row, s, prefix_row, ov_bin, ov_val,
                             int(ov_state[1]), capacity)
        if j < best:
            best = j
        if any_below:
            if j < need:
                break
        elif best < cut:
            cut = best
    return best - twin_slack


@jit
def _window_min(
    shift: int, parent: int, demand: np.ndarray, supp_ptr: np.ndarray, supp_idx: np.ndarray,
    supp_val: np.ndarray, incs: np.ndarray, order: np.ndarray, pair: np.ndarray,
    alone: np.ndarray, prefix: np.ndarray, capacity: float, need: float,
    sorted_count: int, twin_slack: float, value: np.ndarray, win_ptr: np.ndarray,
    win_start: np.ndarray, win_len: np.ndarray, one_ptr: np.ndarray, one_idx: np.ndarray,
    one_val: np.ndarray, cum: np.ndarray, allowance: float, stats: np.ndarray,
    ov_bin: np.ndarray, ov_val: np.ndarray, ov_state: np.ndarray, y_peak: float,
    below: np.ndarray, sums: np.ndarray,
) -> float:
    """A lower bound on what the last row adds to every completion once row ``top``
    joins prefix ``parent`` at ``shift``, as :func:`_joint_min` (with ``any_below``)
    finds it, but through prefix sums of what the last row's window value adds to
    each bin of the child prefix (built into ``prefix[top]``) instead of joint
    increments.

    The candidates are the rotations the parent sorted (``below[parent, last]`` of
    them, :func:`_prefix_increments`: every one whose bound against the parent lies
    below what the children need, plus one row-turn's drop, :data:`REACH`); each is
    worth the largest of its cheaper bounds (:func:`_joint_min`'s: against the
    parent, against row ``top`` alone, both less the overlap's slope) and its
    increment by prefix sums, the others the least key among them, and the result is
    the least of all: the child's bound, which carries to its neighbours.  Until
    2026-11-29 the scan stopped at the first candidate below ``need`` and skipped the
    sums where a cheaper bound ruled a candidate out; on the crowded links that take
    this route it met nearly every candidate anyway (seed 395 of the heavily
    contended family: 23.5 of 24 per child), and the branches cost more than the
    sums they saved.  Each window, then each single bin, is added to every
    candidate's sum (``sums``, scratch of ``N``) in one loop over the candidates: the
    same sums, added in the same order, as a loop over the row's parts per candidate
    (bit for bit), without a short loop per candidate (seed 395: a third less time
    in this scan).  ``stats[1]`` gains what the joint increments of the candidates
    the cheaper bounds leave below ``need`` would have cost (bins).
    """
    k, n_bins = demand.shape
    last = k - 1
    top = last - 1
    parent_row = prefix[parent]
    _overlap(parent_row, supp_idx[supp_ptr[top]:supp_ptr[top + 1]],
             supp_val[supp_ptr[top]:supp_ptr[top + 1]], shift, ov_bin, ov_val, ov_state,
             y_peak, capacity)
    slope = ov_state[2]
    child = prefix[top]
    add_rotated(parent_row, demand[top], shift, child)
    window_prefix(child, value[last], capacity, cum)
    keys = incs[parent, last]
    cands = order[parent, last]
    pair_last = pair[top, last]
    alone_last = alone[last]
    lowest = np.inf
    cheap_below = 0.0  # candidates the cheaper bounds leave below need
    n_sorted = below[parent, last]
    for t in range(n_sorted):
        sums[t] = 0.0
    for q in range(win_ptr[last], win_ptr[k]):
        start = win_start[q]
        length = win_len[q]
        for t in range(n_sorted):
            sums[t] += window_sum(cum, start, length, cands[t])
    for q in range(one_ptr[last], one_ptr[k]):
        first = one_idx[q]
        y = one_val[q]
        for t in range(n_sorted):
            b = first + cands[t]
            b -= n_bins if b >= n_bins else 0
            sums[t] += added(child[b], y, capacity)
    for t in range(n_sorted):  # no early exit, no data-dependent branch
        s = cands[t]
        v = keys[s]
        d = s - shift
        d += n_bins if d < 0 else 0
        w = pair_last[d]
        cheap = max(max(v, w), v + w - alone_last - slope)
        cheap_below += 1.0 if cheap < need else 0.0
        lowest = min(lowest, max(cheap, sums[t] - allowance))
    if n_sorted < sorted_count:  # the others' keys are at least this one's
        lowest = min(lowest, keys[cands[n_sorted]])
    stats[1] += cheap_below * (2.0 + ov_state[1])
    return lowest - twin_slack


@jit
def _drops(demand: np.ndarray, supp_ptr: np.ndarray, supp_idx: np.ndarray,
           supp_val: np.ndarray, top: int) -> np.ndarray:
    """``drop[r, d] = sum_b max(0, x_r[b] - x_r[b - d])``: the most that turning row
    ``r`` by ``d`` bins takes off any bin sum, hence off any excess (``f`` is monotone
    with slope at most 1).  Only what the walk reads: row ``top - 1`` at every ``d``,
    row ``top`` at ``d = 1`` (0 elsewhere)."""
    k, n_bins = demand.shape
    drop = np.zeros((k, n_bins))
    for r in range(max(top - 1, 0), max(top, 0) + 1):
        row = demand[r]
        for d in range(1, n_bins if r < top else 2):
            total = 0.0
            for t in range(supp_ptr[r], supp_ptr[r + 1]):
                b = supp_idx[t]
                src = b - d
                if src < 0:
                    src += n_bins
                gap = supp_val[t] - row[src]
                if gap > 0.0:
                    total += gap
            drop[r, d] = total
    return drop


@jit
def _period_gap(row: np.ndarray, period: int) -> float:
    """``max_b |row[(b + period) mod N] - row[b]|``: 0 when ``row`` repeats every
    ``period`` bins."""
    n_bins = row.shape[0]
    gap = 0.0
    for b in range(n_bins):
        c = b + period
        if c >= n_bins:
            c -= n_bins
        d = abs(row[c] - row[b])
        if d > gap:
            gap = d
    return gap


@jit
def _symmetry_shift(demand: np.ndarray, limits: np.ndarray, allowance: float) -> int:
    """The smallest shift ``t`` (a proper divisor of N) by which rotating every row
    maps the rotation vectors onto themselves with the reference row in place, or 0.

    Row 0 must repeat every ``t`` bins, and every other row either have all N
    rotations or repeat every ``limits[r]`` bins (a divisor of N), so its rotation
    ``(s + t) mod limits[r]`` is the same row.  Rows need only repeat up to
    rounding: ``N k`` times the largest gap must stay within ``allowance``.
    """
    k, n_bins = demand.shape
    gap = 0.0
    for r in range(1, k):
        if limits[r] < n_bins:
            if n_bins % limits[r] != 0:
                return 0
            gap = max(gap, _period_gap(demand[r], limits[r]))
    for t in range(1, n_bins):
        if n_bins % t == 0:
            g = max(gap, _period_gap(demand[0], t))
            if n_bins * k * g <= allowance:
                return t
    return 0


@jit_inline
def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


@jit_inline
def _first_twin(s: int, sym_t: int, limit: int, n_bins: int) -> int:
    """The smallest of ``(s + j t) mod limit``: the first rotation whose subtree the
    one of rotation ``s`` repeats when the circle turns by multiples of ``t``."""
    first = s
    for turn in range(sym_t, n_bins, sym_t):
        twin = (s + turn) % limit
        if twin < first:
            first = twin
    return first


@jit
def _walk(
    demand: np.ndarray, capacity: float, limits: np.ndarray, supp_ptr: np.ndarray,
    supp_idx: np.ndarray, supp_val: np.ndarray, rem: np.ndarray, tol_excess: float,
    margin: float, best_rot: np.ndarray, find_perfect: bool, perfect: np.ndarray,
    initial: float,
) -> tuple[bool, int, float, float]:
    """:func:`lowest_excess`'s walk, its incumbent's excess starting at ``initial``
    (``inf``: none; :func:`lowest_excess` says when another start gives the same
    answer).  Also returns the excess of the first vector it keeps and of the last
    (``inf``: none kept).

    Write into ``best_rot`` the vector the brute force's sequential scan keeps:
    the first in enumeration order that no later one beats by more than
    ``tol_excess``.  Returns ``(False, evaluated)``: how many vectors had their
    excess computed.

    With ``find_perfect`` the threshold stays at "perfect" (excess within
    ``tol_excess``) instead: the walk stops at the first prefix, in enumeration
    order, with a perfect rotation of the last row, writes the prefix into
    ``best_rot[:k-1]`` and which rotations are perfect into ``perfect`` and
    returns ``(True, evaluated)``; ``(False, evaluated)`` means no vector is
    perfect.

    ``supp_*`` is every row's non-zero bins (CSR), ``rem[j]`` the total demand of
    rows ``j..k-1`` (a prefix whose slack cannot hold it has excess), ``margin``
    the rounding allowance of every bound.

    **Symmetry.**  When the reference row repeats every ``t`` bins (its period is
    a multiple ``m`` of the base period, Eq. 15) and the other rows allow it
    (:func:`_symmetry_shift`), turning the whole circle by ``t`` maps each vector
    onto one with the same excess up to rounding.  Rows whose rotations repeat
    every ``t`` bins keep theirs; the first row that does not, row ``r``, moves
    from ``s_r`` to ``(s_r + t) mod L_r``: under one prefix, the subtree of a
    rotation of row ``r`` repeats one met earlier.  Every vector of that earlier
    subtree was found unable to replace the incumbent, by at least a recorded
    floor; when the floor, less the rounding between the two copies
    (``margin / 2``), still clears the current ``best - tol_excess``, the copy is
    skipped.  Pruning uses ``2 margin``, so a pruned part's floor is
    ``threshold + margin``; the floor of an evaluated vector is its excess.  Near a
    floor that does not clear, the copy is walked.
    """
    k, n_bins = demand.shape
    last = k - 1
    top = last - 1  # deepest prefix row
    n_last = limits[last]
    last_row = demand[last]
    last_idx = supp_idx[supp_ptr[last]:supp_ptr[k]]
    last_val = supp_val[supp_ptr[last]:supp_ptr[k]]
    over = np.empty(n_bins)
    alone = np.zeros(k)
    for r in range(k):
        alone[r] = over_capacity(demand[r], capacity, over)
    # peak_after[l]: the largest demand of the rows after row l (_overlap's y_peak)
    peak_after = np.zeros(k)
    for r in range(k - 1, 0, -1):
        peak = peak_after[r]
        for b in range(n_bins):
            if demand[r, b] > peak:
                peak = demand[r, b]
        peak_after[r - 1] = peak
    value, win_ptr, win_start, win_len, one_ptr, one_idx, one_val = row_runs(
        demand, MIN_RUN_BINS)
    allowance = increments_allowance(demand, rem[0], capacity)
    cum = np.empty(2 * n_bins + 1)
    # pair[j, r, d] (1 <= j < r): the excess row r adds to row j alone when rotated d
    # bins further than row j.  Row 0 is every prefix's root, never the row that joins
    # one, so pair[0] is never read (left 0).
    pair = np.zeros((k, k, n_bins))
    for j in range(1, k - 1):
        for r in range(j + 1, k):
            rotation_increments(demand[j], capacity, r, n_bins, value, win_ptr, win_start,
                                win_len, one_ptr, one_idx, one_val, cum, allowance,
                                pair[j, r])
    # incs[l, r, s]: what row r adds at rotation s to prefix l; order[l, r] sorts them.
    incs = np.empty((k, k, n_bins))
    order = np.empty((k, k, n_bins), dtype=np.int64)
    below = np.zeros((k, k), dtype=np.int64)
    # the overlap of the current child with its parent prefix (_overlap)
    ov_bin = np.empty(n_bins, dtype=np.int64)
    ov_val = np.empty(n_bins)
    ov_state = np.zeros(4)
    sums = np.empty(n_bins)  # _window_min's scratch
    prefix = np.empty((k, n_bins))
    exc = np.zeros(k)
    rot = np.zeros(k, dtype=np.int64)
    for b in range(n_bins):
        prefix[0, b] = demand[0, b]
    prune = 2.0 * margin
    # Symmetry: the rounding between a vector and its turned copy (sums in another
    # order, rows equal up to the allowed gap) stays within margin / 2.
    sym_t = 0
    sym_level = k  # none
    if 8.0 * (k + n_bins) * 2.2e-16 * (rem[0] + capacity * n_bins) <= 0.25 * margin:
        sym_t = _symmetry_shift(demand, limits, 0.25 * margin)
    if sym_t > 0:
        for r in range(1, k):
            if sym_t % limits[r] != 0:
                sym_level = r
                break
    # When the turn moves the last row only, its rotation s and (s + sym_t) mod L are
    # twins under every prefix: its rotations fall into gcd(sym_t, L) classes, those
    # of 0..gcd-1, so the bounds scan only these, less the rounding.  (Until
    # 2026-11-28 they scanned the first sym_t rotations: beyond L when sym_t > L,
    # entries never written, and twins of each other when sym_t does not divide L.)
    sorted_count = limits.copy()
    twin_slack = np.zeros(k)
    if sym_level == last:
        sorted_count[last] = _gcd(sym_t, n_last)
        twin_slack[last] = 0.5 * margin
    # The children of the current prefix of level top - 1: how many, what their last
    # row's candidates cost (or would have cost) in joint increments, and whether
    # prefix sums (_window_min) take them instead.
    stats = np.zeros(3)
    window_cost = WINDOW_COST * n_bins if win_ptr[k] > win_ptr[last] else np.inf
    floors = np.full(n_bins, np.inf)  # per rotation of row sym_level, under one prefix
    drop = _drops(demand, supp_ptr, supp_idx, supp_val, top)
    eb_val = np.zeros(n_bins)
    eb_from = np.full(n_bins, -1, dtype=np.int64)
    reach = REACH * drop[top - 1 if top > 1 else max(top, 0), 1]
    floor = np.inf  # of the sym_level subtree being walked
    best_e = initial
    first_kept = np.inf
    # e < perfect_below  <=>  e <= tol_excess
    perfect_below = np.nextafter(tol_excess, np.inf)
    evaluated = 0
    exc[0] = over_capacity(prefix[0], capacity, over)
    level = 0
    if top > 0:
        threshold = perfect_below if find_perfect else best_e - tol_excess
        _prefix_increments(0, prefix[0], capacity, limits, sorted_count, twin_slack, value,
                           win_ptr, win_start, win_len, one_ptr, one_idx, one_val, cum,
                           allowance, incs, order, below,
                           threshold + prune + margin - exc[0], reach)
        level = 1
        rot[1] = -1
    while True:
        if level > 0:
            parent = level - 1
            if level == sym_level and rot[level] >= 0:
                floors[rot[level]] = floor
            rot[level] += 1
            if rot[level] >= limits[level]:
                level -= 1
                if level == 0:
                    break
                continue
            s = rot[level]
            threshold = perfect_below if find_perfect else best_e - tol_excess
            if level == sym_level:
                floor = np.inf
                first = _first_twin(s, sym_t, limits[level], n_bins)
                if first < s and floors[first] - 0.5 * margin >= threshold:
                    floor = floors[first] - 0.5 * margin
                    continue
            # What the rows after this one must add, at least, for this child to
            # beat the incumbent.
            need = threshold + prune - exc[parent] - incs[parent, level, s]
            pruned = need <= 0.0
            if not pruned:
                cheap = 0.0
                for r in range(level + 1, k):
                    cheap += incs[parent, r, order[parent, r, 0]] - twin_slack[r]
                pruned = cheap >= need
            carried = -np.inf
            if not pruned and level == top:
                # What earlier children said of their subtrees, carried to this one.
                here = rot[top - 1]
                origin = eb_from[s]
                if origin >= 0:  # the same child of an earlier sibling prefix
                    d = here - origin
                    if d < 0:
                        d += n_bins
                    carried = eb_val[s] - drop[top - 1, d]
                if s > 0 and eb_from[s - 1] == here:  # the child before, one bin back
                    carried = max(carried, eb_val[s - 1] - drop[top, 1])
                pruned = carried - prune >= threshold
                if pruned:
                    eb_val[s] = carried
                    eb_from[s] = here
            if not pruned:
                ov_state[0] = 0.0
                ov_state[3] = 0.0
                windowed = level == top and stats[2] > 0.0
                if windowed:
                    tail = _window_min(s, parent, demand, supp_ptr, supp_idx, supp_val, incs,
                                       order, pair, alone, prefix, capacity, need,
                                       sorted_count[last], twin_slack[last], value, win_ptr,
                                       win_start, win_len, one_ptr, one_idx, one_val, cum,
                                       allowance, stats, ov_bin, ov_val, ov_state,
                                       peak_after[top], below, sums)
                else:
                    tail = 0.0
                    for r in range(level + 1, k):
                        tail += _joint_min(level, s, parent, r, demand, supp_ptr, supp_idx,
                                           supp_val, limits, incs, order, pair, alone,
                                           prefix[parent], ov_bin, ov_val, ov_state,
                                           capacity, need - tail, level == top,
                                           sorted_count[r], twin_slack[r], peak_after[level])
                        if tail >= need:
                            break
                    stats[1] += ov_state[3]
                if level == top:
                    # The children of one prefix leave alike many candidates: after a
                    # few, the last row goes through whichever costs less for them,
                    # joint increments (work in bins, stats[1]) or prefix sums.
                    stats[0] += 1.0
                    if stats[0] >= ADAPT_AFTER and (stats[2] > 0.0) != (
                            stats[1] > stats[0] * window_cost):
                        stats[2] = 1.0 - stats[2]
                        stats[0] = 0.0
                        stats[1] = 0.0
                pruned = tail >= need
                if pruned and level == top:
                    eb_val[s] = max(carried, exc[parent] + incs[parent, level, s] + tail)
                    eb_from[s] = rot[top - 1]
            if not pruned:
                add_rotated(prefix[parent], demand[level], s, prefix[level])
                e_level, slack = excess_slack(prefix[level], capacity)
                exc[level] = e_level
                pruned = e_level + max(0.0, rem[level + 1] - slack) - prune >= threshold
            if not pruned:
                if ov_state[0] == 0.0:
                    _overlap(prefix[parent], supp_idx[supp_ptr[level]:supp_ptr[level + 1]],
                             supp_val[supp_ptr[level]:supp_ptr[level + 1]], s, ov_bin, ov_val,
                             ov_state, peak_after[level], capacity)
                if level < top:
                    tail = _prefix_increments(level, prefix[level], capacity, limits,
                                              sorted_count, twin_slack, value, win_ptr,
                                              win_start, win_len, one_ptr, one_idx, one_val,
                                              cum, allowance, incs, order, below,
                                              threshold + prune + margin - e_level, reach)
                    pruned = e_level + tail - prune >= threshold
                    if not pruned:
                        level += 1
                        rot[level] = -1
                        if level == top - 1:
                            eb_from[:] = -1
                        if level == top:
                            stats[0] = 0.0  # the method stays the last prefix's
                            stats[1] = 0.0
                        if level == sym_level:
                            floors[:] = np.inf
                        continue
            if pruned:
                floor = min(floor, threshold + margin)
                continue
        # level == top: every rotation of the last row, unless its increment against
        # the parent prefix, against row top alone, or both jointly rules it out.
        p_row = prefix[top]
        base = over_capacity(p_row, capacity, over)
        if top > 0:
            parent_row = prefix[top - 1]
            shift_top = rot[top]
        if sym_level == last:
            floors[:] = np.inf
        any_perfect = False
        for s in range(n_last):
            threshold = perfect_below if find_perfect else best_e - tol_excess
            perfect[s] = False
            if sym_level == last:
                first = _first_twin(s, sym_t, n_last, n_bins)
                if first < s and floors[first] - 0.5 * margin >= threshold:
                    floors[s] = floors[first] - 0.5 * margin
                    continue
            if top > 0:
                need = threshold + prune - base
                v = incs[top - 1, last, s]
                pruned = v >= need
                if not pruned:
                    d = s - shift_top
                    if d < 0:
                        d += n_bins
                    w = pair[top, last, d]
                    pruned = (w >= need or v + w - alone[last] - ov_state[2] >= need
                              or _joint_increment(v, w, alone[last], last_row, s,
                                                  parent_row, ov_bin, ov_val,
                                                  int(ov_state[1]), capacity) >= need)
                if pruned:
                    floor = min(floor, threshold + margin)
                    if sym_level == last:
                        floors[s] = threshold + margin
                    continue
            e = rotation_excess(p_row, over, base, last_idx, last_val, s, capacity, threshold)
            evaluated += 1
            floor = min(floor, e)
            if sym_level == last:  # else floors[] is row sym_level's, not this row's
                floors[s] = e
            if e < threshold:
                if find_perfect:
                    perfect[s] = True
                    any_perfect = True
                    continue
                if best_e == initial:
                    first_kept = e
                best_e = e
                for i in range(last):
                    best_rot[i] = rot[i]
                best_rot[last] = s
        if any_perfect:
            for i in range(last):
                best_rot[i] = rot[i]
            return True, evaluated, first_kept, best_e
        if level == 0:
            break
    return False, evaluated, first_kept, best_e if first_kept < np.inf else np.inf


@jit
def _descent(
    demand: np.ndarray, capacity: float, limits: np.ndarray, supp_ptr: np.ndarray,
    supp_idx: np.ndarray, supp_val: np.ndarray, rounds: int,
) -> float:
    """The excess of a good rotation vector, found without search: each row in turn
    at its best rotation on the rows before it, then up to ``rounds`` passes that
    move each row to its best rotation on all the others while that lowers the
    excess (coordinate descent)."""
    k, n_bins = demand.shape
    rot = np.zeros(k, dtype=np.int64)
    total = np.empty(n_bins)
    over = np.empty(n_bins)
    for b in range(n_bins):
        total[b] = demand[0, b]
    for r in range(1, k):
        idx = supp_idx[supp_ptr[r]:supp_ptr[r + 1]]
        val = supp_val[supp_ptr[r]:supp_ptr[r + 1]]
        base = over_capacity(total, capacity, over)
        best = np.inf
        for s in range(limits[r]):
            e = rotation_excess(total, over, base, idx, val, s, capacity, best)
            if e < best:
                best = e
                rot[r] = s
        add_rotated(total, demand[r], rot[r], total)
    for _ in range(rounds):
        moved = False
        for r in range(1, k):
            idx = supp_idx[supp_ptr[r]:supp_ptr[r + 1]]
            val = supp_val[supp_ptr[r]:supp_ptr[r + 1]]
            # the other rows, summed afresh (no rounding carried between moves)
            for b in range(n_bins):
                total[b] = demand[0, b]
            for q in range(1, k):
                if q != r:
                    add_rotated(total, demand[q], rot[q], total)
            base = over_capacity(total, capacity, over)
            best = rotation_excess(total, over, base, idx, val, rot[r], capacity, np.inf)
            for s in range(limits[r]):
                e = rotation_excess(total, over, base, idx, val, s, capacity, best)
                if e < best:
                    best = e
                    rot[r] = s
                    moved = True
        if not moved:
            break
    for b in range(n_bins):
        total[b] = demand[0, b]
    for r in range(1, k):
        add_rotated(total, demand[r], rot[r], total)
    excess, _ = excess_slack(total, capacity)
    return excess


@jit_inline
def _certified(first: float, initial: float, tol_excess: float) -> bool:
    """Whether a walk started from the incumbent excess ``initial`` keeps what the
    sequential scan keeps, ``first`` being the excess of the first vector it kept
    (:func:`lowest_excess`)."""
    return first < (initial - tol_excess) - tol_excess


#: what _phase_b does: lowest_excess, lowest_excess finding a perfect prefix,
#: perfect_or_lowest
TASK_LOWEST = 0
TASK_FIND_PERFECT = 1
TASK_PERFECT_OR_LOWEST = 2
# _phase_b's walks
_WALK_FROM_GOOD = 0
_WALK_FROM_NONE = 1
_WALK_FOR_PERFECT = 2


@jit_inline
def _phase_b(
    demand: np.ndarray, capacity: float, limits: np.ndarray, supp_ptr: np.ndarray,
    supp_idx: np.ndarray, supp_val: np.ndarray, rem: np.ndarray, tol_excess: float,
    margin: float, best_rot: np.ndarray, task: int, first_mode: bool, perfect: np.ndarray,
    good: float,
) -> tuple[bool, int, float]:
    """Phase B's walks in the order ``task`` asks (:func:`lowest_excess`,
    :func:`perfect_or_lowest`; ``good``: the excess of a vector to start just above,
    ``nan`` for coordinate descent's, :func:`_descent`).  Returns ``(found or exists,
    evaluated, excess of the vector kept)``.

    One kernel with one call of :func:`_walk`, which runs the walks one after another,
    compiled once as the compile unit :data:`PHASE_B_UNIT` (kernels call it through
    :func:`_run_phase_b`): each kernel that calls another compiles the callee's code
    once more at a cold start (:mod:`._unit`).
    """
    k = demand.shape[0]
    evaluated = 0
    kept = np.inf
    settled = False  # best_rot holds the lowest walk's vector (perfect_or_lowest)
    lowest_done = False
    if task == TASK_FIND_PERFECT:
        walk = _WALK_FOR_PERFECT
    elif k < 3:
        walk = _WALK_FOR_PERFECT if task == TASK_PERFECT_OR_LOWEST else _WALK_FROM_NONE
    else:
        if np.isnan(good):
            good = _descent(demand, capacity, limits, supp_ptr, supp_idx, supp_val,
                            DESCENT_ROUNDS)
        walk = _WALK_FROM_GOOD
        if task == TASK_PERFECT_OR_LOWEST and good <= tol_excess:
            if not first_mode:
                return True, 0, np.inf  # descent met a perfect vector
            walk = _WALK_FOR_PERFECT
    initial = good + 4.0 * tol_excess
    while True:
        found, count, first, last_kept = _walk(
            demand, capacity, limits, supp_ptr, supp_idx, supp_val, rem, tol_excess, margin,
            best_rot, walk == _WALK_FOR_PERFECT, perfect,
            initial if walk == _WALK_FROM_GOOD else np.inf)
        evaluated += count
        if walk == _WALK_FROM_GOOD and not _certified(first, initial, tol_excess):
            walk = _WALK_FROM_NONE  # the start is not certified: from none
            continue
        if walk != _WALK_FOR_PERFECT:  # the lowest walk is done
            kept = last_kept
            if task == TASK_LOWEST or lowest_done:
                return False, evaluated, kept
            if kept > 2.0 * tol_excess + margin:
                return False, evaluated, kept  # no vector is perfect
            settled = True
            lowest_done = True
            walk = _WALK_FOR_PERFECT
            continue
        if task == TASK_FIND_PERFECT or found or settled:
            return found, evaluated, kept
        # perfect_or_lowest: none is perfect, and the lowest walk has not run
        lowest_done = True
        walk = _WALK_FROM_GOOD if k >= 3 else _WALK_FROM_NONE


def _phase_b_unit(
    demand_p: int, k: int, n_bins: int, capacity: float, limits_p: int, n_limits: int,
    supp_ptr_p: int, n_supp_ptr: int, supp_idx_p: int, n_supp_idx: int, supp_val_p: int,
    n_supp_val: int, rem_p: int, n_rem: int, tol_excess: float, margin: float,
    best_rot_p: int, n_best_rot: int, task: int, first_mode: int, perfect_p: int,
    n_perfect: int, good: float, out_p: int, n_out: int,
) -> float:
    """:func:`_phase_b` as the C function of :data:`PHASE_B_UNIT` (the arguments of
    :func:`_phase_b` laid out by :func:`~._unit.c_arguments`, then ``out``, which
    receives ``(found or exists, evaluated)``); returns the excess of the vector kept."""
    found, evaluated, kept = _phase_b(
        carray(demand_p, (k, n_bins), np.float64), capacity,
        carray(limits_p, n_limits, np.int64), carray(supp_ptr_p, n_supp_ptr, np.int64),
        carray(supp_idx_p, n_supp_idx, np.int64), carray(supp_val_p, n_supp_val, np.float64),
        carray(rem_p, n_rem, np.float64), tol_excess, margin,
        carray(best_rot_p, n_best_rot, np.int64), task, first_mode != 0,
        carray(perfect_p, n_perfect, np.bool_), good)
    out = carray(out_p, n_out, np.int64)
    out[0] = 1 if found else 0
    out[1] = evaluated
    return kept


_F1 = types.Array(types.float64, 1, "C")
_I1 = types.Array(types.int64, 1, "C")
#: phase B compiled once, as a C function (:mod:`._unit`)
PHASE_B_UNIT = CUnit(
    "tdmcore_phase_b", _phase_b_unit,
    (types.Array(types.float64, 2, "C"), types.float64, _I1, _I1, _I1, _F1, _F1,
     types.float64, types.float64, _I1, types.int64, types.int64,
     types.Array(types.boolean, 1, "C"), types.float64, _I1))
_phase_b_c = PHASE_B_UNIT.call


@jit_inline
def _phase_b_called(
    demand: np.ndarray, capacity: float, limits: np.ndarray, supp_ptr: np.ndarray,
    supp_idx: np.ndarray, supp_val: np.ndarray, rem: np.ndarray, tol_excess: float,
    margin: float, best_rot: np.ndarray, task: int, first_mode: bool, perfect: np.ndarray,
    good: float,
) -> tuple[bool, int, float]:
    """:func:`_phase_b` through its compile unit (the same arguments and answers)."""
    out = np.zeros(2, dtype=np.int64)
    kept = _phase_b_c(np.ascontiguousarray(demand), capacity, np.ascontiguousarray(limits),
                      np.ascontiguousarray(supp_ptr), np.ascontiguousarray(supp_idx),
                      np.ascontiguousarray(supp_val), np.ascontiguousarray(rem), tol_excess,
                      margin, best_rot, task, 1 if first_mode else 0, perfect, good, out)
    return out[0] != 0, out[1], kept


#: what kernels call for phase B: the compile unit, or under NUMBA_DISABLE_JIT=1
#: (nothing compiled) the Python function itself
_run_phase_b = _phase_b if config.DISABLE_JIT else _phase_b_called


@jit_inline
def _lowest_from(
    demand: np.ndarray, capacity: float, limits: np.ndarray, supp_ptr: np.ndarray,
    supp_idx: np.ndarray, supp_val: np.ndarray, rem: np.ndarray, tol_excess: float,
    margin: float, best_rot: np.ndarray, perfect: np.ndarray, good: float,
) -> tuple[int, float]:
    """Phase B's walk started just above ``good``, the excess of some vector
    (:func:`lowest_excess`), and again from infinity when the start is not
    certified.  Returns ``(evaluated, excess of the vector kept)``."""
    _, evaluated, kept = _run_phase_b(demand, capacity, limits, supp_ptr, supp_idx,
                                      supp_val, rem, tol_excess, margin, best_rot,
                                      TASK_LOWEST, False, perfect, good)
    return evaluated, kept


@jit_inline
def lowest_excess(
    demand: np.ndarray, capacity: float, limits: np.ndarray, supp_ptr: np.ndarray,
    supp_idx: np.ndarray, supp_val: np.ndarray, rem: np.ndarray, tol_excess: float,
    margin: float, best_rot: np.ndarray, find_perfect: bool, perfect: np.ndarray,
) -> tuple[bool, int]:
    """Write into ``best_rot`` the vector the brute force's sequential scan keeps:
    the first in enumeration order that no later one beats by more than
    ``tol_excess``; see :func:`_walk` (``find_perfect`` too).  Returns
    ``(found, evaluated)``.

    **A good incumbent first.**  The scan's incumbent starts at infinity and falls
    as it meets better vectors, so the walk prunes little until it has met a good
    one.  Here it starts instead just above the excess ``G`` of a good vector found
    by coordinate descent (:func:`_descent`): the walk keeps the first vector below
    ``T = fl(G + 4 tol - tol)`` (one exists: that vector) and then goes on as the
    scan does.  Every vector before it lies at ``T`` or above, so the scan's
    incumbent there is at least ``T``, or none; if the vector kept first lies below
    ``fl(T - tol)``, the scan keeps it too, and from there on both keep the same
    vectors (only those below ``T`` can be kept).  Otherwise (a vector within
    ``tol`` below ``T`` comes first: rare) the walk runs again from infinity.
    """
    found, evaluated, _ = _run_phase_b(demand, capacity, limits, supp_ptr, supp_idx,
                                       supp_val, rem, tol_excess, margin, best_rot,
                                       TASK_FIND_PERFECT if find_perfect else TASK_LOWEST,
                                       False, perfect, np.nan)
    return found, evaluated


@jit_inline
def perfect_or_lowest(
    demand: np.ndarray, capacity: float, limits: np.ndarray, supp_ptr: np.ndarray,
    supp_idx: np.ndarray, supp_val: np.ndarray, rem: np.ndarray, tol_excess: float,
    margin: float, best_rot: np.ndarray, first_mode: bool, perfect: np.ndarray,
) -> tuple[bool, int]:
    """Whether some vector is perfect and, when none is, the vector phase B keeps:
    both answers of :func:`lowest_excess`, for the price of one walk on a link
    that has no perfect vector.  Returns ``(exists, evaluated)``.

    ``exists`` with ``first_mode``: as :func:`lowest_excess` with ``find_perfect``
    (the first perfect prefix in ``best_rot[:k-1]``, its perfect last-row rotations
    in ``perfect``); without, only that one exists (``best_rot`` undefined).  Not
    ``exists``: ``best_rot`` holds what :func:`lowest_excess` keeps without
    ``find_perfect``.

    The walk for the best vector settles the other question too.  Its sequential
    scan keeps a vector only below the kept one's excess less ``tol``, so every
    vector lies at or above the last kept excess ``E`` less ``tol``: when ``E >
    2 tol`` (and a margin for rounding), none is within ``tol``, none is perfect.
    So when coordinate descent (:func:`_descent`) meets no perfect vector, that walk
    runs first, and the walk for the first perfect prefix only when it leaves the
    question open (a walk for the first perfect prefix that finds none leaves
    ``best_rot`` as it was: phase B's vector stands); when descent meets one, a
    perfect vector exists.
    """
    exists, evaluated, _ = _run_phase_b(demand, capacity, limits, supp_ptr, supp_idx,
                                        supp_val, rem, tol_excess, margin, best_rot,
                                        TASK_PERFECT_OR_LOWEST, first_mode, perfect, np.nan)
    return exists, evaluated
