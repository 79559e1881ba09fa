"""The flow-level network model as a Python API (docs/simulator.md, "Network and job model").

Each :class:`FlowJob` iterates ``iterations`` times: compute for
``t_p (1 - d_p)`` (times multiplicative lognormal noise, plus any injected idle
``idle_ms``), then it sends ``r_p t_p d_p`` Gbit through the host link of each node
it spans (one ring segment per node, however many of its pods that node holds:
each link appears at most once in ``links``); the iteration ends when all its
transfers end.  A job whose pods all sit on one node (``links`` all ``None``) sends
nothing over host links and iterates in ``t_p`` as if alone (**[decision]**: its
communication is local).
Links share bandwidth max-min fairly, each transfer capped at its ``r_p``;
background traffic takes its share off the top (like the paper's iPerf3).  Two or
more transfers that together ask for more than a link has left contend, and share
only ``contention_efficiency`` (``eta``) of it (:data:`CONTENTION_EFFICIENCY`).

:class:`FlowEngine` is the event engine (the Cython module
:mod:`tdmcore.sim.engine._flow`), owning its state for a changing set of jobs;
:func:`simulate_flows` and the cluster simulator (:mod:`tdmcore.sim.cluster`) both
run on it.

Compute noise: iteration ``i`` of job ``k`` (its index in ``jobs``) under ``seed``
multiplies its compute time by ``exp(sigma z - sigma^2 / 2)`` with
``z = noise_normal(seed, k, i)``, a counter-based draw (SplitMix64 and Box-Muller,
:func:`tdmcore.sim.engine._flow.noise_normal`): any iteration's noise is known
without drawing the ones before it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from ... import _validation as v
from ..._equality import ValueEquality
from ._flow import STOP_IDLE, STOP_TIME, FlowEngine

__all__ = ["CONTENTION_EFFICIENCY", "MIN_CONTENTION_EFFICIENCY", "EngineJob", "FlowEngine",
           "FlowJob", "FlowResult", "check_background", "check_efficiency", "simulate_flows"]

#: ``eta``: the share of a link's free capacity that two or more contending
#: transfers get together (docs/simulator.md, "Contention"): where fluid max-min
#: sharing gives contending transfers the whole link, real collectives may lose
#: goodput to congestion control, retransmissions and rings stalled on their
#: slowest segment.  Fitted on the Metronome paper's own measurements of its
#: baselines (Table V, read as times) by :func:`tdmcore.sim.calibration.calibrate`
#: (``tdmcore calibrate``, seeds 0-2): fitted on S1-S3 (RMS error 11.1 %, all of
#: it S2's -18 %), checked on S4 and S5 (RMS error 4.4 %).  The error hardly moves
#: between 0.90 and 1.00: the paper's baselines lose no more than fluid sharing
#: predicts, except in S2 (docs/fidelity.md).
CONTENTION_EFFICIENCY = 0.99

#: The smallest contention efficiency accepted.  Below it contending transfers
#: barely move: simulated time, and the run's time and memory with it, grow as
#: ``1 / eta`` (``eta`` = 1e-6 took about a minute and 0.5 GB for five seconds of
#: the snapshots, 1e-300 never finished), while the calibration's grid starts at 0.30.
MIN_CONTENTION_EFFICIENCY = 0.01


#: The largest lognormal spread of compute times (``noise_sigma``): at 1 an
#: iteration's compute already varies by a factor e either way; far beyond it the
#: drawn times overflow.
MAX_NOISE_SIGMA = 1.0


def check_noise_sigma(value: Any) -> float:
    """``value`` as a ``noise_sigma`` in [0, :data:`MAX_NOISE_SIGMA`], or ValueError."""
    sigma = v.real_number("noise_sigma", value)
    if not 0 <= sigma <= MAX_NOISE_SIGMA:
        raise ValueError(f"noise_sigma: expected a value in [0, {MAX_NOISE_SIGMA:g}] (the "
                         f"lognormal spread of compute times), got {sigma:g}")
    return sigma


def check_efficiency(value: Any, name: str = "contention_efficiency") -> float:
    """``value`` as a contention efficiency in [:data:`MIN_CONTENTION_EFFICIENCY`, 1],
    or ValueError naming ``name``."""
    eta = v.real_number(name, value)
    if not MIN_CONTENTION_EFFICIENCY <= eta <= 1.0:
        raise ValueError(f"{name}: expected {MIN_CONTENTION_EFFICIENCY:g} <= eta <= 1 (the "
                         f"share of a link contending transfers get), got {value!r}")
    return eta


def check_background(value: Any, capacity_gbps: NDArray[np.float64],
                     names: Sequence[str] | None = None) -> NDArray[np.float64]:
    """``value`` as the background traffic on each link (Gbps): one value >= 0 per
    link, each below its link's capacity (a transfer on a full link would never end);
    or ValueError naming ``background_gbps`` (and the link, by ``names`` or index)."""
    bg = v.as_float_array("background_gbps", value, ndim=1)
    if bg.shape != capacity_gbps.shape or np.any(bg < 0):
        raise ValueError(f"background_gbps: expected {capacity_gbps.size} values >= 0")
    full = np.flatnonzero(bg >= capacity_gbps)
    if full.size:
        i = int(full[0])
        link = repr(names[i]) if names is not None else str(i)
        raise ValueError(f"background_gbps: must stay below each link's capacity; link "
                         f"{link} has {bg[i]:g} Gbps of background on {capacity_gbps[i]:g}")
    return bg


class EngineJob(NamedTuple):
    """A job as the event engine runs it: the one place a traffic pattern becomes
    the engine's parameters.

    ``links`` holds the host link of each node the job spans (each once), or -1
    for a job wholly on one node.  **[decision]** A networked job computes
    ``t_p (1 - d_p)`` per iteration and sends ``r_p t_p d_p`` Gbit through each of
    its links; a job on one node sends nothing over host links and iterates in
    ``t_p``.
    """

    compute_ms: float
    tail_ms: float
    rate_gbps: float
    volume_gbit: float
    links: tuple[int, ...]

    @classmethod
    def of(cls, period_ms: float, duty_cycle: float, bandwidth_gbps: float,
           links: Sequence[int], tail_ms: float = 0.0) -> EngineJob:
        """The engine job of a pattern (``t_p``, ``d_p``, ``r_p``) on ``links``."""
        networked = any(link >= 0 for link in links)
        compute = period_ms * (1.0 - duty_cycle) if networked else period_ms
        volume = bandwidth_gbps * period_ms * duty_cycle * 1e-3 if networked else 0.0
        return cls(compute, tail_ms if networked else 0.0, bandwidth_gbps, volume,
                   tuple(int(x) for x in links))

    @property
    def networked(self) -> bool:
        return any(link >= 0 for link in self.links)

    def add_to(self, engine: FlowEngine, *, key: int, iterations: int, start_ms: float,
               idle_ms: float = 0.0, done: int = 0, step: int = 1,
               job_period_ms: float = 1.0) -> int:
        """Put the job in ``engine``, its iteration ``done`` due at ``start_ms``;
        returns its slot (:meth:`FlowEngine.add`)."""
        return engine.add(key=key, compute_ms=self.compute_ms, iterations=iterations,
                          start_ms=start_ms, links=list(self.links), cap_gbps=self.rate_gbps,
                          volume_gbit=self.volume_gbit, tail_ms=self.tail_ms,
                          idle_ms=idle_ms, done=done, step=step, job_period_ms=job_period_ms)


@dataclass(frozen=True)
class FlowJob:
    """A periodic job: ``period_ms`` (``t_p``), ``duty_cycle`` (``d_p``), its rate
    ``bandwidth_gbps`` (``r_p``) and in ``links`` the host link of each node it
    spans, each at most once (a node sends one ring segment however many of the
    job's pods it holds, docs/simulator.md), or None for an entry that crosses no
    link (all None: the job is on one node)."""

    name: str
    period_ms: float
    duty_cycle: float
    bandwidth_gbps: float
    links: tuple[int | None, ...]
    iterations: int
    start_ms: float = 0.0
    idle_ms: float = 0.0
    tail_ms: float = 0.0

    def __post_init__(self) -> None:
        v.pattern(self.period_ms, self.duty_cycle, self.bandwidth_gbps)
        v.positive_float("bandwidth_gbps", self.bandwidth_gbps)  # a transfer needs a rate
        if not isinstance(self.links, tuple) or not self.links:
            raise ValueError("links: expected a non-empty tuple (one entry per pod)")
        seen: set[int] = set()
        for i, link in enumerate(self.links):
            if link is None:
                continue
            v.whole(f"links[{i}]", link, 0)  # a link index, or None
            if int(link) in seen:
                raise ValueError(f"links: link {link} appears twice; a job crosses each "
                                 f"node's host link once (one ring segment per node)")
            seen.add(int(link))
        object.__setattr__(self, "iterations", v.whole("iterations", self.iterations, 0))
        if v.real_number("start_ms", self.start_ms) < 0:
            raise ValueError(f"start_ms: must be >= 0, got {self.start_ms}")
        if v.real_number("idle_ms", self.idle_ms) < 0:
            raise ValueError(f"idle_ms: must be >= 0, got {self.idle_ms}")
        if v.real_number("tail_ms", self.tail_ms) < 0:
            raise ValueError(f"tail_ms: must be >= 0, got {self.tail_ms}")

    def engine_job(self) -> EngineJob:
        """The job as the engine runs it (:class:`EngineJob`)."""
        links = [-1 if link is None else int(link) for link in self.links]
        return EngineJob.of(self.period_ms, self.duty_cycle, self.bandwidth_gbps, links,
                            self.tail_ms)


@dataclass(frozen=True, eq=False)
class FlowResult(ValueEquality):
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
                   until_ms: float = math.inf,
                   contention_efficiency: float = CONTENTION_EFFICIENCY) -> FlowResult:
    """Run ``jobs`` on links of ``link_capacity_gbps`` until all finish or ``until_ms``.

    ``noise_sigma``: lognormal compute noise (spec default 1 %), mean 1, seeded
    per job and iteration (the module's docstring).  ``contention_efficiency``:
    ``eta`` in [:data:`MIN_CONTENTION_EFFICIENCY`, 1], the share of a link that
    contending transfers get together (1: plain max-min fair sharing).
    """
    jobs = tuple(jobs)
    if not jobs or not all(isinstance(j, FlowJob) for j in jobs):
        raise ValueError("jobs: expected a non-empty sequence of FlowJob")
    cap = v.capacities("link_capacity_gbps", link_capacity_gbps)
    bg = np.zeros_like(cap) if background_gbps is None else check_background(
        background_gbps, cap)
    sigma = check_noise_sigma(noise_sigma)
    v.seed(seed)
    until = float(until_ms)
    if math.isnan(until) or until < 0:
        raise ValueError(f"until_ms: expected a time >= 0, got {until_ms!r}")
    eta = check_efficiency(contention_efficiency)
    for i, job in enumerate(jobs):
        for link in job.links:
            if link is not None and link >= cap.size:
                raise ValueError(f"jobs[{i}]: link {link} does not exist "
                                 f"({cap.size} links)")
    longest = max(job.iterations for job in jobs)
    engine = FlowEngine(cap, bg, seed=seed, sigma=sigma, jobs_hint=len(jobs),
                        samples_per_job=max(1, longest),  # every iteration kept
                        contention_efficiency=eta)
    runs = [job.engine_job() for job in jobs]
    slots = [run.add_to(engine, key=i, iterations=job.iterations, start_ms=job.start_ms,
                        idle_ms=job.idle_ms)
             for i, (job, run) in enumerate(zip(jobs, runs, strict=True))]
    t = 0.0
    while True:
        t, reason, _ = engine.run(t, until)
        if reason in (STOP_TIME, STOP_IDLE):
            break
    engine.flush(t)
    ends = []
    for job, j in zip(jobs, slots, strict=True):
        durations = engine.take_samples(j)
        ends.append(job.start_ms + np.cumsum(durations) if durations.size
                    else np.zeros(0))
    # the *_at readers add what a transfer alone on its link has sent since flush
    link_sent = engine.link_sent_at(t)
    pod_sent = np.concatenate([engine.pod_sent_at(j, t) for j in slots])
    done = np.array([len(e) for e in ends], dtype=np.float64)
    volumes = np.concatenate([np.full(len(run.links), run.volume_gbit) for run in runs])
    per_pod_done = np.concatenate([np.full(len(job.links), done[i])
                                   for i, job in enumerate(jobs)])
    end = t
    return FlowResult(tuple(ends), pod_sent, volumes * per_pod_done, link_sent, float(end))
