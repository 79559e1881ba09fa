"""Seeded benchmark instances: contended links of k jobs (docs/benchmarks.md).

A *contended* link carries jobs whose bandwidths each fit the link but no two fit
together (every pair contends, Eq. 9), with duty cycles that leave the circle
partly idle, so TDM can interleave them only by searching rotations.  Periods are
multiples of a common base (mul in {1, 2}), as after base-period unification.

A *heavily contended* link (:func:`heavy_link`) is the crowded end of that: period
multiples 1-3, duty cycles up to 0.45, every job at 55-100 % of the link, so the
jobs usually cannot all be interleaved and the search must find the highest
score instead (phase B).  The benchmarks and the oracle tests draw it from here
and keep the instances without a perfect rotation (:func:`has_perfect_rotation`).
"""

from __future__ import annotations

import itertools
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


HEAVY_MULTIPLES = (1, 2, 3)
HEAVY_DUTY = (0.05, 0.45)
HEAVY_RATE = (0.55, 1.0)  # fraction of the link's capacity


def heavy_link(k: int, bins: int = 72, seed: int = 0) -> LinkInstance:
    """k jobs on one 25 Gbps link, each at 55-100 % of it: multiples 1-3 of a 600 ms
    base period, duty cycles 0.05-0.45 (the docs' "heavily contended" family)."""
    rng = np.random.default_rng([seed, k, bins, 20])
    capacity = 25.0
    base_ms = 600.0
    muls = rng.choice(HEAVY_MULTIPLES, size=k)
    duty = rng.uniform(*HEAVY_DUTY, size=k)
    rate = rng.uniform(*HEAVY_RATE, size=k) * capacity
    demand = tdmcore.discretize(base_ms / muls, duty, rate, base_ms, bins)
    mids = [tdmcore.comm_midpoints(int(m), float(d), bins)
            for m, d in zip(muls, duty, strict=True)]
    limits = np.ceil(bins / muls).astype(np.int64)
    return LinkInstance(seed, np.atleast_2d(demand), capacity, limits, mids)


def has_perfect_rotation(inst: LinkInstance) -> bool:
    """Whether any rotation vector is perfect, by enumeration: every prefix of rows
    1..k-2, the last row's rotations vectorised (independent of tdmcore's search)."""
    demand, cap, limits = inst.demand, inst.capacity_gbps, inst.limits
    k, n = demand.shape
    last = np.stack([np.roll(demand[-1], s) for s in range(int(limits[-1]))])
    for prefix in itertools.product(*[range(int(x)) for x in limits[1:-1]]):
        partial = demand[0].copy()
        for i, s in enumerate(prefix, start=1):
            partial += np.roll(demand[i], s)
        if (np.maximum(partial + last - cap, 0.0).sum(axis=1) <= 1e-9 * cap).any():
            return True
    return False


#: A contended trace's nodes: 8 GPUs and a 25 Gbps host link each, CPU and memory
#: generous (Philly's servers, :data:`tdmcore.sim.scenarios.PHILLY_NODE`).
CONTENDED_NODE = {"cpu": 64.0, "mem_gib": 512.0, "gpu": 8.0, "link_gbps": 25.0}
CONTENDED_GPUS = (2, 16)
CONTENDED_HOURS = (1.0, 4.0)


def contended_trace(n_jobs: int, n_nodes: int, seed: int = 0, load: float = 0.85,
                    hours: tuple[float, float] = CONTENDED_HOURS):
    """A trace whose jobs share host links for hours (docs/benchmarks.md, "Contended
    traces"): ``n_jobs`` jobs of 2-16 GPUs (uniform), each a model drawn uniformly
    from the 13 (:func:`tdmcore.sim.scenarios.trace_job`; every job spans GPUs, so
    every one has a pattern at the link's rate), ``hours`` (1-4 h) of training at its
    ideal speed, Poisson arrivals at an expected GPU load ``load`` of ``n_nodes``
    8-GPU nodes on one switch (0.05 ms between nodes), 20 % high priority.  Seeded
    by ``(seed, n_jobs, n_nodes)``; returns a :class:`~tdmcore.sim.scenarios.Scenario`.
    (The tests take shorter jobs of the same shape.)
    """
    from tdmcore.model import Cluster, Node
    from tdmcore.sim.cluster import SimCluster
    from tdmcore.sim.models import MODELS
    from tdmcore.sim.scenarios import BASE_LATENCY_MS, Scenario, trace_job

    rng = np.random.default_rng([seed, n_jobs, n_nodes, 42])
    nodes = [Node(f"n{k:02d}", **CONTENDED_NODE) for k in range(n_nodes)]
    latency = np.full((n_nodes, n_nodes), BASE_LATENCY_MS)
    np.fill_diagonal(latency, 0.0)
    sim = SimCluster(Cluster(nodes), np.zeros(n_nodes), latency)
    low, high = CONTENDED_GPUS
    mean_gpus = (low + high) / 2
    rate_per_s = load * CONTENDED_NODE["gpu"] * n_nodes / (
        mean_gpus * float(np.mean(hours)) * 3600.0)
    models = list(MODELS)
    jobs = []
    t = 0.0
    for k in range(n_jobs):
        t += float(rng.exponential(1.0 / rate_per_s))
        workers = int(rng.integers(low, high + 1))
        model = models[int(rng.integers(len(models)))]
        duration_h = float(rng.uniform(*hours))
        jobs.append(trace_job(f"c{k:04d}-{model.lower()}", model, workers,
                              CONTENDED_NODE["link_gbps"], duration_h * 3600.0,
                              arrival_s=round(t, 3), priority=int(rng.random() < 0.2)))
    return Scenario("contended", f"{n_jobs} jobs of {low}-{high} GPUs on {n_nodes} nodes, "
                    f"load {load:.0%}, seed {seed}", sim, tuple(jobs))
