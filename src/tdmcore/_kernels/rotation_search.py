"""Exact rotation search over one link's traffic circle (docs/traffic-circle.md).

The brute force enumerates every rotation vector ``(0, s_1, ..., s_{k-1})`` in
lexicographic order, last row fastest.  This kernel returns exactly the vector that
enumeration returns, but reaches it by a depth-first walk over *prefixes*
``(s_1, ..., s_{k-2})`` that

* keeps the prefix's summed demand incrementally (one row added per level);
* evaluates every rotation of the last row of a prefix in one pass over the last
  row's non-zero bins only (the excess outside them is the prefix's own excess);
* prunes a prefix with a lower bound on the excess of every completion: the
  prefix's own excess (adding a row never lowers excess) plus the part of the
  remaining rows' demand that cannot fit in the prefix's total slack;
* in ``optimal`` mode, prunes a prefix whose own pairwise distances already bound
  Psi (Eq. 9) below the best perfect vector found so far, or one where some
  remaining row has no rotation far enough from the placed rows to beat it.

Every bound is applied with a safety margin for rounding, so a pruned prefix can
never contain a vector the enumeration would have chosen.

Two phases: (A) walk only prefixes that can hold a perfect vector (the bounds
above, and each remaining row must alone have a perfect rotation on the prefix);
if none does, (B) branch and bound for the highest score, ties first in
enumeration order, with the stronger bounds of :mod:`.lowest_excess`.  When phase
A's plain walk has spent its budget without a perfect vector, the stronger walks
take over (:func:`~.lowest_excess.perfect_or_lowest`): on a link that has none,
phase B's walk alone settles both questions.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit, jit_inline
from .lowest_excess import lowest_excess, perfect_or_lowest
from .partial_sums import add_rotated, excess_slack, over_capacity, rotation_excess

MODE_FIRST = 0
MODE_OPTIMAL = 1
#: the work of the plain phase-A walk without a perfect vector, in last-row sweeps
#: (bins: prefixes built and rows tried count too), before the stronger walk of
#: lowest_excess looks for one
PHASE_A_BUDGET = 8


@jit
def fold_mids(flat: np.ndarray, n_bins: int) -> np.ndarray:
    """Midpoints (bins) folded onto the circle ``[0, n_bins)``: ``np.mod``'s value,
    bit for bit (Python's float ``%``), and ``0`` where that is exactly ``n_bins``
    (a tiny negative input)."""
    out = np.empty_like(flat)
    for i in range(flat.shape[0]):
        m = flat[i] % n_bins
        out[i] = 0.0 if m >= n_bins else m
    return out


@jit
def contending(demand: np.ndarray, capacity: float, rtol: float) -> np.ndarray:
    """Rows ``i != j`` whose peak demands sum to at least ``capacity (1 - rtol)``:
    Eq. 9's contending tasks (demands >= 0)."""
    k, n_bins = demand.shape
    peaks = np.zeros(k)
    for i in range(k):
        for b in range(n_bins):
            if demand[i, b] > peaks[i]:
                peaks[i] = demand[i, b]
    bound = capacity * (1.0 - rtol)
    pairs = np.zeros((k, k), dtype=np.bool_)
    for i in range(k):
        for j in range(k):
            if i != j and peaks[i] + peaks[j] >= bound:
                pairs[i, j] = True
    return pairs


@jit_inline
def pair_distance(
    mids: np.ndarray, mid_offsets: np.ndarray, i: int, rot_i: int, j: int, rot_j: int, n_bins: int
) -> float:
    """Minimal circular distance (bins) between the comm-unit midpoints of rows i, j.

    ``mids`` must already lie in ``[0, n_bins)`` and rotations in ``[0, n_bins)``;
    ``p - n_bins`` for ``p`` in ``[n_bins, 2 n_bins)`` is then exact, so this equals
    ``min(|a - b|, N - |a - b|)`` with ``a = (m + r) mod N`` bit for bit.
    """
    best = np.inf
    for a in range(mid_offsets[i], mid_offsets[i + 1]):
        pa = mids[a] + rot_i
        if pa >= n_bins:
            pa -= n_bins
        for c in range(mid_offsets[j], mid_offsets[j + 1]):
            pc = mids[c] + rot_j
            if pc >= n_bins:
                pc -= n_bins
            d = abs(pa - pc)
            d_other = n_bins - d
            if d_other < d:
                d = d_other
            if d < best:
                best = d
    return best


@jit
def perfect_interval_middles(
    perfect: np.ndarray, n_rot: int, middles: np.ndarray, run_starts: np.ndarray,
    run_lengths: np.ndarray,
) -> int:
    """Middles of the maximal circular runs of ``perfect[:n_rot]``, ascending.

    A run touching both ends is one run; a fully perfect range is one run of
    length ``n_rot`` starting at 0.  Middle index = ``(start + (len - 1) // 2) mod L``.
    Returns the number of runs; ``run_starts``/``run_lengths`` are filled in the
    same ascending-middle order.
    """
    n_perfect = 0
    first_gap = -1
    for s in range(n_rot):
        if perfect[s]:
            n_perfect += 1
        elif first_gap < 0:
            first_gap = s
    if n_perfect == 0:
        return 0
    if n_perfect == n_rot:
        middles[0] = (n_rot - 1) // 2
        run_starts[0] = 0
        run_lengths[0] = n_rot
        return 1
    count = 0
    run_start = -1
    run_len = 0
    # Walk once around the circle starting just after a gap: every run is seen whole.
    for t in range(1, n_rot + 1):
        idx = (first_gap + t) % n_rot
        if perfect[idx]:
            if run_len == 0:
                run_start = idx
            run_len += 1
        elif run_len > 0:
            middles[count] = (run_start + (run_len - 1) // 2) % n_rot
            run_starts[count] = run_start
            run_lengths[count] = run_len
            count += 1
            run_len = 0
    if run_len > 0:
        middles[count] = (run_start + (run_len - 1) // 2) % n_rot
        run_starts[count] = run_start
        run_lengths[count] = run_len
        count += 1
    # Insertion sort by middle (at most L / 2 + 1 runs).
    for a in range(1, count):
        m, st, ln = middles[a], run_starts[a], run_lengths[a]
        c = a - 1
        while c >= 0 and middles[c] > m:
            middles[c + 1] = middles[c]
            run_starts[c + 1] = run_starts[c]
            run_lengths[c + 1] = run_lengths[c]
            c -= 1
        middles[c + 1] = m
        run_starts[c + 1] = st
        run_lengths[c + 1] = ln
    return count


@jit_inline
def _next_prefix(
    level: int, rot: np.ndarray, limits: np.ndarray, prefix: np.ndarray, demand: np.ndarray,
    capacity: float,
) -> tuple[int, bool, float, float]:
    """Advance the depth-first walk at ``level``: next rotation, or back up a level.

    Returns ``(level, built, excess, slack)``; when ``built`` the prefix row of
    ``level`` holds the new partial sum and its excess and slack.
    """
    rot[level] += 1
    if rot[level] >= limits[level]:
        return level - 1, False, 0.0, 0.0
    add_rotated(prefix[level - 1], demand[level], rot[level], prefix[level])
    exc, slack = excess_slack(prefix[level], capacity)
    return level, True, exc, slack


@jit
def _rows_fit(
    prefix_row: np.ndarray, capacity: float, over: np.ndarray, first_row: int, k: int,
    limits: np.ndarray, supp_ptr: np.ndarray, supp_idx: np.ndarray, supp_val: np.ndarray,
    tol_excess: float, above_tol: float,
) -> tuple[bool, int]:
    """Whether every row ``first_row..k-1`` alone has a perfect rotation on the prefix,
    and the work that took (bins, at most).

    If one has none, no completion of the prefix is perfect (adding the other
    rows never lowers excess), so phase A may prune the prefix.
    """
    n_bins = prefix_row.shape[0]
    base = over_capacity(prefix_row, capacity, over)
    work = n_bins
    for r in range(k - 1, first_row - 1, -1):
        lo = supp_ptr[r]
        hi = supp_ptr[r + 1]
        fits = False
        for s in range(limits[r]):
            work += hi - lo
            e = rotation_excess(prefix_row, over, base, supp_idx[lo:hi], supp_val[lo:hi], s,
                                 capacity, above_tol)
            if e <= tol_excess:
                fits = True
                break
        if not fits:
            return False, work
    return True, work


@jit_inline
def _prefix_psi(
    level: int, rot: np.ndarray, psi_parent: float, contend: np.ndarray, mids: np.ndarray,
    mid_offsets: np.ndarray, n_bins: int,
) -> float:
    psi = psi_parent
    for i in range(level):
        if contend[i, level]:
            d = pair_distance(mids, mid_offsets, i, rot[i], level, rot[level], n_bins)
            if d < psi:
                psi = d
    return psi


@jit
def _reach_bound(
    level: int, rot: np.ndarray, reach: np.ndarray, contend: np.ndarray, mids: np.ndarray,
    mid_offsets: np.ndarray, limits: np.ndarray, n_bins: int,
) -> float:
    """Fill ``reach[level]`` and return an upper bound on Psi of every completion.

    ``reach[level, r, s]`` (rows ``r > level``) is the smallest distance between
    row ``r``'s midpoints at rotation ``s`` and those of the contending rows
    ``0..level`` at their rotations in ``rot``.  Whatever rotation a completion
    gives row ``r``, its Psi is at most ``max_s reach[level, r, s]``: the bound is
    the minimum of that over the remaining rows.  Distances are those of
    :func:`pair_distance`, bit for bit, so comparing the bound with the best Psi
    found prunes exactly what could not beat it.
    """
    k = reach.shape[0]
    bound = np.inf
    for r in range(level + 1, k):
        row_best = -np.inf
        for s in range(limits[r]):
            d = reach[level - 1, r, s] if level > 0 else np.inf
            if contend[level, r]:
                here = pair_distance(mids, mid_offsets, level, rot[level], r, s, n_bins)
                if here < d:
                    d = here
            reach[level, r, s] = d
            if d > row_best:
                row_best = d
        if row_best < bound:
            bound = row_best
    return bound


@jit
def _first_interval_middle(
    perfect: np.ndarray, n_last: int, middles: np.ndarray, run_starts: np.ndarray,
    run_lengths: np.ndarray, best_rot: np.ndarray,
) -> None:
    """``first`` mode: the middle of the perfect interval that holds the smallest
    perfect rotation of the last row, into ``best_rot[-1]``."""
    n_runs = perfect_interval_middles(perfect, n_last, middles, run_starts, run_lengths)
    smallest = 0
    while not perfect[smallest]:
        smallest += 1
    for r in range(n_runs):
        if (smallest - run_starts[r]) % n_last < run_lengths[r]:
            best_rot[best_rot.shape[0] - 1] = middles[r]
            return


@jit
def search_rotations_kernel(
    demand: np.ndarray,
    capacity: float,
    limits: np.ndarray,
    mode: int,
    mids: np.ndarray,
    mid_offsets: np.ndarray,
    contend: np.ndarray,
    tol_excess: float,
    tol_psi: float,
    margin: float,
    best_rot: np.ndarray,
    perfect_only: bool,
) -> tuple[bool, float, int]:
    """Search rotations; write the chosen vector into ``best_rot``.

    Returns ``(perfect, psi, evaluated)``.  With ``perfect_only`` the search stops
    after phase A: a non-perfect answer then leaves ``best_rot`` undefined (the
    scheduler uses this when another node already scores 100).  ``psi`` is only
    meaningful in optimal mode with ``perfect``.  ``evaluated`` counts rotation
    vectors whose excess was computed at least in part (a pruned prefix counts none).
    """
    k, n_bins = demand.shape
    last = k - 1
    optimal = mode == MODE_OPTIMAL
    for i in range(k):
        best_rot[i] = 0
    evaluated = 0

    # Remaining mass rem[j] = total demand of rows j..k-1 (rotation invariant).
    rem = np.zeros(k + 1)
    for j in range(k - 1, -1, -1):
        m = 0.0
        for b in range(n_bins):
            m += demand[j, b]
        rem[j] = rem[j + 1] + m

    if k == 1:
        excess, _ = excess_slack(demand[0], capacity)
        return excess <= tol_excess, np.inf, 1

    # Non-zero bins of every row (CSR): the only bins whose sum depends on its rotation.
    supp_ptr = np.zeros(k + 1, dtype=np.int64)
    for r in range(k):
        count = 0
        for b in range(n_bins):
            if demand[r, b] > 0.0:
                count += 1
        supp_ptr[r + 1] = supp_ptr[r] + count
    supp_all_idx = np.empty(supp_ptr[k], dtype=np.int64)
    supp_all_val = np.empty(supp_ptr[k])
    for r in range(k):
        t = supp_ptr[r]
        for b in range(n_bins):
            if demand[r, b] > 0.0:
                supp_all_idx[t] = b
                supp_all_val[t] = demand[r, b]
                t += 1
    supp_idx = supp_all_idx[supp_ptr[last]:supp_ptr[k]]
    supp_val = supp_all_val[supp_ptr[last]:supp_ptr[k]]

    n_last = limits[last]
    prefix = np.empty((k, n_bins))
    for b in range(n_bins):
        prefix[0, b] = demand[0, b]
    psi_pre = np.full(k, np.inf)
    rot = np.zeros(k, dtype=np.int64)
    over = np.empty(n_bins)
    perfect = np.zeros(n_last, dtype=np.bool_)
    middles = np.empty(n_last, dtype=np.int64)
    run_starts = np.empty(n_last, dtype=np.int64)
    run_lengths = np.empty(n_last, dtype=np.int64)
    top = last - 1  # deepest prefix row
    above_tol = np.nextafter(tol_excess, np.inf)  # e >= above_tol  <=>  e > tol_excess
    # optimal mode: how far each remaining row can get from the placed ones
    reach = np.empty((k, k, n_bins)) if optimal else np.empty((1, 1, 1))
    if optimal:
        _reach_bound(0, rot, reach, contend, mids, mid_offsets, limits, n_bins)

    # ---------------- phase A: perfect vectors only ----------------
    found = False
    best_psi = np.inf
    # The plain walk below usually meets a perfect vector within a few prefixes.
    # When it has not after this much work (in bins: the last row's sweeps, but
    # also the prefixes built and the rows tried on them, which on a crowded link
    # can be all the plain walk does), the walk of lowest_excess, with its
    # stronger bounds, looks for the first perfect prefix: in first mode that is
    # the answer; in optimal mode, if there is one, the plain walk goes on (it
    # alone weighs Psi).  Either way it settles at once that none is perfect, and
    # then gives phase B's answer too (perfect_or_lowest).
    sweep = n_last * max(1, supp_ptr[k] - supp_ptr[last])
    budget = PHASE_A_BUDGET * sweep
    checked = False
    exc0, slack0 = excess_slack(prefix[0], capacity)
    fits = exc0 + max(0.0, rem[1] - slack0) <= tol_excess + margin
    work = n_bins
    if fits:
        fits, work = _rows_fit(prefix[0], capacity, over, 1, k, limits, supp_ptr,
                               supp_all_idx, supp_all_val, tol_excess, above_tol)
    if fits:
        level = 0 if top == 0 else 1
        if top > 0:
            rot[1] = -1
        while True:
            if not found and not checked and work >= budget:
                checked = True
                if perfect_only:
                    exists, count = lowest_excess(demand, capacity, limits, supp_ptr,
                                                  supp_all_idx, supp_all_val, rem, tol_excess,
                                                  margin, best_rot, True, perfect)
                else:  # when none is perfect, phase B's answer comes with it
                    exists, count = perfect_or_lowest(demand, capacity, limits, supp_ptr,
                                                      supp_all_idx, supp_all_val, rem,
                                                      tol_excess, margin, best_rot,
                                                      not optimal, perfect)
                evaluated += count
                if not exists:
                    if perfect_only:
                        break
                    return False, np.inf, evaluated
                if not optimal:
                    _first_interval_middle(perfect, n_last, middles, run_starts,
                                           run_lengths, best_rot)
                    return True, np.inf, evaluated
            if level > 0:
                level, built, exc, slack = _next_prefix(level, rot, limits, prefix, demand,
                                                        capacity)
                if not built:
                    if level == 0:
                        break
                    continue
                work += 2 * n_bins
                if exc + max(0.0, rem[level + 1] - slack) > tol_excess + margin:
                    continue
                if optimal:
                    psi = _prefix_psi(level, rot, psi_pre[level - 1], contend, mids,
                                      mid_offsets, n_bins)
                    if found and psi <= best_psi + tol_psi:
                        continue
                    bound = _reach_bound(level, rot, reach, contend, mids, mid_offsets,
                                         limits, n_bins)
                    if found and bound <= best_psi + tol_psi:
                        continue
                    psi_pre[level] = psi
                if level < top:
                    fits, tried = _rows_fit(prefix[level], capacity, over, level + 1, k,
                                            limits, supp_ptr, supp_all_idx, supp_all_val,
                                            tol_excess, above_tol)
                    work += tried
                    if not fits:
                        continue
                    level += 1
                    rot[level] = -1
                    continue
            # -- level == top: every rotation of the last row, perfect or not --
            p_row = prefix[top]
            base = over_capacity(p_row, capacity, over)
            any_perfect = False
            for s in range(n_last):
                e = rotation_excess(p_row, over, base, supp_idx, supp_val, s, capacity,
                                     above_tol)
                perfect[s] = e <= tol_excess
                if perfect[s]:
                    any_perfect = True
            evaluated += n_last
            work += sweep
            if any_perfect:
                if not optimal:
                    for i in range(last):
                        best_rot[i] = rot[i]
                    _first_interval_middle(perfect, n_last, middles, run_starts, run_lengths,
                                           best_rot)
                    return True, np.inf, evaluated
                n_runs = perfect_interval_middles(perfect, n_last, middles, run_starts,
                                                  run_lengths)
                for r in range(n_runs):
                    psi = psi_pre[top]
                    for i in range(last):
                        if contend[i, last]:
                            d = pair_distance(mids, mid_offsets, i, rot[i], last, middles[r],
                                              n_bins)
                            if d < psi:
                                psi = d
                    if (not found) or psi > best_psi + tol_psi:
                        found = True
                        best_psi = psi
                        for i in range(last):
                            best_rot[i] = rot[i]
                        best_rot[last] = middles[r]
            if level == 0:
                break
    if found or perfect_only:
        return found, best_psi, evaluated
    # ---------------- phase B: the highest score, ties first in enumeration order
    for i in range(k):
        best_rot[i] = 0
    _, count = lowest_excess(demand, capacity, limits, supp_ptr, supp_all_idx, supp_all_val, rem,
                             tol_excess, margin, best_rot, False, perfect)
    return False, np.inf, evaluated + count
