"""The flow-level network model: the compiled event loop against the naive peer.

Instances: ``flow_instance(n_jobs, n_links, iterations, seed)``: every job has two
pods on two distinct random links of 25 Gbps (a job crosses each link once), periods
100-500 ms, duty cycles 0.1-0.5, random start shifts; 1 % compute noise; the
calibrated contention efficiency.  The peer (``naive_flow.simulate``) is the
test-suite oracle: the same model with dictionaries and the textbook max-min loop.
"""

from __future__ import annotations

import time

import numpy as np

from tdmcore.sim.engine.network import CONTENTION_EFFICIENCY, FlowJob, simulate_flows
from tests.oracles import naive_flow


def flow_instance(n_jobs: int, n_links: int, iterations: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    if n_links < 2:
        raise ValueError(f"n_links: two pods need two links, got {n_links}")
    jobs = [FlowJob(f"j{i}", float(rng.uniform(100, 500)), float(rng.uniform(0.1, 0.5)),
                    25.0, tuple(int(x) for x in rng.choice(n_links, size=2, replace=False)),
                    iterations, start_ms=float(rng.uniform(0, 200)))
            for i in range(n_jobs)]
    return jobs, [25.0] * n_links


def speedup(n_jobs: int = 16, n_links: int = 8, iterations: int = 50,
            seed: int = 0) -> tuple[float, float, float]:
    """(tdmcore s, naive s, ratio) on one instance, after checking they agree."""
    jobs, cap = flow_instance(n_jobs, n_links, iterations, seed)
    fast = simulate_flows(jobs, cap, seed=seed)  # the calibrated contention efficiency
    start = time.perf_counter()
    ends, _, _ = naive_flow.simulate(jobs, cap, None, 0.01, seed,
                                     efficiency=CONTENTION_EFFICIENCY)
    slow = time.perf_counter() - start
    # long runs accumulate float round-off differently (water-filling order): the end
    # times agree to ~1e-9 relative after thousands of events, not bit for bit
    for got, want in zip(fast.iteration_end_ms, ends, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        simulate_flows(jobs, cap, seed=seed)
        runs.append(time.perf_counter() - start)
    fast_s = float(np.median(runs))
    return fast_s, slow, slow / fast_s


class TimeFlows:
    params = ([4, 16, 64], [4, 16])
    param_names = ["jobs", "links"]

    def setup(self, jobs: int, links: int) -> None:
        self.jobs, self.cap = flow_instance(jobs, links, 100)
        simulate_flows(self.jobs[:1], self.cap)  # compile once

    def time_simulate(self, jobs: int, links: int) -> None:
        simulate_flows(self.jobs, self.cap)


class TrackFlowSpeedup:
    timeout = 600

    def track_speedup(self) -> float:
        return speedup()[2]

    track_speedup.unit = "x"  # type: ignore[attr-defined]
