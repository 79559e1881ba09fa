"""The flow-level network model as a Python API (spec/simulator.md, "Network and job model").

Each :class:`FlowJob` iterates ``iterations`` times: compute for
``t_p (1 - d_p)`` (times multiplicative lognormal noise, plus any idle-injection
stretch), then each of its network pods sends ``r_p t_p d_p`` Gbit through its
node's host link; the iteration ends when all its transfers end.  A job whose pods
all sit on one node (``links`` all ``None``) sends nothing over host links and
iterates in ``t_p`` as if alone (**[decision]**: its communication is local).
Links share bandwidth max-min fairly, each transfer capped at its ``r_p``;
background traffic takes its share off the top (like the paper's iPerf3).

The loop itself is the compiled kernel :func:`tdmcore._kernels.flow.advance`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._kernels.flow import PHASE_WAIT, STOP_FINISHED, advance

__all__ = ["FlowJob", "FlowResult", "simulate_flows"]


@dataclass(frozen=True)
class FlowJob:
    """A periodic job: ``period_ms`` (``t_p``), ``duty_cycle`` (``d_p``), and one
    entry per pod in ``links`` (its node's link index, or None when the job is on
    one node) with its rate ``bandwidth_gbps`` (``r_p``)."""

    name: str
    period_ms: float
    duty_cycle: float
    bandwidth_gbps: float
    links: tuple[int | None, ...]
    iterations: int
    start_ms: float = 0.0
    stretch_ms: float = 0.0
    tail_ms: float = 0.0

    def __post_init__(self) -> None:
        v.positive_float("period_ms", self.period_ms)
        d = v.real_number("duty_cycle", self.duty_cycle)
        if not 0.0 <= d <= 1.0:
            raise ValueError(f"duty_cycle: expected 0 <= d <= 1, got {d}")
        v.positive_float("bandwidth_gbps", self.bandwidth_gbps)
        if not isinstance(self.links, tuple) or not self.links:
            raise ValueError("links: expected a non-empty tuple (one entry per pod)")
        for link in self.links:
            if link is not None and (isinstance(link, bool) or not isinstance(
                    link, int | np.integer) or link < 0):
                raise ValueError(f"links: expected link indices >= 0 or None, got {link!r}")
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) \
                or self.iterations < 0:
            raise ValueError(f"iterations: expected an integer >= 0, got {self.iterations!r}")
        if v.real_number("start_ms", self.start_ms) < 0:
            raise ValueError(f"start_ms: must be >= 0, got {self.start_ms}")
        if v.real_number("stretch_ms", self.stretch_ms) < 0:
            raise ValueError(f"stretch_ms: must be >= 0, got {self.stretch_ms}")
        if v.real_number("tail_ms", self.tail_ms) < 0:
            raise ValueError(f"tail_ms: must be >= 0, got {self.tail_ms}")

    @property
    def networked(self) -> bool:
        return any(link is not None for link in self.links)

    @property
    def volume_gbit(self) -> float:
        """``r_p t_p d_p`` per pod and iteration, Gbit."""
        return self.bandwidth_gbps * self.period_ms * self.duty_cycle * 1e-3


@dataclass(frozen=True)
class FlowResult:
    """Iteration end times per job, and what every pod and link carried."""

    iteration_end_ms: tuple[NDArray[np.float64], ...]  # per job, the iterations it finished
    pod_sent_gbit: NDArray[np.float64]
    #: ``r_p t_p d_p`` times the iterations the pod's job finished
    pod_demand_gbit: NDArray[np.float64]
    link_sent_gbit: NDArray[np.float64]
    end_ms: float

    def iteration_ms(self, job: int, starts: Sequence[float]) -> NDArray[np.float64]:
        """Durations of job ``job``'s iterations (first one from its start)."""
        ends = self.iteration_end_ms[job]
        return np.diff(np.concatenate(([starts[job]], ends)))


def simulate_flows(jobs: Sequence[FlowJob], link_capacity_gbps: Sequence[float], *,
                   background_gbps: Sequence[float] | None = None,
                   noise_sigma: float = 0.01, seed: int = 0,
                   until_ms: float = math.inf) -> FlowResult:
    """Run ``jobs`` on links of ``link_capacity_gbps`` until all finish or ``until_ms``.

    ``noise_sigma``: lognormal compute noise (spec default 1 %), mean 1, seeded.
    """
    jobs = tuple(jobs)
    if not jobs or not all(isinstance(j, FlowJob) for j in jobs):
        raise ValueError("jobs: expected a non-empty sequence of FlowJob")
    cap = v.as_float_array("link_capacity_gbps", link_capacity_gbps, ndim=1)
    if cap.size == 0 or np.any(cap <= 0):
        raise ValueError("link_capacity_gbps: expected capacities > 0")
    bg = np.zeros_like(cap) if background_gbps is None else v.as_float_array(
        "background_gbps", background_gbps, ndim=1)
    if bg.shape != cap.shape or np.any(bg < 0):
        raise ValueError(f"background_gbps: expected {cap.size} values >= 0")
    sigma = v.real_number("noise_sigma", noise_sigma)
    if sigma < 0:
        raise ValueError(f"noise_sigma: must be >= 0, got {sigma}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    until = float(until_ms)
    if math.isnan(until) or until < 0:
        raise ValueError(f"until_ms: expected a time >= 0, got {until_ms!r}")
    for i, job in enumerate(jobs):
        for link in job.links:
            if link is not None and link >= cap.size:
                raise ValueError(f"jobs[{i}]: link {link} does not exist "
                                 f"({cap.size} links)")
    n_jobs = len(jobs)
    max_iter = max(1, max(job.iterations for job in jobs))
    rng = np.random.default_rng(seed)
    noise = np.exp(sigma * rng.standard_normal((n_jobs, max_iter)) - sigma * sigma / 2)
    compute = np.array([j.period_ms * (1 - j.duty_cycle) if j.networked else j.period_ms
                        for j in jobs])
    pod_job, pod_link, pod_cap, pod_volume = [], [], [], []
    for i, job in enumerate(jobs):
        for link in job.links:
            pod_job.append(i)
            pod_link.append(-1 if link is None else int(link))
            pod_cap.append(job.bandwidth_gbps)
            pod_volume.append(job.volume_gbit if link is not None else 0.0)
    pj = np.array(pod_job, dtype=np.int64)
    pl = np.array(pod_link, dtype=np.int64)
    order = np.argsort(np.where(pl < 0, cap.size, pl), kind="stable")
    counts = np.bincount(pl[pl >= 0], minlength=cap.size)
    link_ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    link_pods = order[: int(counts.sum())].astype(np.int64)
    phase = np.full(n_jobs, PHASE_WAIT, dtype=np.int64)
    start = np.array([j.start_ms for j in jobs], dtype=np.float64)
    iter_end = np.full((n_jobs, max_iter), np.nan)
    log_start = np.full((n_jobs, max_iter), np.nan)
    log_comm = np.full((n_jobs, max_iter), np.nan)
    pod_sent = np.zeros(len(pj))
    link_sent = np.zeros(cap.size)
    state = (
        compute, start, np.array([j.iterations for j in jobs], dtype=np.int64),
        np.array([j.stretch_ms for j in jobs], dtype=np.float64),
        np.array([j.tail_ms for j in jobs], dtype=np.float64),
        np.full(n_jobs, np.nan), np.ones(n_jobs),
        np.full(n_jobs, np.inf), np.full(n_jobs, np.iinfo(np.int64).max),
        np.zeros(n_jobs, dtype=np.int64),
        phase, np.zeros(n_jobs), np.zeros(n_jobs, dtype=np.int64),
        np.zeros(n_jobs, dtype=np.int64), np.zeros(n_jobs, dtype=np.int64),
        np.zeros(n_jobs, dtype=np.int64), noise,
        log_start, log_comm, iter_end,
        pj, pl, np.array(pod_cap), np.array(pod_volume), np.zeros(len(pj)), pod_sent,
        cap, bg, link_ptr, link_pods, link_sent, np.zeros(1, dtype=np.int64),
    )
    t, reason = 0.0, STOP_FINISHED
    while reason == STOP_FINISHED:  # a job finishing is no reason to stop here
        t, reason = advance(t, until, *state)
    end = t
    ends = tuple(row[~np.isnan(row)] for row in iter_end)
    done = np.array([len(e) for e in ends], dtype=np.float64)
    demand = np.array(pod_volume) * done[pj]
    return FlowResult(ends, pod_sent, demand, link_sent, float(end))
