"""Seeded random instances of the rotation search, in several families.

Each family stresses one part of docs/traffic-circle.md: contention from light to heavy, exact
ties (integer demands), wrap-around perfect intervals, whole-range perfect,
instances with no perfect rotation at all, and crowded links where every pair
contends and Psi decides.  The product of the free rows' limits is
kept small enough for the brute-force oracle.

:func:`make_heavy_instance` draws the benchmarks' heavily contended links
(``benchmarks.asv_bench.instances.heavy_link``: every job at 55-100 % of the link, multiples
1-3, duty cycles up to 0.45), on fewer bins and with the limits cut down the same
way, for the phase-B search at k = 4-6.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tdmcore
from benchmarks.asv_bench.instances import heavy_link

FAMILIES = ("pattern", "integer", "wrap", "whole", "none", "crowded")
MAX_VECTORS = 6000


@dataclass
class Instance:
    family: str
    seed: int
    demand: np.ndarray
    capacity: float
    limits: np.ndarray
    mids: list[np.ndarray]

    def describe(self) -> str:
        return (f"family={self.family} seed={self.seed} k={self.demand.shape[0]} "
                f"bins={self.demand.shape[1]} B={self.capacity!r} limits={self.limits.tolist()}")


def _bins(rng: np.random.Generator) -> int:
    return int(rng.choice([8, 9, 10, 12, 16, 18, 24, 36, 72]))


def _shrink_limits(rng: np.random.Generator, limits: np.ndarray) -> np.ndarray:
    limits = limits.copy()
    while np.prod(limits[1:].astype(float)) > MAX_VECTORS:
        i = int(rng.integers(1, len(limits)))
        limits[i] = max(1, limits[i] // 2)
    return limits


def _pattern_rows(rng, k, bins):
    base = 120.0
    muls = rng.choice([1, 1, 2, 3, 4, 6], size=k)
    duty = rng.uniform(0.02, 0.7, size=k)
    rate = rng.uniform(1.0, 25.0, size=k)
    demand = tdmcore.discretize(base / muls, duty, rate, base, bins)
    mids = [tdmcore.comm_midpoints(int(m), float(d), bins)
            for m, d in zip(muls, duty, strict=True)]
    limits = np.ceil(bins / muls).astype(np.int64)
    return demand, mids, limits, rate


def make_instance(family: str, seed: int, k: int) -> Instance:
    rng = np.random.default_rng([seed, k, FAMILIES.index(family)])
    bins = _bins(rng)
    if family == "integer":
        # Small integer demands: excess ties are exact, so the tie rules decide.
        demand = np.zeros((k, bins))
        for i in range(k):
            width = int(rng.integers(1, max(2, bins // 2)))
            start = int(rng.integers(0, bins))
            level = int(rng.integers(1, 4))
            demand[i, (start + np.arange(width)) % bins] = level
            if rng.random() < 0.3:
                demand[i, int(rng.integers(0, bins))] += 1
        limits = rng.integers(1, bins + 1, size=k)
        # Integer midpoints: Psi ties are exact too.
        mids = [np.sort(rng.integers(0, bins, size=int(rng.integers(0, 3))).astype(float))
                for _ in range(k)]
        capacity = float(rng.integers(1, 3 * k + 1))
    elif family == "wrap":
        # The reference row sits mid-circle, so the last row's perfect rotations
        # straddle 0 and the perfect interval wraps.
        demand = np.zeros((k, bins))
        arc = max(1, bins // (2 * k + 1))
        demand[0, bins // 2 - arc // 2: bins // 2 - arc // 2 + arc] = 1.0
        for i in range(1, k):
            demand[i, :arc] = rng.uniform(0.6, 1.0)
        limits = np.full(k, bins, dtype=np.int64)
        mids = [np.array([bins / 2.0])] + [np.array([arc / 2.0]) for _ in range(1, k)]
        capacity = float(rng.uniform(1.0, 1.5))
    elif family == "crowded":
        # A busy Philly link: every row bursts at the full rate (all pairs contend),
        # short duties, rows repeated and period multiples; perfect vectors abound
        # and the Psi bounds decide the optimal search.
        base = 120.0
        muls = np.ones(k, dtype=np.int64)
        duty = np.empty(k)
        for i in range(k):
            if i > 0 and rng.random() < 0.5:
                muls[i], duty[i] = muls[i - 1], duty[i - 1]
            else:
                muls[i] = int(rng.choice([1, 1, 2, 4]))
                duty[i] = float(rng.uniform(0.03, 0.6 / k))
        capacity = 25.0
        demand = tdmcore.discretize(base / muls, duty, np.full(k, capacity), base, bins)
        mids = [tdmcore.comm_midpoints(int(m), float(d), bins)
                for m, d in zip(muls, duty, strict=True)]
        limits = np.ceil(bins / muls).astype(np.int64)
    elif family == "whole":
        demand, mids, limits, rate = _pattern_rows(rng, k, bins)
        capacity = float(demand.max(axis=1).sum() * rng.uniform(1.0, 2.0))  # never exceeded
    elif family == "none":
        demand, mids, limits, rate = _pattern_rows(rng, k, bins)
        total = demand.sum(axis=1)
        # Mass above B N (or a row above B): no rotation can be perfect.
        capacity = float(total.sum() / bins * rng.uniform(0.3, 0.95))
    else:
        demand, mids, limits, rate = _pattern_rows(rng, k, bins)
        peak = demand.max(axis=1)
        lo, hi = peak.max() * 0.7, peak.sum() * 1.1
        capacity = float(rng.uniform(lo, hi))
    limits = _shrink_limits(rng, np.asarray(limits, dtype=np.int64))
    limits[0] = 1
    return Instance(family, seed, np.ascontiguousarray(demand, dtype=float), capacity, limits,
                    list(mids))


HEAVY_BINS = (8, 9, 10, 12, 16, 18, 24, 36)


def make_heavy_instance(seed: int, k: int) -> Instance:
    """The benchmarks' heavily contended link (``heavy_link``) on 8-36 bins, limits cut
    to at most MAX_VECTORS vectors; most have no perfect rotation."""
    rng = np.random.default_rng([seed, k, 20])
    bins = int(rng.choice(HEAVY_BINS))
    link = heavy_link(k, bins, seed)
    limits = _shrink_limits(rng, np.asarray(link.limits, dtype=np.int64))
    limits[0] = 1
    return Instance("heavy", seed, np.ascontiguousarray(link.demand, dtype=float),
                    link.capacity_gbps, limits, list(link.mids))
