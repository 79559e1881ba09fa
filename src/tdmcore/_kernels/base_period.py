"""Base-period unification kernel (docs/traffic-circle.md).

Compiled so that the scheduler can unify the periods of every candidate node in
one call; :func:`tdmcore.unify_periods` wraps the same kernel.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit

# Float allowance on the G_T / E_T comparisons (ms): real inputs never sit this close.
EPS_MS = 1e-9
STEP_COMMON = 1
STEP_IDLE = 2
STEP_INCOMPATIBLE = 3


@jit
def _ceil_div(x: float, t: float) -> int:
    return int(np.ceil(x / t))


@jit
def _fit_low(periods: np.ndarray, low: np.ndarray, base: float, high_lo: float,
             high_hi: float, gt_ms: float, et_frac: float, max_multiple: int,
             mult: np.ndarray, idle: np.ndarray) -> bool:
    """Fit every low-priority pod to the high-priority pods' common multiple.

    ``base`` is ``T_high`` (the mean of the high-priority products), ``high_lo`` /
    ``high_hi`` the least and largest of those products.  Each pod either has a
    multiple within ``G_T`` of every high-priority product (step 1's pairwise test;
    the one closest to ``T_high``, the smallest on ties; no idle), or is the
    shorter one, ``0 < T_high - m t <= E_T`` (``E_T = et_frac x t``; the smallest
    such gap): idle ``(T_high - m t) / m`` per iteration closes the gap, so the pod
    runs at ``T_high``.  Writes ``mult[i]`` / ``idle[i]`` for the pods of ``low``;
    False when one of them fits neither way.
    """
    for j in range(low.shape[0]):
        i = low[j]
        t = periods[i]
        best_dev = np.inf
        best_m = 0
        for m in range(1, max_multiple + 1):
            x = m * t
            if abs(x - high_lo) <= gt_ms + EPS_MS and abs(x - high_hi) <= gt_ms + EPS_MS:
                dev = abs(x - base)
                if dev < best_dev:
                    best_dev = dev
                    best_m = m
        if best_m > 0:
            mult[i] = best_m
            idle[i] = 0.0
            continue
        best_gap = np.inf
        for m in range(1, max_multiple + 1):
            gap = base - m * t
            if gap > 0.0 and gap <= et_frac * t + EPS_MS and gap < best_gap:
                best_gap = gap
                best_m = m
        if best_m == 0:
            return False
        mult[i] = best_m
        idle[i] = best_gap / best_m
    return True


@jit
def smallest_common_multiple(
    periods: np.ndarray, idx: np.ndarray, low: np.ndarray, gt_ms: float, et_frac: float,
    max_multiple: int, multiples: np.ndarray, idle: np.ndarray,
) -> float:
    """The smallest ``T = mean(m_p t_p)`` over pods ``idx`` to which ``low`` fit.

    Candidates are every ``m_p <= M`` over the pods ``idx`` whose products are
    **pairwise** within ``G_T`` (``|m_p t_p - m_q t_q| <= G_T`` for every pair, with
    the comparisons' float allowance), generated anchored on the first pod's
    multiple ``m_0`` (ascending; every other product lies within ``G_T`` of
    ``m_0 t_0``), then in odometer order (last pod fastest): the order of the
    brute-force enumeration of ``[1, M]^k``.  Among the candidates to which every
    pod of ``low`` fits (:func:`_fit_low`; ``low`` empty: every candidate), the
    smallest ``T`` wins, the first generated on ties.  Writes the winner's
    multiples (pods ``idx``), multiples and idle (pods ``low``) and returns ``T``;
    ``inf`` (nothing written) when there is none.

    Exact, and pruned where no skipped candidate could win: a partial choice whose
    least completion has a larger ``T`` than the best found, or than any ``T`` the
    pods of ``low`` can fit, whose largest completion has a smaller ``T`` than they
    can fit, or two of whose products already differ by more than ``G_T``, is not
    completed (the pairwise test is the same comparison on the same two floats as
    the final one, and products only grow with the multiple); enumeration stops
    once ``m_0 t_0`` lies more than ``G_T`` above the best ``T`` (or the fitting
    range).  Nothing is stored per candidate, so memory stays ``O(k)``.
    """
    k = idx.shape[0]
    n = periods.shape[0]
    lo = np.empty(k, dtype=np.int64)
    hi = np.empty(k, dtype=np.int64)
    combo = np.empty(k, dtype=np.int64)
    cur_mult = np.empty(n, dtype=np.int64)
    cur_idle = np.zeros(n)
    prefix = np.empty(k + 1)
    suffix = np.empty(k + 1)
    low_x = np.empty(k + 1)
    high_x = np.empty(k + 1)
    margin = 1e-9
    best = np.inf
    # the T_high every low-priority pod can fit lies in [floor_t, ceil_t]: within
    # G_T of one of its multiples, or up to E_T above one (_fit_low); none is below
    # its own period less G_T, or above M times it plus the larger of G_T and E_T
    floor_t = -np.inf
    ceil_t = np.inf
    for j in range(low.shape[0]):
        t = periods[low[j]]
        floor_t = max(floor_t, t - gt_ms - EPS_MS)
        ceil_t = min(ceil_t, max_multiple * t + max(gt_ms, et_frac * t) + EPS_MS)
    suffix_hi = np.empty(k + 1)
    reach = gt_ms + EPS_MS  # no two products of a candidate differ by more
    t0 = periods[idx[0]]
    for m0 in range(1, max_multiple + 1):
        x0 = m0 * t0
        # every T of this anchor lies within G_T of it (the margin covers the mean's
        # rounding)
        limit0 = min(best, ceil_t)
        if x0 - reach - limit0 > margin * max(1.0, abs(limit0)):
            break
        if floor_t - (x0 + reach) > margin * max(1.0, abs(floor_t)):
            continue
        lo[0] = m0
        hi[0] = m0
        feasible = True
        for j in range(1, k):
            t = periods[idx[j]]
            a = max(1, _ceil_div(x0 - reach, t))
            b = min(max_multiple, int(np.floor((x0 + reach) / t)))
            # the window's ends are rounded: widen by one where the pairwise test
            # with x0 (the exact rule) may still pass
            if a > 1 and abs((a - 1) * t - x0) <= reach:
                a -= 1
            if b < max_multiple and abs((b + 1) * t - x0) <= reach:
                b += 1
            if a > b:
                feasible = False
                break
            lo[j] = a
            hi[j] = b
        if not feasible:
            continue
        # depth-first over the other pods' multiples, ascending (the odometer's
        # order, last pod fastest); prefix[j] = sum of the first j products, in
        # the order the mean sums them, low_x / high_x their least and largest.
        # A prefix whose least completion already puts T above the best one, or
        # whose newest product lies more than G_T above another, is skipped with
        # every larger multiple at its position: products only grow.  The margin
        # keeps float ties evaluated as the mean computes them.
        prefix[1] = 0.0 + x0
        low_x[1] = x0
        high_x[1] = x0
        suffix[k] = 0.0
        suffix_hi[k] = 0.0
        for j in range(k - 1, 0, -1):
            suffix[j] = suffix[j + 1] + lo[j] * periods[idx[j]]
            suffix_hi[j] = suffix_hi[j + 1] + hi[j] * periods[idx[j]]
        limit = min(best, ceil_t)
        combo[0] = m0
        pos = 1
        if k > 1:
            combo[1] = lo[1] - 1
        while True:
            if k > 1:
                combo[pos] += 1
                if combo[pos] > hi[pos]:
                    pos -= 1
                    if pos == 0:
                        break
                    continue
                x = combo[pos] * periods[idx[pos]]
                prefix[pos + 1] = prefix[pos] + x
                low_x[pos + 1] = min(low_x[pos], x)
                high_x[pos + 1] = max(high_x[pos], x)
                if ((prefix[pos + 1] + suffix[pos + 1]) / k - limit
                        > margin * max(1.0, abs(limit))
                        or x - low_x[pos] > reach):
                    pos -= 1
                    if pos == 0:
                        break
                    continue
                if (high_x[pos] - x > reach  # a larger multiple here may still fit
                        or floor_t - (prefix[pos + 1] + suffix_hi[pos + 1]) / k
                        > margin * max(1.0, abs(floor_t))):
                    continue
                if pos < k - 1:
                    pos += 1
                    combo[pos] = lo[pos] - 1
                    continue
            base = prefix[k] / k
            if base < best and high_x[k] - low_x[k] <= reach and _fit_low(
                    periods, low, base, low_x[k], high_x[k], gt_ms, et_frac, max_multiple,
                    cur_mult, cur_idle):
                best = base
                limit = min(best, ceil_t)
                for j in range(k):
                    multiples[idx[j]] = combo[j]
                for j in range(low.shape[0]):
                    multiples[low[j]] = cur_mult[low[j]]
                    idle[low[j]] = cur_idle[low[j]]
            if k == 1:
                break
    return best


@jit
def unify_kernel(
    periods: np.ndarray, priorities: np.ndarray, gt_ms: float, et_frac: float,
    max_multiple: int, multiples: np.ndarray, idle: np.ndarray,
) -> tuple[float, int]:
    """Unify ``periods``; fill ``multiples`` and ``idle``; return ``(T, step)``.

    ``step`` is 1 (common multiple within G_T), 2 (idle injected into low-priority
    pods) or 3 (incompatible: ``T`` = longest period, multiples 1).

    Step 1 (spec §4, revised 2026-11-28: pairwise, the paper's "the difference
    between the multiples of any two pod periods is within G_T"): the smallest
    ``T`` over every pod's multiples (:func:`smallest_common_multiple`).  Step 2
    (§III-B, §IV-D): over the high-priority pods' common multiples ``T_high``
    (smallest first), each low-priority pod either has a multiple within ``G_T`` of
    every high-priority product (no idle), or is the shorter one with a gap
    ``0 < T_high - m t <= E_T`` (``E_T = et_frac x t``, 10 % of its own period):
    idle ``(T_high - m t) / m`` per iteration closes the gap, so it runs at the
    high-priority period (:func:`_fit_low`).  Then ``T`` is the mean of every pod's
    ``m_p (t_p + idle_p)``, summed in pod order.  High-priority pods never get idle.
    """
    k = periods.shape[0]
    for i in range(k):
        idle[i] = 0.0
        multiples[i] = 1
    everyone = np.arange(k)
    nobody = np.empty(0, dtype=np.int64)

    # Step 1: the smallest T, first generated on ties.
    base = smallest_common_multiple(periods, everyone, nobody, gt_ms, et_frac, max_multiple,
                                    multiples, idle)
    if base < np.inf:
        return base, STEP_COMMON

    # Step 2: T_high from the high-priority pods alone; only low-priority pods get idle.
    top = priorities.max()
    n_high = 0
    for i in range(k):
        if priorities[i] == top:
            n_high += 1
    if n_high < k:
        high = np.empty(n_high, dtype=np.int64)
        low = np.empty(k - n_high, dtype=np.int64)
        a = 0
        b = 0
        for i in range(k):
            if priorities[i] == top:
                high[a] = i
                a += 1
            else:
                low[b] = i
                b += 1
        base = smallest_common_multiple(periods, high, low, gt_ms, et_frac, max_multiple,
                                        multiples, idle)
        if base < np.inf:
            total = 0.0
            for i in range(k):
                total += multiples[i] * (periods[i] + idle[i])
            return total / k, STEP_IDLE

    # Step 3: incompatible on this link.
    for i in range(k):
        multiples[i] = 1
        idle[i] = 0.0
    return periods.max(), STEP_INCOMPATIBLE
