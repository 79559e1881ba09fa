"""One pod's full Metronome decision (PreFilter -> NormalizeScore, a fresh snapshot
of the cluster state included) on clusters of 10 to 10,000 nodes holding 0-4 pods
each (docs/benchmarks.md: p99 < 5 ms on 1,000 nodes, < 50 ms on 10,000).  The naive
peer pipeline runs where it finishes (100 nodes); at 1,000 and 10,000 nodes the
peer is the per-node loop (:func:`naive_pipeline.decide_per_node`).
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


def decision_samples(n_nodes: int, seeds=range(20), repeat: int = 5, cpu: bool = False):
    """Per seed, ``repeat`` decision times (s); a fresh snapshot every call.  With
    ``cpu``, also the CPU time of this thread for each (on a shared machine the
    wall time includes the time slices other processes take): ``(wall, cpu)``."""
    sched = Scheduler(make_policy("metronome"))
    wall, busy = [], []
    for seed in seeds:
        state, waiting = random_cluster(n_nodes, seed)
        waiting = _waiting_with_sibling(state, waiting, seed)
        sched.decide(state, waiting)
        times, cpu_times = [], []
        for _ in range(repeat):
            c0 = time.thread_time()
            t0 = time.perf_counter()
            sched.decide(state, waiting)
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.thread_time() - c0)
        wall.append(times)
        busy.append(cpu_times)
    return (wall, busy) if cpu else wall


def decision_latencies(n_nodes: int, seeds=range(20), repeat: int = 5):
    """Per seed, the median decision time (s); a fresh snapshot every call."""
    return [float(np.median(t)) for t in decision_samples(n_nodes, seeds, repeat)]


def decision_vs_peer(n_nodes: int, seed: int, repeat: int = 5):
    """(tdmcore median s, per-node peer s) on one seeded cluster; the two must
    choose the same node."""
    sched = Scheduler(make_policy("metronome"))
    state, waiting = random_cluster(n_nodes, seed)
    waiting = _waiting_with_sibling(state, waiting, seed)
    decision, _ = sched.decide(state, waiting)
    t0 = time.perf_counter()
    peer_node = naive_pipeline.decide_per_node(state, waiting)
    peer = time.perf_counter() - t0
    if peer_node != decision.node:
        raise AssertionError(f"tdmcore and the per-node peer decide differently "
                             f"({n_nodes} nodes, seed {seed})")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sched.decide(state, waiting)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), peer


class TimeDecision:
    params = [10, 100, 1000, 5000, 10000]
    param_names = ["nodes"]
    timeout = 900

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
    """Median and p99 over 20 seeded clusters/pods x 5 decisions each, in ms."""

    params = [100, 1000, 10000]
    param_names = ["nodes"]
    timeout = 1800
    unit = "ms"

    def setup_cache(self):
        return {n: np.array(decision_samples(n)) * 1e3 for n in self.params}

    def track_median(self, samples, nodes):
        return float(np.median(samples[nodes]))

    def track_p99(self, samples, nodes):
        return float(np.percentile(samples[nodes], 99))


class TrackDecisionSpeedup:
    """The per-node peer's time / tdmcore's, median over seeds 0-4, same run."""

    params = [1000, 10000]
    param_names = ["nodes"]
    timeout = 1800
    unit = "x"

    def track_speedup_vs_per_node(self, nodes):
        return float(np.median([peer / fast for fast, peer in
                                (decision_vs_peer(nodes, seed) for seed in range(5))]))
