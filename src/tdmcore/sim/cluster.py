"""The cluster simulator: a placement policy and its controller over the flow model.

spec/simulator.md.  Jobs arrive; the policy places each job's pods all or nothing
through :class:`tdmcore.framework.Scheduler` (a job that does not fit waits in
arrival order and is retried whenever a job leaves); the flow-level kernel
(:func:`tdmcore._kernels.flow.advance`) runs their iterations on the nodes' host
links; for the Metronome policies the stop-and-wait :class:`tdmcore.controller.
Controller` receives every iteration report and its shifts, pauses, idle
injections and pattern updates act on the running model.  The same objects run
behind the Kubernetes bridge: domain objects -> snapshot -> kernels -> decision.

Policies: the placement policies of :data:`tdmcore.policies.POLICIES` and
``ideal``.  **[decision]** ``ideal`` places like ``metronome`` and then gives every
pod a private, uncongested link of exactly its rate ``r_p``: every job runs as if
alone, which is the reference the paper's "ideal time" means.

Time shifts: the controller's global offsets are relative to the reference job of
each affinity component (offset 0); a job starts, and a pause or an offset change
moves its next iteration, to the time congruent to "the reference job's latest
iteration start + its offset" modulo its period (:meth:`Controller.target_phase`).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import _validation as v
from .._kernels.flow import (
    DONE_GBIT,
    PHASE_COMM,
    PHASE_COMPUTE,
    PHASE_DONE,
    PHASE_READY,
    PHASE_TAIL,
    PHASE_WAIT,
    STOP_DRAIN,
    STOP_FINISHED,
    STOP_IDLE,
    STOP_SOLO,
    advance,
)
from ..controller import Controller, PatternUpdate, Readjustment
from ..framework import Scheduler, Status
from ..link import LinkPlan
from ..model import Cluster, ClusterState, Pod, TrafficPattern
from ..policies import POLICIES, make_policy

__all__ = [
    "CLUSTER_POLICIES",
    "JobResult",
    "RunResult",
    "SimCluster",
    "SimJob",
    "run_cluster",
]

#: Placement policies the cluster simulator runs (``ideal`` is simulator-only).
CLUSTER_POLICIES: tuple[str, ...] = (*POLICIES, "ideal")
#: Iterations logged per job between two drains of the kernel's buffers.
LOG_SLOTS = 256
#: **[decision]** A stretch computed in closed form longer than this keeps a
#: systematic sample of this many iteration times for its percentiles; its mean and
#: end time are exact.  (Philly jobs run up to 10^8 iterations.)
KEEP_DURATIONS = 10_000
#: Local jobs draw their compute noise in blocks of this many iterations.
NOISE_BLOCK = 1 << 20


@dataclass(frozen=True)
class SimJob:
    """A training job of a scenario.

    ``workers`` pods, each requesting ``gpu``/``cpu``/``mem_gib`` and carrying
    ``pattern`` (``None``: a LowComm job).  It arrives at ``arrival_s`` and trains
    ``iterations`` iterations.  ``workload`` groups HPO jobs (AppGroup).
    """

    name: str
    model: str
    pattern: TrafficPattern | None
    workers: int
    iterations: int
    arrival_s: float = 0.0
    priority: int = 0
    gpu: float = 1.0
    cpu: float = 4.0
    mem_gib: float = 16.0
    workload: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name: expected a non-empty string, got {self.name!r}")
        for key in ("workers", "iterations"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key}: expected an integer >= 1, got {value!r}")
        if v.real_number("arrival_s", self.arrival_s) < 0:
            raise ValueError(f"arrival_s: must be >= 0, got {self.arrival_s}")
        if self.pattern is not None and not isinstance(self.pattern, TrafficPattern):
            raise ValueError("pattern: expected a TrafficPattern or None")

    def pods(self) -> list[Pod]:
        return [Pod(f"{self.name}-w{k}", self.name, cpu=self.cpu, mem_gib=self.mem_gib,
                    gpu=self.gpu, pattern=self.pattern, priority=self.priority,
                    workload=self.workload) for k in range(self.workers)]

    @property
    def period_ms(self) -> float:
        """The iteration time alone (LowComm jobs: their ``pattern`` is None, 1 s)."""
        return self.pattern.period_ms if self.pattern is not None else 1000.0


@dataclass(frozen=True)
class SimCluster:
    """Nodes (with their latency matrix and workloads) and the network's congestion.

    ``background_gbps[n]``: steady background traffic on node n's host link (the
    paper's iPerf3).  ``latency_ms[x, y]``: one-way latency between nodes; a job
    spanning nodes pays ``2 (n - 1)`` times its worst pair latency per iteration
    (ring all-reduce has ``2 (n - 1)`` sequential steps; **[decision]**).
    """

    cluster: Cluster
    background_gbps: NDArray[np.float64]
    latency_ms: NDArray[np.float64]

    def __post_init__(self) -> None:
        k = len(self.cluster)
        bg = v.as_float_array("background_gbps", self.background_gbps, ndim=1)
        if bg.shape != (k,) or np.any(bg < 0):
            raise ValueError(f"background_gbps: expected {k} values >= 0")
        if np.any(bg >= self.cluster.link_gbps):
            raise ValueError("background_gbps: must stay below each link's capacity")
        lat = v.as_float_array("latency_ms", self.latency_ms, ndim=2)
        if lat.shape != (k, k) or np.any(lat < 0):
            raise ValueError(f"latency_ms: expected a ({k}, {k}) matrix of values >= 0")
        object.__setattr__(self, "background_gbps", bg)
        object.__setattr__(self, "latency_ms", lat)


@dataclass
class JobResult:
    """What one job did: placement, times (ms) and its iteration durations."""

    name: str
    model: str
    priority: int
    arrival_ms: float
    iterations: int
    nodes: tuple[str, ...] = ()
    start_ms: float | None = None
    end_ms: float | None = None
    durations_ms: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    readjustments: int = 0
    pause_ms: float = 0.0
    accepted_on_arrival: bool = False
    #: iterations done and their total time (exact even when ``durations_ms`` is a
    #: sample, see :data:`KEEP_DURATIONS`)
    done: int = 0
    busy_ms: float = 0.0

    @property
    def jct_ms(self) -> float | None:
        return None if self.end_ms is None else self.end_ms - self.arrival_ms

    @property
    def wait_ms(self) -> float | None:
        return None if self.start_ms is None else self.start_ms - self.arrival_ms

    @property
    def per_1000_s(self) -> float:
        """Average time per 1,000 iterations (s), the paper's user-side metric."""
        return self.busy_ms / self.done if self.done else math.nan

    def percentiles(self) -> NDArray[np.float64]:
        """Iteration time p5, p25, p50, p75, p95 (ms)."""
        d = self.durations_ms
        if not d.size:
            return np.full(5, np.nan)
        return np.asarray(np.percentile(d, [5, 25, 50, 75, 95]), dtype=np.float64)


@dataclass
class RunResult:
    """One policy on one scenario."""

    policy: str
    jobs: dict[str, JobResult]
    tct_ms: float
    gamma: float
    link_names: tuple[str, ...]
    link_capacity_gbps: NDArray[np.float64]
    link_sent_gbit: NDArray[np.float64]
    util_t_ms: NDArray[np.float64]  # sample times
    util_gbps: NDArray[np.float64]  # (samples, links): mean rate since the previous sample
    decision_s: NDArray[np.float64]
    recalculations: int
    pattern_updates: int
    wall_s: float
    controller: Controller | None = None
    #: node name -> the latest link plan the controller made for it during the run
    link_plans: dict[str, LinkPlan] = field(default_factory=dict)

    @property
    def acceptance(self) -> float:
        """Share of jobs placed the moment they arrived."""
        if not self.jobs:
            return math.nan
        return sum(j.accepted_on_arrival for j in self.jobs.values()) / len(self.jobs)

    @property
    def readjustments(self) -> int:
        return sum(j.readjustments for j in self.jobs.values())

    def mean_jct_s(self) -> float:
        jct = [j.jct_ms for j in self.jobs.values() if j.jct_ms is not None]
        return float(np.mean(jct)) / 1e3 if jct else math.nan


@dataclass
class _Solo:
    """A networked job alone on all its links, computed in closed form.

    Iteration ``i`` (from ``i0``) lasts ``compute x noise_i + stretch + comm + tail``
    with ``comm`` fixed (its transfers share no link with anyone), exactly what the
    kernel would compute.  Its noise is the job's stream: ``prefix`` (already drawn)
    then draws from a generator restored to ``state0``.
    """

    i0: int
    s0: float
    state0: dict[str, Any]
    prefix: NDArray[np.float64]
    comm: float
    stretch: float
    end: float
    total: float
    version: int


class _Flow:
    """The kernel's state arrays for the running jobs, rebuilt when the set changes."""

    JOB_F = ("compute", "start", "stretch", "tail", "hold_phase", "hold_period", "slow_ms",
             "phase_end")
    JOB_I = ("n_iters", "slow_limit", "slow_count", "phase", "iteration", "pending", "base",
             "leave")
    POD_F = ("cap", "volume", "left", "sent")

    def __init__(self, n_links: int, capacity: NDArray[np.float64],
                 background: NDArray[np.float64]) -> None:
        self.names: list[str] = []
        self.f = {k: np.zeros(0) for k in self.JOB_F}
        self.i = {k: np.zeros(0, dtype=np.int64) for k in self.JOB_I}
        self.noise = np.zeros((0, LOG_SLOTS))
        self.logs = np.zeros((3, 0, LOG_SLOTS))
        self.pod_job = np.zeros(0, dtype=np.int64)
        self.pod_link = np.zeros(0, dtype=np.int64)
        self.p = {k: np.zeros(0) for k in self.POD_F}
        self.capacity = capacity
        self.background = background
        self.link_sent = np.zeros(n_links)
        self.link_ptr = np.zeros(n_links + 1, dtype=np.int64)
        self.link_pods = np.zeros(0, dtype=np.int64)
        self.finished = np.zeros(1, dtype=np.int64)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def add(self, name: str, job: dict[str, float], links: Sequence[int],
            cap: float, volume: float, noise: NDArray[np.float64],
            left: NDArray[np.float64] | None = None, sent: NDArray[np.float64] | None = None,
            logs: tuple[float, float, float] | None = None) -> None:
        self.names.append(name)
        for k in self.JOB_F:
            self.f[k] = np.append(self.f[k], job.get(k, 0.0))
        for k in self.JOB_I:
            self.i[k] = np.append(self.i[k], int(job.get(k, 0)))
        self.noise = np.vstack([self.noise, noise[None, :]])
        self.logs = np.concatenate([self.logs, np.full((3, 1, LOG_SLOTS), np.nan)], axis=1)
        j = len(self.names) - 1
        n = len(links)
        self.pod_job = np.append(self.pod_job, np.full(n, j, dtype=np.int64))
        self.pod_link = np.append(self.pod_link, np.asarray(links, dtype=np.int64))
        for k, value in (("cap", cap), ("volume", volume), ("left", 0.0), ("sent", 0.0)):
            self.p[k] = np.append(self.p[k], np.full(n, value))
        if left is not None:
            self.p["left"][-n:] = left
        if sent is not None:
            self.p["sent"][-n:] = sent
        if logs is not None:
            self.logs[:, j, 0] = logs
        self._relink()

    def remove(self, name: str) -> tuple[float, NDArray[np.float64]]:
        """Drop a job; return the Gbit its pods sent and their links."""
        j = self.index(name)
        self.names.pop(j)
        keep = np.ones(len(self.names) + 1, dtype=np.bool_)
        keep[j] = False
        for k in self.JOB_F:
            self.f[k] = self.f[k][keep]
        for k in self.JOB_I:
            self.i[k] = self.i[k][keep]
        self.noise = self.noise[keep]
        self.logs = self.logs[:, keep]
        mine = self.pod_job == j
        sent = float(self.p["sent"][mine].sum())
        self.pod_job = self.pod_job[~mine]
        self.pod_job[self.pod_job > j] -= 1
        self.pod_link = self.pod_link[~mine]
        for k in self.POD_F:
            self.p[k] = self.p[k][~mine]
        self._relink()
        return sent, self.link_sent

    def _relink(self) -> None:
        n_links = self.capacity.shape[0]
        counts = np.bincount(self.pod_link[self.pod_link >= 0], minlength=n_links)
        self.link_ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        order = np.argsort(np.where(self.pod_link < 0, n_links, self.pod_link), kind="stable")
        self.link_pods = order[: int(counts.sum())].astype(np.int64)

    def run(self, t: float, until: float) -> tuple[float, int]:
        f, i, p = self.f, self.i, self.p
        return advance(  # type: ignore[no-any-return]
            t, until, f["compute"], f["start"], i["n_iters"], f["stretch"], f["tail"],
            f["hold_phase"], f["hold_period"], f["slow_ms"], i["slow_limit"],
            i["slow_count"], i["phase"], f["phase_end"], i["iteration"], i["pending"],
            i["base"], i["leave"], self.noise, self.logs[0], self.logs[1], self.logs[2],
            self.pod_job, self.pod_link, p["cap"], p["volume"], p["left"], p["sent"],
            self.capacity, self.background, self.link_ptr, self.link_pods, self.link_sent,
            self.finished)


def run_cluster(sim: SimCluster, jobs: Sequence[SimJob], policy: str, *, seed: int = 0,
                noise_sigma: float = 0.01, sample_ms: float | None = None,
                progress: Callable[[float], None] | None = None,
                skip_ahead: bool = True) -> RunResult:
    """Simulate ``jobs`` on ``sim`` under ``policy`` until every job has finished.

    Parameters
    ----------
    sim, jobs : the cluster and the jobs (names unique).
    policy : one of :data:`CLUSTER_POLICIES`.
    seed : compute noise is drawn per job from ``(seed, job index)``, so every
        policy sees the same noise for the same job.
    noise_sigma : lognormal compute noise, mean 1 (spec: 1 %).
    sample_ms : link utilisation sampling interval (default: 1/400 of the last
        arrival plus the longest ideal job, at least 1 s).
    progress : called with the simulated time (ms) reached, now and then.
    skip_ahead : compute a networked job that is alone on all its links in closed
        form (exact: nothing shares its transfers; the test suite checks it against
        ``skip_ahead=False``, which runs every iteration through the kernel).  Link
        utilisation samples of such a stretch are spread evenly over it; totals
        are exact.  Not used under a monitoring controller (``metronome``,
        ``metronome-no-phase3``), where it would move when the controller acts.

    A job that cannot be placed on the empty cluster under ``policy`` (it needs
    more than the cluster has) is never started: its ``end_ms`` stays None.
    """
    if not isinstance(sim, SimCluster):
        raise ValueError(f"sim: expected a SimCluster, got {type(sim).__name__}")
    jobs = tuple(jobs)
    if not jobs or not all(isinstance(j, SimJob) for j in jobs):
        raise ValueError("jobs: expected a non-empty sequence of SimJob")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError("jobs: job names must be unique")
    if policy not in CLUSTER_POLICIES:
        raise ValueError(f"policy: unknown policy {policy!r}; choose from "
                         f"{', '.join(CLUSTER_POLICIES)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    sigma = v.real_number("noise_sigma", noise_sigma)
    if sigma < 0:
        raise ValueError(f"noise_sigma: must be >= 0, got {sigma}")
    return _Run(sim, jobs, policy, seed, sigma, sample_ms, progress,
                bool(skip_ahead)).execute()


class _Run:
    def __init__(self, sim: SimCluster, jobs: tuple[SimJob, ...], policy: str, seed: int,
                 sigma: float, sample_ms: float | None,
                 progress: Callable[[float], None] | None, skip_ahead: bool = True) -> None:
        self.sim, self.jobs, self.policy_name = sim, jobs, policy
        self.seed, self.sigma, self.progress = seed, sigma, progress
        self.cluster = sim.cluster
        self.ideal = policy == "ideal"
        placement = make_policy("metronome" if self.ideal else policy)
        self.scheduler = Scheduler(placement)
        self.state = ClusterState(self.cluster)
        # the stop-and-wait controller runs for the Metronome policies only
        self.controller = Controller.for_policy(self.state, placement) \
            if policy.startswith("metronome") else None
        k = len(self.cluster)
        n_private = sum(j.workers for j in jobs) if self.ideal else 0
        capacity = np.concatenate([self.cluster.link_gbps, np.zeros(n_private)])
        background = np.concatenate([np.zeros(k) if self.ideal else sim.background_gbps,
                                     np.zeros(n_private)])
        self.private_next = k
        self.flow = _Flow(k + n_private, capacity, background)
        self.job_by_name = {j.name: j for j in jobs}
        self.index = {j.name: i for i, j in enumerate(jobs)}
        self.results = {j.name: JobResult(j.name, j.model, j.priority, j.arrival_s * 1e3,
                                          j.iterations) for j in jobs}
        self.rng = {j.name: np.random.default_rng([seed, i]) for i, j in enumerate(jobs)}
        self.durations: dict[str, list[NDArray[np.float64]]] = {j.name: [] for j in jobs}
        self.pod_node_links: dict[str, NDArray[np.int64]] = {}
        self.sent_by_node = np.zeros(k)
        span = max(j.arrival_s * 1e3 for j in jobs) + max(j.iterations * j.period_ms
                                                          for j in jobs)
        self.sample_ms = sample_ms if sample_ms is not None else max(1000.0, span / 400)
        self.decision_s: list[float] = []
        self.pattern_updates = 0
        self.fits_empty: dict[str, bool] = {}
        self.networked: set[str] = set()
        self.local_ends: list[tuple[float, int, str]] = []  # heap: (end, version, job)
        # **[decision]** not under a monitoring controller: it reads reports when the
        # kernel hands them over, and skipping ahead moves those points, so a pattern
        # update could act an iteration earlier or later (not exact).
        self.skip_ahead = skip_ahead and (self.controller is None
                                          or not self.controller.config.monitor)
        self.solo: dict[str, _Solo] = {}
        self.link_jobs: dict[int, set[str]] = {}
        self.params: dict[str, tuple[float, float, float, float, list[int]]] = {}
        self.versions = 0
        self.link_plans: dict[str, LinkPlan] = {}

    # ------------------------------------------------------------------ placing
    def _fits_empty(self, job: SimJob) -> bool:
        """Could the job run on the empty cluster?  Feasibility there depends only
        on the pods' requests and rate (resources, Eq. 14, the loop filter), so the
        answer is shared by jobs of the same shape."""
        rate = None if job.pattern is None else job.pattern.bandwidth_gbps
        key = f"{job.workers}|{job.gpu}|{job.cpu}|{job.mem_gib}|{rate}"
        if key not in self.fits_empty:
            trial = ClusterState(self.cluster)
            decision = self.scheduler.schedule_gang(trial, job.pods())
            self.fits_empty[key] = decision.status is Status.SUCCESS
        return self.fits_empty[key]

    def _try_place(self, job: SimJob, t: float) -> bool:
        self._drain()  # the controller sees every iteration up to now
        before = dict(self.controller.offsets_ms) if self.controller is not None else {}
        tic = time.perf_counter()
        decision = self.scheduler.schedule_gang(self.state, job.pods())
        shifts: dict[str, float] = {}
        if decision.status is Status.SUCCESS and self.controller is not None:
            for d in decision.decisions:
                if d.reserve is not None:
                    shifts = self.controller.on_reserve(d.reserve)
        self.decision_s.append(time.perf_counter() - tic)
        if decision.status is not Status.SUCCESS:
            return False
        nodes = [self.state.placed[p.name].node for p in job.pods()]
        self._start(job, nodes, t)
        if shifts:
            self._apply_offsets(t, before, exclude=job.name)
        if self.controller is not None:  # keep the plans: the links empty as jobs leave
            for node, plan in self.controller.links.items():
                self.link_plans[self.cluster.nodes[node].name] = plan
        return True

    def _links_of(self, job: SimJob, nodes: list[int]) -> list[int]:
        if len(set(nodes)) == 1 or job.pattern is None:
            return [-1] * len(nodes)  # all on one node: local, no host-link traffic
        if not self.ideal:
            return list(nodes)
        out = []
        for _ in nodes:
            out.append(self.private_next)
            self.flow.capacity[self.private_next] = job.pattern.bandwidth_gbps
            self.private_next += 1
        return out

    def _start(self, job: SimJob, nodes: list[int], t: float) -> None:
        pattern = job.pattern
        links = self._links_of(job, nodes)
        networked = any(link >= 0 for link in links)
        for link in set(links) if networked else ():
            for other in list(self.link_jobs.get(link, ())):
                if other in self.solo:  # it shares a link from now on: back to the kernel
                    self._solo_to_kernel(other, t)
                elif other in self.flow.names:  # no longer alone: stays in the kernel
                    self.flow.i["leave"][self.flow.index(other)] = 0
        period = job.period_ms
        duty = pattern.duty_cycle if pattern is not None else 0.0
        compute = period * (1.0 - duty) if networked else period
        rate = pattern.bandwidth_gbps if pattern is not None else 0.0
        volume = rate * period * duty * 1e-3
        tail = 0.0
        if networked and not self.ideal:
            spread = sorted(set(nodes))
            worst = max(self.sim.latency_ms[a, b] for a in spread for b in spread)
            tail = 2.0 * (job.workers - 1) * float(worst)
        start = t
        res = self.results[job.name]
        res.start_ms = t
        res.nodes = tuple(self.cluster.nodes[n].name for n in nodes)
        if self.controller is not None:
            self._refresh_anchor(job.name, t)
            target = self.controller.target_phase(job.name)
            if target is not None:
                start = t + (target - t) % period
            self.controller.anchors_ms.setdefault(job.name, start)  # phase before 1st report
        if not networked:
            self._start_local(job, start)
            return
        self.params[job.name] = (compute, tail, rate, volume, list(links))
        self.pod_node_links[job.name] = np.asarray(nodes, dtype=np.int64)
        self.networked.add(job.name)
        for link in set(links):
            self.link_jobs.setdefault(link, set()).add(job.name)
        if self.skip_ahead and self._alone(job.name) \
                and self._solo_begin(job.name, 0, start, np.zeros(0), 0.0):
            return
        slow_ms, slow_limit = np.inf, np.iinfo(np.int64).max
        if self.controller is not None and self.controller.config.monitor:
            cfg = self.controller.config
            slow_ms, slow_limit = cfg.a_t * period, cfg.o_t + 1
        self.flow.add(job.name, {
            "compute": compute, "start": start, "n_iters": job.iterations,
            "tail": tail, "hold_phase": np.nan, "hold_period": period,
            "slow_ms": slow_ms, "slow_limit": slow_limit, "phase": PHASE_WAIT,
        }, links, rate, volume, self._noise(job.name, LOG_SLOTS))
        self._update_stretch()

    # ------------------------------------------------------------------ skip-ahead
    def _alone(self, name: str) -> bool:
        links = self.params[name][4]
        return all(self.link_jobs.get(link, set()) <= {name} for link in links if link >= 0)

    def _solo_comm(self, name: str) -> float:
        """The comm phase of a job alone on its links: per link its k pods share
        ``B - background`` max-min fairly at rate ``min(r, (B - bg) / k)``."""
        _, _, rate, volume, links = self.params[name]
        comm = 0.0
        for link in set(links):
            k = links.count(link)
            free = self.flow.capacity[link] - self.flow.background[link]
            per_pod = rate if rate <= free / k else free / k
            comm = max(comm, volume / (per_pod * 1e-3))
        return comm

    def _solo_noise(self, solo: _Solo, count: int) -> Any:
        """The job's noise multipliers from iteration ``i0``, ``count`` of them, in
        blocks; the last item is the generator, positioned after the last value."""
        gen = np.random.default_rng()
        gen.bit_generator.state = solo.state0
        prefix = solo.prefix[:count]
        if prefix.size:
            yield prefix
        left = count - prefix.size
        s = self.sigma
        while left > 0:
            block = min(NOISE_BLOCK, left)
            if s == 0.0:
                yield np.ones(block)
            else:
                yield np.exp(s * gen.standard_normal(block) - s * s / 2)
            left -= block
        yield gen

    def _solo_durations(self, name: str, solo: _Solo, count: int) -> Any:
        compute, tail = self.params[name][0], self.params[name][1]
        for chunk in self._solo_noise(solo, count):
            if isinstance(chunk, np.random.Generator):
                yield chunk
            else:
                yield compute * chunk + solo.stretch + solo.comm + tail

    def _quiet_bounds(self, name: str) -> tuple[float, float] | None:
        """Iteration times in ``[lo, hi]`` can trigger nothing in the controller (no
        slow iteration, no drift), given what its window already holds; None when
        the window itself is outside.  ``(-inf, inf)`` without a monitor."""
        if self.controller is None or not self.controller.config.monitor:
            return (-np.inf, np.inf)
        cfg = self.controller.config
        pod = self.state.job_members[name][0]
        pattern = self.state.placed[pod].pod.pattern
        assert pattern is not None
        lo = pattern.period_ms * (1 - cfg.drift_tol)
        hi = pattern.period_ms * min(cfg.a_t, 1 + cfg.drift_tol)
        watch = self.controller._watch.get(pod)
        if watch is not None and any(not lo <= d <= hi for d in watch.durations):
            return None
        return lo, hi

    def _solo_begin(self, name: str, i0: int, s0: float, prefix: NDArray[np.float64],
                    stretch: float) -> bool:
        """Take the job out of the event loop from iteration ``i0`` at ``s0``, if
        that is exact: it is alone on its links and, under a monitoring controller,
        none of its iterations could make the controller act."""
        bounds = self._quiet_bounds(name)
        if bounds is None:
            return False
        job = self.job_by_name[name]
        solo = _Solo(i0, s0, dict(self.rng[name].bit_generator.state), prefix,
                     self._solo_comm(name), stretch, s0, 0.0, self.versions + 1)
        total = 0.0
        for chunk in self._solo_durations(name, solo, job.iterations - i0):
            if not isinstance(chunk, np.random.Generator):
                if chunk.size and (chunk.min() < bounds[0] or chunk.max() > bounds[1]):
                    return False
                total += float(chunk.sum())
        self.versions += 1
        solo.total, solo.end = total, s0 + total
        self.solo[name] = solo
        heapq.heappush(self.local_ends, (solo.end, solo.version, name))
        return True

    def _solo_commit(self, name: str, solo: _Solo, count: int) -> Any:
        """Record ``count`` iterations of the stretch, in one pass; return the
        generator after them and the start of the next one."""
        res = self.results[name]
        step = max(1, -(-count // KEEP_DURATIONS))
        keep = 0 if self.controller is None else min(count,
                                                      self.controller.config.readjust_horizon)
        last_d, last_s = np.zeros(0), np.zeros(0)
        done, t = 0, solo.s0
        gen = None
        for chunk in self._solo_durations(name, solo, count):
            if isinstance(chunk, np.random.Generator):
                gen = chunk
                continue
            if keep:  # the last `keep` iterations and their starts
                starts = t + np.concatenate([[0.0], np.cumsum(chunk)])[:-1]
                last_d = np.concatenate([last_d, chunk])[-keep:]
                last_s = np.concatenate([last_s, starts])[-keep:]
            res.busy_ms += float(chunk.sum())
            t += float(chunk.sum())
            self.durations[name].append(chunk[(-done) % step::step].copy())
            done += chunk.size
        res.done += count
        volume = self.params[name][3]
        np.add.at(self.sent_by_node, self.pod_node_links[name], volume * count)
        if keep:
            # the controller's view after these reports: the last ones fill its window
            # and history, and give the anchor (none of them can trigger anything)
            pod = self.state.job_members[name][0]
            actions = self.controller.report_iterations(pod, last_s, last_d)  # type: ignore[union-attr]
            assert not actions, actions
        return gen, t

    def _solo_to_kernel(self, name: str, t: float) -> None:
        """The job stops being alone at ``t``: rebuild its kernel state there."""
        solo = self.solo.pop(name)
        job = self.job_by_name[name]
        compute, tail, rate, volume, links = self.params[name]
        # the iteration in progress at t: the first whose end is after t
        n = job.iterations - solo.i0
        k, start = 0, solo.s0
        for chunk in self._solo_durations(name, solo, n):
            if isinstance(chunk, np.random.Generator):
                break
            ends = start + np.cumsum(chunk)
            inside = int(np.searchsorted(ends, t, side="right"))
            if inside < chunk.size:
                k += inside
                break
            k += chunk.size
            start = float(ends[-1])
        k = min(k, n - 1)
        gen, s_k = self._solo_commit(name, solo, k)
        # noise for iterations k .. k + LOG_SLOTS - 1, and the stream right after them
        want = k + LOG_SLOTS
        values = []
        for chunk in self._solo_noise(solo, want):
            if isinstance(chunk, np.random.Generator):
                gen = chunk
            else:
                values.append(chunk)
        buffer = np.concatenate(values)[k:]
        self.rng[name] = gen
        c_k = compute * buffer[0] + solo.stretch
        u = t - s_k
        pod_rates = np.empty(len(links))
        for q, link in enumerate(links):
            free = self.flow.capacity[link] - self.flow.background[link]
            m = links.count(link)
            pod_rates[q] = rate if rate <= free / m else free / m
        left = np.zeros(len(links))
        sent = np.zeros(len(links))
        state: dict[str, float] = {"compute": compute, "start": s_k, "n_iters": job.iterations,
                                   "tail": tail, "hold_phase": np.nan,
                                   "hold_period": job.period_ms, "stretch": solo.stretch,
                                   "iteration": solo.i0 + k, "base": solo.i0 + k}
        comm_start = s_k + c_k
        if u < c_k:
            state.update(phase=PHASE_COMPUTE, phase_end=s_k + c_k)
            comm_log = np.nan
        else:
            elapsed = u - c_k
            left = np.maximum(volume - pod_rates * 1e-3 * elapsed, 0.0)
            left[left <= DONE_GBIT] = 0.0
            sent = volume - left
            pending = int((left > 0).sum())
            comm_log = comm_start
            if pending:
                state.update(phase=PHASE_COMM, phase_end=np.inf, pending=pending)
            else:
                state.update(phase=PHASE_TAIL, phase_end=s_k + c_k + solo.comm + tail)
        slow_ms, slow_limit = np.inf, np.iinfo(np.int64).max
        if self.controller is not None and self.controller.config.monitor:
            cfg = self.controller.config
            slow_ms, slow_limit = cfg.a_t * job.period_ms, cfg.o_t + 1
        state.update(slow_ms=slow_ms, slow_limit=slow_limit)
        self.flow.add(name, state, links, rate, volume, buffer[:LOG_SLOTS], left=left,
                      sent=sent, logs=(s_k, comm_log, np.nan))

    def _refresh_anchor(self, job: str, t: float) -> None:
        """Before ``job`` is aligned: if its reference job runs in closed form, give
        the controller that job's latest iteration start by ``t`` (what its reports
        would have said)."""
        assert self.controller is not None
        root = self.controller.roots.get(job)
        solo = self.solo.get(root) if root is not None else None
        if root is None or solo is None:
            return
        start, last = solo.s0, None
        n = self.job_by_name[root].iterations - solo.i0
        for chunk in self._solo_durations(root, solo, n):
            if isinstance(chunk, np.random.Generator):
                break
            ends = start + np.cumsum(chunk)
            done = int(np.searchsorted(ends, t, side="right"))
            if done:
                last = float(ends[done - 1] - chunk[done - 1])
            if done < chunk.size:
                break
            start = float(ends[-1])
        if last is not None:
            self.controller.anchors_ms[root] = max(last, self.controller.anchors_ms.get(
                root, -np.inf))

    def _kernel_to_solo(self, name: str, t: float) -> None:
        """A kernel job flagged as alone is between iterations at ``t``: take it out
        (or leave it in, when skipping ahead would not be exact)."""
        self._drain()
        j = self.flow.index(name)
        self.flow.i["leave"][j] = 0
        prefix = self.flow.noise[j].copy()  # slot 0 is the next iteration's
        stretch = float(self.flow.f["stretch"][j])
        i0 = int(self.flow.i["iteration"][j])
        state = dict(self.rng[name].bit_generator.state)
        if not self._alone(name) or not self._solo_begin(name, i0, t, prefix, stretch):
            self.rng[name].bit_generator.state = state
            return
        pods = self.flow.pod_job == j
        np.add.at(self.sent_by_node, self.pod_node_links[name], self.flow.p["sent"][pods])
        self.flow.remove(name)

    def _start_local(self, job: SimJob, start: float) -> None:
        """A job on one node iterates ``t_p x noise`` regardless of anyone else: its
        whole run is computed now, exactly, and it finishes at a known time."""
        n, period = job.iterations, job.period_ms
        step = max(1, -(-n // KEEP_DURATIONS))
        res = self.results[job.name]
        if self.sigma == 0.0:
            total = n * period
            kept = np.full(len(range(0, n, step)), period)
        else:
            total, parts, done = 0.0, [], 0
            while done < n:
                block = min(NOISE_BLOCK, n - done)
                d = period * self._noise(job.name, block)
                total += float(d.sum())
                first = (-done) % step
                parts.append(d[first::step])
                done += block
            kept = np.concatenate(parts)
        res.done, res.busy_ms = n, total
        self.durations[job.name].append(kept)
        self.versions += 1
        heapq.heappush(self.local_ends, (start + total, self.versions, job.name))

    def _noise(self, name: str, n: int) -> NDArray[np.float64]:
        s = self.sigma
        return np.asarray(np.exp(s * self.rng[name].standard_normal(n) - s * s / 2),
                          dtype=np.float64)

    def _update_stretch(self) -> None:
        """Idle injection: each job's compute phase grows by the most any link of it
        injects (base period unification, step 2)."""
        if self.controller is None:
            return
        stretch: dict[str, float] = {}
        for plan in self.controller.links.values():
            for pod, idle in zip(plan.pods, plan.base.idle_ms, strict=True):
                if pod.job is not None:
                    stretch[pod.job] = max(stretch.get(pod.job, 0.0), float(idle))
        for j, name in enumerate(self.flow.names):
            self.flow.f["stretch"][j] = stretch.get(name, 0.0)

    def _apply_offsets(self, t: float, before: dict[str, float], exclude: str) -> None:
        """After the offsets changed: move each running low-priority job whose offset
        changed onto its new target phase (high-priority jobs are never moved)."""
        assert self.controller is not None
        after = self.controller.offsets_ms
        for j, name in enumerate(self.flow.names):
            if name == exclude or self.controller.is_high(name):
                continue
            if name in before and abs(after.get(name, 0.0) - before[name]) <= 1e-9:
                continue
            self._refresh_anchor(name, t)
            target = self.controller.target_phase(name)
            if target is None or self.flow.i["phase"][j] == PHASE_DONE:
                continue
            self.flow.f["hold_phase"][j] = target
            self.flow.f["hold_period"][j] = self.job_by_name[name].period_ms
            if self.flow.i["phase"][j] == PHASE_WAIT:  # not started yet: move the start
                now = max(t, self.flow.f["start"][j])
                self.flow.f["start"][j] = now + (target - now) % self.flow.f["hold_period"][j]
                self.flow.f["hold_phase"][j] = np.nan

    # ------------------------------------------------------------------ draining
    def _drain(self) -> None:
        """Move logged iterations out of the kernel's buffers; feed the controller.

        **[decision]** Only jobs whose traffic crosses a host link report to the
        controller (a job on one node has nothing to regulate).
        """
        flow = self.flow
        batches: list[tuple[float, str, NDArray[np.float64], NDArray[np.float64],
                            NDArray[np.float64]]] = []
        for j, name in enumerate(flow.names):
            done = int(flow.i["iteration"][j] - flow.i["base"][j])
            if done <= 0:
                continue
            start = flow.logs[0, j, :done].copy()
            comm = flow.logs[1, j, :done].copy()
            end = flow.logs[2, j, :done].copy()
            self.durations[name].append(end - start)
            res = self.results[name]
            res.done += done
            res.busy_ms += float((end - start).sum())
            if self.controller is not None and name in self.networked:
                batches.append((float(start[0]), name, start, end - start,
                                np.maximum(end - comm, 0.0)))
            # keep the iteration in progress in slot 0
            flow.logs[:, j, :] = np.roll(flow.logs[:, j, :], -done, axis=1)
            flow.logs[:, j, LOG_SLOTS - done:] = np.nan
            flow.noise[j] = np.concatenate([flow.noise[j, done:], self._noise(name, done)])
            flow.i["base"][j] += done
            flow.i["slow_count"][j] = 0
        if self.controller is not None and batches:
            batches.sort(key=lambda b: (b[0], b[1]))
            self._feed(batches)
            self._slow_limits()

    def _feed(self, batches: list[tuple[float, str, NDArray[np.float64],
                                        NDArray[np.float64], NDArray[np.float64]]]) -> None:
        assert self.controller is not None
        members = self.state.job_members
        changed = False
        before = dict(self.controller.offsets_ms)
        last = 0.0
        for _, name, start, dur, _comm in batches:
            if name not in members:
                continue
            last = max(last, float(start[-1] + dur[-1]))
            # **[decision]** The pods of a synchronous job see the same iterations in
            # this model, so its first pod reports for all (a pause stops the job).
            pod = members[name][0]
            # **[decision]** Iteration times only: a comm phase stretched by contention
            # is no change of the job's pattern (its all-reduce volume is fixed here),
            # so the controller keeps the comm time and re-derives the duty cycle.
            for k, action in self.controller.report_iterations(pod, start, dur):
                if isinstance(action, Readjustment):
                    self._pause(name, float(start[k] + dur[k]), action.pause_ms)
                elif isinstance(action, PatternUpdate):
                    self.pattern_updates += 1
                    changed = True
        if changed:
            self._update_stretch()
            self._apply_offsets(last, before, exclude="")

    def _slow_limits(self) -> None:
        """Stop the kernel as soon as a job could reach the controller's trigger:
        ``o_t + 1`` slow iterations in its window, counting those already in it."""
        assert self.controller is not None
        if not self.controller.config.monitor:
            return
        o_t = self.controller.config.o_t
        for j, name in enumerate(self.flow.names):
            pods = self.state.job_members.get(name)
            if pods and self.controller.is_high(name):
                self.flow.i["slow_limit"][j] = np.iinfo(np.int64).max  # never paused
            elif pods:
                have = self.controller.slow_in_window(pods[0])
                self.flow.i["slow_limit"][j] = max(1, o_t + 1 - have)

    def _pause(self, name: str, at_ms: float, pause_ms: float) -> None:
        j = self.flow.index(name)
        res = self.results[name]
        res.readjustments += 1
        res.pause_ms += pause_ms
        period = self.job_by_name[name].period_ms
        self.flow.f["hold_phase"][j] = (at_ms + pause_ms) % period
        self.flow.f["hold_period"][j] = period
        if self.flow.i["phase"][j] == PHASE_WAIT:  # already released: move its start
            self.flow.f["start"][j] = max(self.flow.f["start"][j], at_ms + pause_ms)
            self.flow.f["hold_phase"][j] = np.nan
        elif self.flow.i["phase"][j] != PHASE_READY:
            # the next iteration already runs (the report came late): pause the one after
            pass

    # ------------------------------------------------------------------ finishing
    def _finish(self, name: str, t: float) -> None:
        self._drain()
        res = self.results[name]
        res.end_ms = t
        if name in self.solo:
            solo = self.solo.pop(name)
            self._solo_commit(name, solo, self.job_by_name[name].iterations - solo.i0)
        elif name in self.networked:
            j = self.flow.index(name)
            pods = self.flow.pod_job == j
            sent = self.flow.p["sent"][pods]
            np.add.at(self.sent_by_node, self.pod_node_links[name], sent)
            self.flow.remove(name)
        for pod in list(self.state.job_members.get(name, ())):
            node = self.state.placed[pod].node
            self.state.remove(pod)
            if self.controller is not None:
                self.controller.on_removed(node)
        if self.controller is not None:
            self._update_stretch()
        if name in self.networked and self.skip_ahead:
            touched = set()
            for link in set(self.params[name][4]):
                self.link_jobs[link].discard(name)
                touched |= self.link_jobs[link]
            for other in touched:  # who is alone now leaves the kernel between iterations
                if other not in self.solo and self._alone(other):
                    self.flow.i["leave"][self.flow.index(other)] = 1
        elif name in self.networked:
            for link in set(self.params[name][4]):
                self.link_jobs[link].discard(name)

    def _room_for(self, job: SimJob) -> bool:
        """A necessary condition for placing the job's gang under any policy (all of
        them filter on resources): enough pod-sized holes, node by node."""
        state = self.state
        holes = np.full(len(self.cluster), np.inf)
        for free, need in ((state.free_gpu, job.gpu), (state.free_cpu, job.cpu),
                           (state.free_mem, job.mem_gib)):
            if need > 0:
                holes = np.minimum(holes, np.floor((free + 1e-9) / need))
        return bool(holes.sum() >= job.workers)

    def _retry(self, queue: list[SimJob], t: float) -> list[SimJob]:
        """Retry the waiting jobs in arrival order (the head blocks the rest).

        A head without room for its gang is not even tried (the decision could only
        fail): exact, and it keeps long queues cheap.
        """
        if not queue or not self._room_for(queue[0]):
            return queue
        still: list[SimJob] = []
        for job in queue:
            if still or not self._try_place(job, t):
                still.append(job)
        return still

    # ------------------------------------------------------------------ main loop
    def execute(self) -> RunResult:
        wall = time.perf_counter()
        arrivals = sorted(self.jobs, key=lambda j: (j.arrival_s, self.index[j.name]))
        queue: list[SimJob] = []
        a = 0
        t = 0.0
        samples_t: list[float] = [0.0]
        samples: list[NDArray[np.float64]] = []
        last_sent = np.zeros(len(self.cluster))
        next_sample = self.sample_ms
        while True:
            # admit everything that has arrived (queue first, in arrival order)
            while a < len(arrivals) and arrivals[a].arrival_s * 1e3 <= t:
                job = arrivals[a]
                a += 1
                if not self._fits_empty(job):
                    continue  # can never run here
                if not queue and self._try_place(job, t):
                    self.results[job.name].accepted_on_arrival = True
                else:
                    queue.append(job)
            if not self.flow.names and not self.local_ends and not queue \
                    and a >= len(arrivals):
                break
            if not self.flow.names:  # skip stale heap entries before jumping
                while self.local_ends and self.local_ends[0][2] in self.networked and (
                        self.local_ends[0][2] not in self.solo
                        or self.solo[self.local_ends[0][2]].version
                        != self.local_ends[0][1]):
                    heapq.heappop(self.local_ends)
                if not self.local_ends and not queue and a >= len(arrivals):
                    break
            t_arrival = arrivals[a].arrival_s * 1e3 if a < len(arrivals) else math.inf
            t_local = self.local_ends[0][0] if self.local_ends else math.inf
            until = min(t_arrival, next_sample, t_local)
            if not self.flow.names:
                if not math.isfinite(min(t_arrival, t_local)):
                    break  # queued jobs that never fit (cannot happen after _fits_empty)
                t = max(t, min(t_arrival, t_local))
            else:
                t, reason = self.flow.run(t, until)
                if reason == STOP_DRAIN:
                    self._drain()
                elif reason == STOP_FINISHED:
                    self._finish(self.flow.names[int(self.flow.finished[0])], t)
                    queue = self._retry(queue, t)
                elif reason == STOP_SOLO:
                    self._kernel_to_solo(self.flow.names[int(self.flow.finished[0])], t)
                elif reason == STOP_IDLE:
                    t = until
            while self.local_ends and self.local_ends[0][0] <= t:
                end, version, name = heapq.heappop(self.local_ends)
                if name in self.networked and (name not in self.solo
                                               or self.solo[name].version != version):
                    continue  # a stretch that ended early: the job went back to the kernel
                self._finish(name, end)
                queue = self._retry(queue, t)
            if t >= next_sample:
                self._drain()
                sent = self._sent_by_node(t)
                samples.append((sent - last_sent) / ((t - samples_t[-1]) * 1e-3))
                samples_t.append(t)
                last_sent = sent
                next_sample = t + self.sample_ms
                if self.progress is not None:
                    self.progress(t)
        self._drain()
        sent = self._sent_by_node()
        if t > samples_t[-1]:
            samples.append((sent - last_sent) / ((t - samples_t[-1]) * 1e-3))
            samples_t.append(t)
        for name, chunks in self.durations.items():
            if chunks:
                self.results[name].durations_ms = np.concatenate(chunks)
        first = min((j.arrival_ms for j in self.results.values()), default=0.0)
        ends = [j.end_ms for j in self.results.values() if j.end_ms is not None]
        tct = (max(ends) - first) if ends else 0.0
        cap = self.cluster.link_gbps
        gamma = float(np.mean(sent / (tct * 1e-3)) / cap.max()) if tct > 0 else 0.0
        return RunResult(
            policy=self.policy_name, jobs=self.results, tct_ms=tct, gamma=gamma,
            link_names=tuple(n.name for n in self.cluster.nodes),
            link_capacity_gbps=cap.copy(), link_sent_gbit=sent,
            util_t_ms=np.asarray(samples_t[1:]),
            util_gbps=np.asarray(samples) if samples else np.zeros((0, len(cap))),
            decision_s=np.asarray(self.decision_s),
            recalculations=self.controller.recalculations if self.controller else 0,
            pattern_updates=self.pattern_updates, wall_s=time.perf_counter() - wall,
            controller=self.controller, link_plans=dict(self.link_plans))

    def _sent_by_node(self, t: float | None = None) -> NDArray[np.float64]:
        out = self.sent_by_node.copy()
        for name, solo in self.solo.items():  # spread evenly over the stretch
            if t is None or solo.end <= solo.s0:
                continue
            share = min(max((t - solo.s0) / (solo.end - solo.s0), 0.0), 1.0)
            n = self.job_by_name[name].iterations - solo.i0
            np.add.at(out, self.pod_node_links[name], self.params[name][3] * n * share)
        for j, name in enumerate(self.flow.names):
            pods = self.flow.pod_job == j
            np.add.at(out, self.pod_node_links[name], self.flow.p["sent"][pods])
        return out
