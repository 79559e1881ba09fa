"""DRAGON's workloads: its Table 1 on its 2-node testbed, and its Poisson simulation.

- ``dragon_table1``: the 12 jobs of DRAGON's Table 1 (model, workers, min workers,
  max 4, steps, arrival) on 2 nodes x (4 GPUs, 16 cores, 64 GB), 1 GbE (§4.1).
- ``dragon_poisson``: §4.1's simulation: ``n_jobs`` jobs with Poisson arrivals (mean
  gap 62-400 s), min/initial/max workers drawn between 2 and 8, on 4 nodes x 8 GPUs.
  **[decision]** steps uniform in Table 1's range (450-3,600); nodes of 32 cores,
  256 GiB, 10 GbE; weighted-scheduler utilities: priority 1-10, half the jobs
  time-sensitive (decay 1/600 per s, target 1-3x their one-node duration).
"""

from __future__ import annotations

import numpy as np

from .. import _validation as v
from ..elastic.job import ElasticJob
from ..model import Cluster, Node
from ..oasis.admission.base import as_seed

__all__ = ["DRAGON_TABLE1", "MAX_GAP_S", "dragon_poisson", "dragon_table1", "gpu_cluster",
           "kubeflow_deadlock"]

_MODELS = {"A": "AlexNet", "I": "InceptionV3", "R": "ResNet50"}

#: DRAGON Table 1: (model, workers, min workers, steps, arrival s); max workers 4.
DRAGON_TABLE1 = (
    ("R", 4, 2, 2800, 0.0), ("I", 4, 2, 3600, 0.56), ("I", 2, 2, 1000, 2.53),
    ("A", 2, 2, 450, 6.34), ("R", 3, 2, 2100, 7.58), ("A", 2, 2, 1000, 13.11),
    ("I", 2, 2, 2000, 19.01), ("R", 1, 1, 2400, 27.54), ("I", 2, 2, 2500, 34.56),
    ("A", 2, 2, 800, 42.58), ("I", 1, 1, 1000, 47.58), ("A", 1, 1, 1200, 51.19),
)


def gpu_cluster(n_nodes: int, gpus: float, cpus: float, mem_gib: float,
                link_gbps: float) -> Cluster:
    n_nodes = v.whole("n_nodes", n_nodes)
    return Cluster([Node(f"node-{i}", cpus, mem_gib, gpus, link_gbps) for i in range(n_nodes)])


def dragon_table1() -> tuple[Cluster, tuple[ElasticJob, ...]]:
    """DRAGON's testbed (§4.1) and its Table 1 workload."""
    cluster = gpu_cluster(2, 4.0, 16.0, 64.0, 1.0)
    jobs = tuple(
        ElasticJob(f"job{i + 1}", _MODELS[m], arrival, float(steps), min_w, 4, w)
        for i, (m, w, min_w, steps, arrival) in enumerate(DRAGON_TABLE1))
    return cluster, jobs


#: The largest mean inter-arrival gap of :func:`dragon_poisson`, s.
MAX_GAP_S = 1e9


def dragon_poisson(n_jobs: int = 100, mean_gap_s: float = 200.0,
                   seed: int = 0) -> tuple[Cluster, tuple[ElasticJob, ...]]:
    """DRAGON §4.1's simulation: Poisson arrivals on 4 nodes x 8 GPUs."""
    n_jobs = v.whole("n_jobs", n_jobs, 1, v.MAX_JOBS)
    mean_gap_s = v.positive_float("mean_gap_s", mean_gap_s)
    if mean_gap_s > MAX_GAP_S:  # beyond it, arrival + run times overflow the clock
        raise ValueError(f"mean_gap_s: at most {MAX_GAP_S:g} s (about 32 years), got "
                         f"{mean_gap_s:g}")
    rng = np.random.default_rng([as_seed("seed", seed), 5])
    cluster = gpu_cluster(4, 8.0, 32.0, 256.0, 10.0)
    # the first job at 0, then exponential gaps: a Poisson process started at an arrival
    # (until 2026-11-24 the sums were shifted back by the mean gap and clipped at 0,
    # which put 0-3 jobs at t = 0 depending on the seed)
    gaps = rng.exponential(mean_gap_s, size=n_jobs)
    arrivals = np.cumsum(gaps) - gaps[0]
    jobs = []
    for i, arrival in enumerate(arrivals):
        model = ("AlexNet", "InceptionV3", "ResNet50")[int(rng.integers(3))]
        lo, mid, hi = sorted(int(x) for x in rng.integers(2, 9, size=3))
        steps = float(rng.integers(450, 3601))
        probe = ElasticJob(f"job{i + 1}", model, float(arrival), steps, lo, hi, mid)
        alone = probe.images / probe.rate(mid)
        sensitive = rng.random() < 0.5
        utility = (float(rng.uniform(1, 10)), 1 / 600 if sensitive else 0.0,
                   float(alone * rng.uniform(1, 3)))
        jobs.append(ElasticJob(f"job{i + 1}", model, float(arrival), steps, lo, hi, mid,
                               utility=utility))
    return cluster, tuple(jobs)


def kubeflow_deadlock() -> tuple[Cluster, tuple[ElasticJob, ...]]:
    """Resources run short: four 4-worker ResNet-50 jobs submitted within 2 s on
    DRAGON's 2 x 4-GPU testbed.  Without gang scheduling their pods interleave, each
    job holds some GPUs (3, 2, 2 and 1), none can start: the partial-gang deadlock of
    DRAGON §2."""
    cluster = gpu_cluster(2, 4.0, 16.0, 64.0, 1.0)
    jobs = tuple(ElasticJob(f"job{i + 1}", "ResNet50", 0.5 * i, 1000.0, 4, 4, 4)
                 for i in range(4))
    return cluster, jobs
