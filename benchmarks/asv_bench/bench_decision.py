"""One pod's full Metronome decision (PreFilter -> NormalizeScore) on clusters of
10 to 5,000 nodes holding 0-4 pods each (docs/benchmarks.md: 1,000 nodes,
< 20 ms median, < 100 ms p99).  The naive peer pipeline runs where it finishes.
"""

from __future__ import annotations

import time

import numpy as np

from tdmcore.framework import Scheduler
from tdmcore.metronome.policies import make_policy
from tdmcore.model import Pod
from tests.clusters import random_cluster
from tests.oracles import naive_pipeline

NAIVE_MAX_NODES = 100  # the naive pipeline is checked against tdmcore up to here


def _waiting_with_sibling(state, waiting, seed):
    """Give the waiting pod a deployed sibling of its job, so latency matters."""
    rng = np.random.default_rng(seed)
    sibling = Pod("sibling", waiting.job, cpu=1.0, mem_gib=1.0, gpu=0.0,
                  pattern=waiting.pattern, priority=waiting.priority)
    state.place(sibling, int(rng.integers(0, len(state.cluster))))
    return waiting


def decision_latencies(n_nodes: int, seeds=range(20), repeat: int = 5):
    """Per seed, the median decision time (s); a fresh snapshot every call."""
    sched = Scheduler(make_policy("metronome"))
    out = []
    for seed in seeds:
        state, waiting = random_cluster(n_nodes, seed)
        waiting = _waiting_with_sibling(state, waiting, seed)
        sched.decide(state, waiting)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            sched.decide(state, waiting)
            times.append(time.perf_counter() - t0)
        out.append(float(np.median(times)))
    return out


class TimeDecision:
    params = [10, 100, 1000, 5000]
    param_names = ["nodes"]
    timeout = 600

    def setup(self, nodes):
        self.state, waiting = random_cluster(nodes, seed=0)
        self.pod = _waiting_with_sibling(self.state, waiting, 0)
        self.sched = Scheduler(make_policy("metronome"))
        decision, _ = self.sched.decide(self.state, self.pod)
        if nodes <= NAIVE_MAX_NODES:
            if naive_pipeline.decide(self.state, self.pod) != decision.node:
                raise AssertionError("tdmcore and the naive pipeline decide differently")

    def time_decide(self, nodes):
        self.sched.decide(self.state, self.pod)


class TimeDecisionNaive:
    """The naive peer pipeline where it finishes in reasonable time."""

    params = [10, 100]
    param_names = ["nodes"]
    timeout = 600

    def setup(self, nodes):
        self.state, waiting = random_cluster(nodes, seed=0)
        self.pod = _waiting_with_sibling(self.state, waiting, 0)

    def time_naive(self, nodes):
        naive_pipeline.decide(self.state, self.pod)


class TrackDecisionLatency:
    """Median and p99 over 20 seeded clusters/pods, in milliseconds."""

    params = [100, 1000]
    param_names = ["nodes"]
    timeout = 900
    unit = "ms"

    def track_median(self, nodes):
        return 1e3 * float(np.median(decision_latencies(nodes)))

    def track_p99(self, nodes):
        return 1e3 * float(np.percentile(decision_latencies(nodes), 99))
