"""Seeded benchmark instances: contended links of k jobs (docs/benchmarks.md).

A *contended* link carries jobs whose bandwidths each fit the link but no two fit
together (every pair contends, Eq. 9), with duty cycles that leave the circle
partly idle, so TDM can interleave them only by searching rotations.  Periods are
multiples of a common base (mul in {1, 2}), as after base-period unification.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tdmcore


@dataclass(frozen=True)
class LinkInstance:
    seed: int
    demand: np.ndarray
    capacity_gbps: float
    limits: np.ndarray
    mids: list[np.ndarray]


def contended_link(k: int, bins: int = 72, seed: int = 0, load: float = 0.8) -> LinkInstance:
    """k jobs on one 25 Gbps link; total comm share about ``load`` of the circle."""
    rng = np.random.default_rng([seed, k, bins])
    capacity = 25.0
    base_ms = 400.0
    muls = rng.choice([1, 1, 1, 2], size=k)
    share = rng.dirichlet(np.full(k, 4.0)) * load  # per-job fraction of the circle
    duty = np.clip(share, 0.02, 0.95)
    rate = rng.uniform(0.6, 1.0, size=k) * capacity  # any two together exceed B
    demand = tdmcore.discretize(base_ms / muls, duty, rate, base_ms, bins)
    mids = [tdmcore.comm_midpoints(int(m), float(d), bins)
            for m, d in zip(muls, duty, strict=True)]
    limits = np.ceil(bins / muls).astype(np.int64)
    return LinkInstance(seed, np.atleast_2d(demand), capacity, limits, mids)
