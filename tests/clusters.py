"""Seeded random clusters for decision benchmarks (docs/benchmarks.md).

``n_nodes`` nodes (8 GPUs, 25 Gbps), each already holding 0-4 pods of random jobs
whose traffic patterns are drawn around the shipped snapshot models (VGG19,
BERT, ...): periods 100-600 ms, duty cycles 0.05-0.45, bandwidth 10-25 Gbps,
20 % high priority.  Returns the state and a fresh waiting pod.
"""

from __future__ import annotations

import numpy as np

from tdmcore.model import Cluster, ClusterState, Node, Pod, TrafficPattern

BASE_PERIODS_MS = (88.0, 112.0, 124.0, 212.0, 422.26, 533.53)


def _pattern(rng: np.random.Generator) -> TrafficPattern:
    period = float(rng.choice(BASE_PERIODS_MS)) * float(rng.uniform(0.98, 1.02))
    return TrafficPattern(period, float(rng.uniform(0.05, 0.45)), float(rng.uniform(10, 25)))


def random_cluster(n_nodes: int, seed: int = 0, max_pods: int = 4,
                   latency: bool = True) -> tuple[ClusterState, Pod]:
    rng = np.random.default_rng([seed, n_nodes])
    nodes = [Node(f"node-{i:05d}", 64.0, 512.0, 8.0, 25.0) for i in range(n_nodes)]
    tau = None
    if latency:
        racks = np.arange(n_nodes) // 16
        tau = np.where(racks[:, None] == racks[None, :], 2.0, 5.0)
        np.fill_diagonal(tau, 1.0)
    state = ClusterState(Cluster(nodes, tau))
    job = 0
    for n in range(n_nodes):
        for _ in range(int(rng.integers(0, max_pods + 1))):
            pattern = _pattern(rng) if rng.random() > 0.1 else None
            prio = 1 if rng.random() < 0.2 else 0
            state.place(Pod(f"p{job}", f"j{job}", cpu=4.0, mem_gib=16.0, gpu=1.0,
                            pattern=pattern, priority=prio), n)
            job += 1
    waiting = Pod("waiting", "waiting-job", cpu=4.0, mem_gib=16.0, gpu=1.0,
                  pattern=_pattern(rng), priority=0)
    return state, waiting
