"""The naive peer: what a competent engineer writes first (docs/benchmarks.md).

numpy, every candidate enumerated, vectorised over the innermost loop (the last
row's rotations) only.  Same rules and tolerances as docs/traffic-circle.md, so its
answers must equal tdmcore's; the suites check that before timing.
"""

from __future__ import annotations

import itertools

import numpy as np


def excess(demand: np.ndarray, rotations, capacity: float) -> float:
    total = sum(np.roll(row, int(s)) for row, s in zip(demand, rotations, strict=True))
    return float(np.maximum(total - capacity, 0.0).sum())


def score(demand: np.ndarray, rotations, capacity: float) -> float:
    e = excess(demand, rotations, capacity)
    if e <= 1e-9 * capacity:
        return 100.0
    return float(np.clip(100.0 * (1.0 - e / (capacity * demand.shape[1])), 0.0, 100.0))


def link_utilization(demand: np.ndarray, rotations, capacity: float) -> float:
    total = sum(np.roll(row, int(s)) for row, s in zip(demand, rotations, strict=True))
    return float(np.minimum(total, capacity).sum() / (capacity * demand.shape[1]))


def discretize(periods, duty, bandwidth, base, bins):
    """Sample each bin finely? No: exact overlap, one unit and one bin at a time."""
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


def _psi(peaks, capacity, mids, rotations, n):
    best = np.inf
    k = len(rotations)
    for i in range(k):
        for j in range(i + 1, k):
            if peaks[i] + peaks[j] < capacity * (1 - 1e-9):
                continue
            a = np.mod(np.asarray(mids[i], dtype=float) + rotations[i], n)
            b = np.mod(np.asarray(mids[j], dtype=float) + rotations[j], n)
            d = np.abs(a[:, None] - b[None, :])
            if d.size:
                best = min(best, float(np.minimum(d, n - d).min()))
    return best


def _runs(perfect: np.ndarray):
    n = perfect.size
    if perfect.all():
        return [(0, n)]
    starts = np.flatnonzero(perfect & ~np.roll(perfect, 1))
    out = []
    for s in starts:
        length = 0
        while perfect[(s + length) % n]:
            length += 1
        out.append((int(s), length))
    return out


def search_rotations(demand, capacity, limits, mode="first", mids=None):
    """Returns ``(rotations tuple, perfect, psi or None)``."""
    demand = np.asarray(demand, dtype=float)
    k, n = demand.shape
    tol = 1e-9 * capacity
    lim = [1] + [int(x) for x in limits[1:]]
    last = lim[-1]
    rolled_last = np.stack([np.roll(demand[-1], s) for s in range(last)])
    peaks = demand.max(axis=1)
    best_vec, best_e = None, np.inf
    best_perfect, best_psi = None, None
    for prefix in itertools.product(*[range(x) for x in lim[:-1]]):
        partial = np.zeros(n)
        for i, s in enumerate(prefix):
            partial = partial + np.roll(demand[i], s)
        exc = np.maximum(partial[None, :] + rolled_last - capacity, 0.0).sum(axis=1)
        perfect = exc <= tol
        if perfect.any():
            runs = _runs(perfect)
            middles = sorted((s + (ln - 1) // 2) % last for s, ln in runs)
            if mode == "first":
                smallest = int(np.flatnonzero(perfect)[0])
                for s, ln in runs:
                    if (smallest - s) % last < ln:
                        vec = (*prefix, (s + (ln - 1) // 2) % last)
                        psi = _psi(peaks, capacity, mids, vec, n) if mids is not None else None
                        return vec, True, psi
            for m in middles:
                vec = (*prefix, m)
                psi = _psi(peaks, capacity, mids, vec, n)
                if best_perfect is None or psi > best_psi + 1e-9:
                    best_perfect, best_psi = vec, psi
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


def unify_periods(periods, priorities, gt_ms=5.0, et_frac=0.1, max_multiple=8):
    """Step 1 only, by enumerating every multiple vector (the naive M^k search)."""
    periods = np.asarray(periods, dtype=float)
    best = None
    for combo in itertools.product(range(1, max_multiple + 1), repeat=periods.size):
        products = np.asarray(combo) * periods
        base = products.mean()
        if np.all(np.abs(products - base) <= gt_ms + 1e-9) and (best is None or base < best[0]):
            best = (base, combo)
    return best
