"""The naive implementations the tests and the benchmarks check tdmcore against.

Written straight from docs/traffic-circle.md, sharing no code with :mod:`tdmcore`:
every rule applied literally, in enumeration order, with plain Python and numpy.

* The definitions: :func:`rolled_sum` (Eq. 4), :func:`excess`, :func:`score`
  (Eq. 18), :func:`link_utilization` (Eq. 6), :func:`discretize` (Eqs. 1-3),
  :func:`psi` (Eq. 9), perfect intervals (:func:`runs`, :func:`middle`).
* The oracle: :func:`search` enumerates every rotation vector (slow on purpose,
  for the small seeded instances of tests/instances.py) and :func:`unify_periods`
  every multiple vector.
* The naive peer of the benchmarks: :func:`search_rotations`, what a competent
  engineer writes first (prefixes enumerated, the last row vectorised), fast
  enough for the benchmarks' links; docs/benchmarks.md times tdmcore against it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

PERFECT_RTOL = 1e-9
PSI_ATOL = 1e-9


def rolled_sum(demand: np.ndarray, rotations) -> np.ndarray:
    """S[b] = sum_i D_i[(b - s_i) mod N], rows added in order (docs/traffic-circle.md)."""
    total = np.zeros(demand.shape[1])
    for row, s in zip(demand, rotations, strict=True):
        total = total + np.roll(row, int(s))
    return total


def excess(demand: np.ndarray, rotations, capacity: float) -> float:
    return float(sum(max(0.0, x - capacity) for x in rolled_sum(demand, rotations)))


def score(demand: np.ndarray, rotations, capacity: float) -> float:
    e = excess(demand, rotations, capacity)
    if e <= PERFECT_RTOL * capacity:
        return 100.0
    return min(100.0, max(0.0, 100.0 * (1.0 - e / (capacity * demand.shape[1]))))


def link_utilization(demand: np.ndarray, rotations, capacity: float) -> float:
    s = rolled_sum(demand, rotations)
    return float(sum(min(x, capacity) for x in s) / (capacity * demand.shape[1]))


def discretize(periods, duty, bandwidth, base, bins) -> np.ndarray:
    """Exact overlap of every comm unit with every bin, unit by unit (Eqs. 1-3)."""
    periods, duty, bandwidth = (np.atleast_1d(np.asarray(x, dtype=float))
                                for x in (periods, duty, bandwidth))
    out = np.zeros((periods.size, bins))
    edges = np.arange(bins + 1, dtype=float)
    for i, (t, d, r) in enumerate(zip(periods, duty, bandwidth, strict=True)):
        mul = int(round(base / t))
        for u in range(mul):
            start = u * bins / mul
            stop = start + d * bins / mul
            overlap = np.clip(np.minimum(edges[1:], stop) - np.maximum(edges[:-1], start), 0, None)
            out[i] += r * overlap
    return out


def runs(perfect: list[bool]) -> list[tuple[int, int]]:
    """Maximal circular runs (start, length) of True, a wrapping run counted once."""
    n = len(perfect)
    if all(perfect):
        return [(0, n)]
    out = []
    for s in range(n):
        if perfect[s] and not perfect[(s - 1) % n]:
            length = 0
            while perfect[(s + length) % n]:
                length += 1
            out.append((s, length))
    return out


def middle(start: int, length: int, n: int) -> int:
    return (start + (length - 1) // 2) % n


def psi(demand, rotations, capacity, mids) -> float:
    """Eq. (9): min over contending pairs of the min circular distance of midpoints."""
    n = demand.shape[1]
    peaks = demand.max(axis=1)
    best = float("inf")
    k = len(rotations)
    for i in range(k):
        for j in range(i + 1, k):
            if peaks[i] + peaks[j] < capacity * (1 - 1e-9):
                continue
            a = np.mod(np.mod(np.asarray(mids[i], dtype=float), n) + rotations[i], n)
            b = np.mod(np.mod(np.asarray(mids[j], dtype=float), n) + rotations[j], n)
            d = np.abs(a[:, None] - b[None, :])
            if d.size:
                best = min(best, float(np.minimum(d, n - d).min()))
    return best


@dataclass
class OracleResult:
    rotations: tuple[int, ...]
    score: float
    perfect: bool
    psi: float | None


def search(demand, capacity, limits, mode="first", mids=None) -> OracleResult:
    """Enumerate every rotation vector; apply docs/traffic-circle.md's rules literally."""
    demand = np.asarray(demand, dtype=float)
    k, n = demand.shape
    tol = PERFECT_RTOL * capacity
    lim = [1] + [int(x) for x in limits[1:]]
    last = lim[-1]
    prefixes = list(itertools.product(*[range(x) for x in lim[:-1]]))
    # Excess of every vector, vectorised only for speed (same definition).
    rolled = [np.stack([np.roll(demand[i], s) for s in range(lim[i])]) for i in range(k)]
    grid = np.array(list(itertools.product(*[range(x) for x in lim])), dtype=int)
    sums = np.zeros((grid.shape[0], n))
    for i in range(k):
        sums = sums + rolled[i][grid[:, i]]
    excesses = np.maximum(sums - capacity, 0.0).sum(axis=1).reshape(len(prefixes), last)

    best = None  # (vector, psi)
    for p_index, prefix in enumerate(prefixes):
        perfect = [bool(e <= tol) for e in excesses[p_index]]
        if not any(perfect):
            continue
        rs = runs(perfect)
        if mode == "first":
            smallest = perfect.index(True)
            for start, length in rs:
                if (smallest - start) % last < length:
                    vec = (*prefix, middle(start, length, last))
                    p = psi(demand, vec, capacity, mids) if mids is not None else None
                    return OracleResult(vec, score(demand, vec, capacity), True, p)
        for m in sorted(middle(s, ln, last) for s, ln in rs):
            vec = (*prefix, m)
            value = psi(demand, vec, capacity, mids)
            if best is None or value > best[1] + PSI_ATOL:
                best = (vec, value)
    if best is not None:
        return OracleResult(best[0], score(demand, best[0], capacity), True, best[1])

    flat = excesses.ravel()
    chosen = 0
    for idx in range(1, flat.shape[0]):
        if flat[idx] < flat[chosen] - tol:
            chosen = idx
    vec = tuple(int(x) for x in grid[chosen])
    return OracleResult(vec, score(demand, vec, capacity), False, None)


def joint_search(demands, capacities, limits) -> tuple[int, ...] | None:
    """The joint ``first`` search (spec §6, revised 2026-11-28) by enumeration:
    every rotation vector, "perfect" meaning perfect on every link (``demands[l]``
    the rows of link l, in one order for all links), the middle of the first
    interval in enumeration order; None when no vector is perfect on every link.
    Every prefix of the rows but the last is enumerated; the last row's rotations
    are taken at once with numpy (same definition)."""
    demands = [np.asarray(d, dtype=float) for d in demands]
    k = demands[0].shape[0]
    if k == 1:
        ok = all(excess(d, (0,), b) <= PERFECT_RTOL * b
                 for d, b in zip(demands, capacities, strict=True))
        return (0,) if ok else None
    lim = [1] + [int(x) for x in limits[1:]]
    last = lim[-1]
    rolled_last = [np.stack([np.roll(d[-1], s) for s in range(last)]) for d in demands]
    for prefix in itertools.product(*[range(x) for x in lim[:-1]]):
        perfect = np.ones(last, dtype=bool)
        for d, b, rolled in zip(demands, capacities, rolled_last, strict=True):
            partial = rolled_sum(d[:-1], prefix)
            exc = np.maximum(partial[None, :] + rolled - b, 0.0).sum(axis=1)
            perfect &= exc <= PERFECT_RTOL * b
        if not perfect.any():
            continue
        perfect = perfect.tolist()
        smallest = perfect.index(True)
        for start, length in runs(perfect):
            if (smallest - start) % last < length:
                return (*prefix, middle(start, length, last))
    return None


def unify_periods(periods, priorities, gt_ms=5.0, et_frac=0.10, max_multiple=8):
    """docs/traffic-circle.md by enumerating every multiple vector in [1, M]^k.

    Returns ``(T, compatible, idle per pod)``; ``priorities`` are integers.
    """
    base, ok, _, idle = unify_with_multiples(periods, priorities, gt_ms, et_frac,
                                             max_multiple)
    return base, ok, idle


def unify_with_multiples(periods, priorities, gt_ms=5.0, et_frac=0.10, max_multiple=8):
    """:func:`unify_periods` with each pod's multiple: ``(T, compatible, multiples,
    idle)`` (multiples 1 when incompatible).

    docs/traffic-circle.md, revised 2026-11-28: step 1 takes every multiple vector
    whose products are within ``G_T`` of each other, every pair compared; step 2
    fits each low-priority pod to the high-priority pods' common multiple
    ``T_high``: within ``G_T`` of every high-priority product (no idle), or shorter
    than ``T_high`` by at most ``E_T`` (idle closes the gap)."""
    periods = [float(t) for t in periods]
    k = len(periods)
    eps = 1e-9

    def pairwise(products):
        return all(abs(a - b) <= gt_ms + eps for a in products for b in products)

    def candidates(idx):
        """(T, multiples, products) of every vector within G_T pairwise, in the
        order itertools.product generates them (first pod slowest)."""
        out = []
        for combo in itertools.product(range(1, max_multiple + 1), repeat=len(idx)):
            products = [m * periods[i] for m, i in zip(combo, idx, strict=True)]
            if pairwise(products):
                out.append((sum(products) / len(products), combo, products))
        return out

    everyone = candidates(list(range(k)))
    if everyone:
        # the smallest T; ties: the first generated (min keeps the first)
        base, combo, _ = min(everyone, key=lambda c: c[0])
        return base, True, list(combo), [0.0] * k
    top = max(priorities)
    high = [i for i in range(k) if priorities[i] == top]
    low = [i for i in range(k) if priorities[i] != top]
    if low:
        # smallest T_high first (ties: the first multiple vector generated; sorted
        # is stable)
        for t_high, combo, products in sorted(candidates(high), key=lambda c: c[0]):
            idle = [0.0] * k
            mult = [1] * k
            for m, i in zip(combo, high, strict=True):
                mult[i] = m
            ok = True
            for i in low:
                t = periods[i]
                # within G_T of every high-priority product: no idle (the multiple
                # closest to T_high, the smallest on ties)
                within = [m for m in range(1, max_multiple + 1)
                          if all(abs(m * t - x) <= gt_ms + eps for x in products)]
                if within:
                    mult[i] = min(within, key=lambda m: abs(m * t - t_high))
                    continue
                # the shorter one, by at most E_T = 10 % of its own period: idle
                # closes the gap, (T_high - m t) / m per iteration
                gaps = [(t_high - m * t, m) for m in range(1, max_multiple + 1)
                        if 0.0 < t_high - m * t <= et_frac * t + eps]
                if not gaps:
                    ok = False
                    break
                gap, m = min(gaps)
                idle[i] = gap / m
                mult[i] = m
            if ok:
                # T: the mean of every pod's stretched product, in pod order
                total = 0.0
                for i in range(k):
                    total += mult[i] * (periods[i] + idle[i])
                return total / k, True, mult, idle
    return max(periods), False, [1] * k, [0.0] * k


def search_rotations(demand, capacity, limits, mode="first", mids=None):
    """The naive peer of the benchmarks: ``(rotations tuple, perfect, psi or None)``.

    What a competent engineer writes first: every prefix of the free rows
    enumerated, the last row's rotations vectorised with numpy.  Same rules and
    tolerances as :func:`search`; unlike it, it scales to the benchmarks' links.
    """
    demand = np.asarray(demand, dtype=float)
    k, n = demand.shape
    tol = 1e-9 * capacity
    lim = [1] + [int(x) for x in limits[1:]]
    last = lim[-1]
    rolled_last = np.stack([np.roll(demand[-1], s) for s in range(last)])
    best_vec, best_e = None, np.inf
    best_perfect, best_psi = None, None
    for prefix in itertools.product(*[range(x) for x in lim[:-1]]):
        partial = np.zeros(n)
        for i, s in enumerate(prefix):
            partial = partial + np.roll(demand[i], s)
        exc = np.maximum(partial[None, :] + rolled_last - capacity, 0.0).sum(axis=1)
        perfect = exc <= tol
        if perfect.any():
            runs_ = runs(list(perfect))
            middles = sorted(middle(s, ln, last) for s, ln in runs_)
            if mode == "first":
                smallest = int(np.flatnonzero(perfect)[0])
                for s, ln in runs_:
                    if (smallest - s) % last < ln:
                        vec = (*prefix, middle(s, ln, last))
                        value = psi(demand, vec, capacity, mids) if mids is not None else None
                        return vec, True, value
            for m in middles:
                vec = (*prefix, m)
                value = psi(demand, vec, capacity, mids)
                if best_perfect is None or value > best_psi + 1e-9:
                    best_perfect, best_psi = vec, value
        elif best_perfect is None:
            # Sequential "first in order" among ties, vectorised per prefix.
            candidates = np.flatnonzero(exc < best_e - tol)
            while candidates.size:
                s = int(candidates[0])
                best_e, best_vec = float(exc[s]), (*prefix, s)
                rest = candidates[1:]
                candidates = rest[exc[rest] < best_e - tol]
    if best_perfect is not None:
        return best_perfect, True, best_psi
    return best_vec, False, None
