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
def common_multiples(
    periods: np.ndarray, idx: np.ndarray, gt_ms: float, max_multiple: int,
    out_base: np.ndarray, out_mult: np.ndarray,
) -> int:
    """Every ``(T, m)`` over pods ``idx`` with ``m_p <= M``, all ``|m_p t_p - T| <= G_T``.

    ``T = mean(m_p t_p)``.  Anchored on the first pod's multiple ``m_0``: every
    other product must lie within ``2 G_T`` of ``m_0 t_0`` (with the comparisons'
    float allowance on each side).  Writes candidates in
    generation order (m_0 ascending, then odometer order) into ``out_base`` /
    ``out_mult`` (rows) and returns how many there are; only the first
    ``len(out_base)`` are written, so a caller seeing a larger count retries with
    bigger buffers.
    """
    k = idx.shape[0]
    lo = np.empty(k, dtype=np.int64)
    hi = np.empty(k, dtype=np.int64)
    combo = np.empty(k, dtype=np.int64)
    count = 0
    cap = out_base.shape[0]
    t0 = periods[idx[0]]
    for m0 in range(1, max_multiple + 1):
        x0 = m0 * t0
        lo[0] = m0
        hi[0] = m0
        feasible = True
        for j in range(1, k):
            t = periods[idx[j]]
            # each product within G_T (+ EPS) of the mean: two differ by 2 (G_T + EPS)
            a = max(1, _ceil_div(x0 - 2.0 * (gt_ms + EPS_MS), t))
            b = min(max_multiple, int(np.floor((x0 + 2.0 * (gt_ms + EPS_MS)) / t)))
            if a > b:
                feasible = False
                break
            lo[j] = a
            hi[j] = b
        if not feasible:
            continue
        for j in range(k):
            combo[j] = lo[j]
        while True:
            total = 0.0
            for j in range(k):
                total += combo[j] * periods[idx[j]]
            base = total / k
            ok = True
            for j in range(k):
                if abs(combo[j] * periods[idx[j]] - base) > gt_ms + EPS_MS:
                    ok = False
                    break
            if ok:
                if count < cap:
                    out_base[count] = base
                    for j in range(k):
                        out_mult[count, j] = combo[j]
                count += 1
            # odometer, last pod fastest
            j = k - 1
            while j >= 0:
                combo[j] += 1
                if combo[j] <= hi[j]:
                    break
                combo[j] = lo[j]
                j -= 1
            if j < 0:
                break
    return count


@jit
def unify_kernel(
    periods: np.ndarray, priorities: np.ndarray, gt_ms: float, et_frac: float,
    max_multiple: int, multiples: np.ndarray, idle: np.ndarray,
) -> tuple[float, int]:
    """Unify ``periods``; fill ``multiples`` and ``idle``; return ``(T, step)``.

    ``step`` is 1 (common multiple within G_T), 2 (idle injected into low-priority
    pods) or 3 (incompatible: ``T`` = longest period, multiples 1).

    Step 2 (the paper's rule, §III-B and §IV-D): over the
    high-priority pods' common multiples ``T_high`` (smallest first), each
    low-priority pod either has a multiple within ``G_T`` of ``T_high`` (no idle),
    or is the shorter one with a gap ``G_T < T_high - m t <= E_T`` (``E_T =
    et_frac x t``, 10 % of its own period): idle ``(gap - G_T) / m`` per iteration
    brings the gap to ``G_T`` (the smallest such gap is taken).  Then ``T`` is the
    mean of every pod's ``m_p (t_p + idle_p)``, as in step 1.  High-priority pods
    never get idle.
    """
    k = periods.shape[0]
    bases = np.empty(16 * max_multiple)
    mults = np.empty((16 * max_multiple, k), dtype=np.int64)
    everyone = np.arange(k)
    for i in range(k):
        idle[i] = 0.0
        multiples[i] = 1

    # Step 1: the smallest T, first generated on ties.
    n = common_multiples(periods, everyone, gt_ms, max_multiple, bases, mults)
    if n > bases.shape[0]:
        bases = np.empty(n)
        mults = np.empty((n, k), dtype=np.int64)
        n = common_multiples(periods, everyone, gt_ms, max_multiple, bases, mults)
    if n > 0:
        best = 0
        for c in range(1, n):
            if bases[c] < bases[best]:
                best = c
        for i in range(k):
            multiples[i] = mults[best, i]
        return bases[best], STEP_COMMON

    # Step 2: T from the high-priority pods alone; only low-priority pods get idle.
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
        n = common_multiples(periods, high, gt_ms, max_multiple, bases, mults)
        if n > bases.shape[0]:
            bases = np.empty(n)
            mults = np.empty((n, k), dtype=np.int64)
            n = common_multiples(periods, high, gt_ms, max_multiple, bases, mults)
        order = np.argsort(bases[:n], kind="mergesort")
        for c in order:
            base = bases[c]
            ok = True
            for j in range(low.shape[0]):
                i = low[j]
                t = periods[i]
                best_dev = np.inf
                best_m = 0
                for m in range(1, max_multiple + 1):
                    dev = abs(m * t - base)
                    if dev <= gt_ms + EPS_MS and dev < best_dev:
                        best_dev = dev
                        best_m = m
                if best_m > 0:
                    multiples[i] = best_m
                    idle[i] = 0.0
                    continue
                # the pod is the shorter one: its gap G_T < T - m t <= E_T closes
                # to G_T with idle (T - m t - G_T) / m per iteration; least gap wins
                best_gap = np.inf
                for m in range(1, max_multiple + 1):
                    gap = base - m * t
                    if gap > gt_ms and gap <= et_frac * t + EPS_MS and gap < best_gap:
                        best_gap = gap
                        best_m = m
                if best_m == 0:
                    ok = False
                    break
                multiples[i] = best_m
                idle[i] = (best_gap - gt_ms) / best_m
            if ok:
                total = 0.0
                for j in range(n_high):
                    multiples[high[j]] = mults[c, j]
                for i in range(k):
                    total += multiples[i] * (periods[i] + idle[i])
                return total / k, STEP_IDLE

    # Step 3: incompatible on this link.
    for i in range(k):
        multiples[i] = 1
        idle[i] = 0.0
    return periods.max(), STEP_INCOMPATIBLE
